// CPU twin of mergePacked: the sum of P packed messages in one pass over the
// output. Zeroing the output and scatter-adding message after message costs
// P + 1 passes of scattered read-modify-writes over a tensor far larger than
// the caches (measured 0.07x memcpy's byte rate). Here the output is built
// in blocks that fit in L1: zero the block, add every message's entries that
// fall in it, in message order (each message is a cursor walking its
// ascending indices), while the block stays in cache: the output leaves the
// cache once. Per element that is the same additions in the same order: the
// same bits. Past kStreamBytes the block is built on the stack and streamed
// out (cpu_stream.h): the output moves once, as writes only.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu_context.h"
#include "kernels/cpu_stream.h"
#include "kernels/index_packing.h"

namespace dct {
namespace {

using packing::kPackGroup;

constexpr size_t kBlockBytes = 16 << 10;

// One message's entries in ascending index order, a decoded group at a time.
template <typename V, typename I>
class Cursor {
 public:
  Cursor(const PackedMessage& m, uint64_t n)
      : layout_(m.nnz, sizeof(I)), s_(const_cast<void*>(m.indices), layout_),
        values_(static_cast<const V*>(m.values)), nnz_(m.nnz), n_(n) {}

  // Positions the cursor on the first entry at or after `begin`.
  void seek(uint64_t begin) {
    if (nnz_ == 0) return;
    const I* bases = s_.bases;
    const I* after = std::upper_bound(bases, bases + layout_.groups, static_cast<I>(begin));
    group_ = after == bases ? 0 : static_cast<size_t>(after - bases) - 1;
    decode();
    while (group_ < layout_.groups && index_[pos_] < begin) advance();
  }

  // Adds every entry below `end` into block (block[0] holds index `base`).
  template <typename T>
  void addBelow(uint64_t end, T* block, uint64_t base) {
    while (group_ < layout_.groups && index_[pos_] < end) {
      addInto(block[index_[pos_] - base], values_[group_ * kPackGroup + pos_]);
      advance();
    }
  }

 private:
  void decode() {
    if (group_ >= layout_.groups) return;
    count_ = packing::groupSize(nnz_, group_);
    pos_ = 0;
    // Checked before the merge (cpuValidPackedList): decodes whole.
    packing::decodeGroup<I>(s_.bases[group_], s_.data + s_.offsets[group_],
                            s_.offsets[group_ + 1] - s_.offsets[group_], s_.widths[group_], count_, n_,
                            [&](size_t j, I i) { index_[j] = i; });
  }
  void advance() {
    if (++pos_ < count_) return;
    group_++;
    decode();
  }

  packing::Layout layout_;
  packing::Sections<I> s_;
  const V* values_;
  size_t nnz_;
  uint64_t n_;
  size_t group_ = 0, pos_ = 0, count_ = 0;
  I index_[kPackGroup];
};

template <typename T, typename V, typename I>
void merge(CpuContext* ctx, const MergeArgs& a) {
  constexpr size_t kBlock = kBlockBytes / sizeof(T);
  T* dense = static_cast<T*>(a.dense);
  const size_t blocks = (a.n + kBlock - 1) / kBlock;
  // A result that leaves the caches anyway is built in a block on the
  // stack and streamed out: its lines are never read for ownership.
  const bool stream = a.stream && streamAligned(dense);
  ctx->pool.parallelFor(blocks, kMinPerWorker / kBlock, [&](size_t b, size_t e, int) {
    std::vector<Cursor<V, I>> cursors;
    cursors.reserve(a.count);
    for (int r = 0; r < a.count; r++) {
      cursors.emplace_back(a.messages[r], a.n);
      cursors.back().seek(b * kBlock);
    }
    alignas(64) T local[kBlock];
    for (size_t k = b; k < e; k++) {
      const size_t begin = k * kBlock, len = std::min(kBlock, a.n - begin);
      T* block = stream ? local : dense + begin;
      std::memset(block, 0, len * sizeof(T));  // +0: the first addition is exact
      for (Cursor<V, I>& c : cursors) c.addBelow(begin + len, block, begin);
      if (stream) streamCopy(dense + begin, local, len * sizeof(T));
    }
    if (stream) streamFence();
  });
}

}  // namespace

dctResult_t cpuMergePacked(KernelContext* kc, MergeArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  MergeArgs& a = *args;
  a.malformed = -1;
  for (int r = 0; r < a.count; r++) {
    const PackedMessage& m = a.messages[r];
    if (!cpuValidPackedList(kc, m.indices, m.packedBytes, m.nnz, a.indexBytes, a.n)) {
      a.malformed = r;
      return dctInternalError;
    }
  }
  ScatterArgs types{a.dense, a.n, a.dtype, a.indexBytes, nullptr, nullptr, 0, true};
  types.valueType = a.valueType;
  return dispatchScatter(types, [&]<typename T, typename V, typename I>() { merge<T, V, I>(ctx, a); });
}

}  // namespace dct
