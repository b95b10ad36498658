// CPU twin of mergePacked: the sum of P packed messages in one pass over the
// output. Zeroing the output and scatter-adding message after message costs
// P + 1 passes of scattered read-modify-writes over a tensor far larger than
// the caches (measured 0.07x memcpy's byte rate). Here the output is built
// in blocks that fit in L1: zero the block, add every message's entries that
// fall in it, in message order (each message is a cursor walking its
// ascending indices), while the block stays in cache: the output leaves the
// cache once. Per element that is the same additions in the same order: the
// same bits. Past kStreamBytes the block is built on the stack and streamed
// out (cpu_stream.h): the output moves once, as writes only; the stack block
// is zeroed as it goes out, in the same pass.
#include <algorithm>
#include <cstring>
#include <new>
#include <type_traits>

#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "kernels/cpu_context.h"
#include "kernels/cpu_stream.h"
#include "kernels/index_packing.h"
#include "kernels/packed_cursor.h"

namespace dct {
namespace {

constexpr size_t kBlockBytes = 16 << 10;
// Below one entry in kSparseFill elements (all messages together) the
// merge zeroes and scatters instead (cpuMergePacked).
constexpr size_t kSparseFill = 64;

template <typename T, typename V, typename I>
void merge(CpuContext* ctx, const MergeArgs& a) {
  constexpr size_t kBlock = kBlockBytes / sizeof(T);
  T* dense = static_cast<T*>(a.dense);
  const size_t blocks = (a.n + kBlock - 1) / kBlock;
  // A result that leaves the caches anyway is built in a block on the
  // stack and streamed out: its lines are never read for ownership.
  const bool stream = a.stream && streamAligned(dense);
  using Cursor = PackedCursor<V, I>;
  static_assert(std::is_trivially_destructible_v<Cursor> && sizeof(Cursor) <= kCursorBytes);
  ctx->pool.parallelFor(blocks, kMinPerWorker / kBlock, [&](size_t b, size_t e, int w) {
    Cursor* cursors = reinterpret_cast<Cursor*>(ctx->cursors.as<char>() + size_t(w) * a.count * kCursorBytes);
    for (int r = 0; r < a.count; r++) new (&cursors[r]) Cursor(a.messages[r], a.n);
    for (int r = 0; r < a.count; r++) cursors[r].seek(b * kBlock);
    alignas(64) T local[kBlock];
    if (stream) std::memset(local, 0, sizeof(local));  // kept zero: zeroed as it is streamed out
    for (size_t k = b; k < e; k++) {
      const size_t begin = k * kBlock, len = std::min(kBlock, a.n - begin);
      T* block = stream ? local : dense + begin;
      if (!stream) std::memset(block, 0, len * sizeof(T));  // +0: the first addition is exact
      for (int r = 0; r < a.count; r++) cursors[r].addBelow(begin + len, block, begin);
      // dctAvg's 1/P while the block is in cache: the scale op's bits, one
      // pass fewer (fp32/fp64 only, as the scale op; cpuMergePacked checks).
      if constexpr (std::is_floating_point_v<T>) {
        const T f = static_cast<T>(a.factor);  // a local: block writes cannot alias it
        if (a.factor != 1.0)
          for (size_t i = 0; i < len; i++) block[i] *= f;
      }
      if (stream) streamOutAndZero(dense + begin, local, len * sizeof(T));
    }
    if (stream) streamFence();
  });
}

}  // namespace

dctResult_t cpuPrepareCursors(KernelContext* kc, const PackedMessage* messages, int count, int indexBytes,
                              uint64_t n, bool checked, size_t cursorBytes, int& malformed, size_t& entries) {
  malformed = -1;
  entries = 0;
  for (int r = 0; r < count; r++) {
    const PackedMessage& m = messages[r];
    if (!checked && !cpuValidPackedList(kc, m.indices, m.packedBytes, m.nnz, indexBytes, n)) {
      malformed = r;
      return dctInternalError;
    }
    if (!checkedAdd(entries, m.nnz, entries)) return dctInvalidArgument;
  }
  CpuContext* ctx = cpuCtx(kc);
  size_t bytes = 0;
  if (!checkedMul(static_cast<size_t>(ctx->pool.size()) * cursorBytes, static_cast<size_t>(count), bytes))
    return dctOutOfMemory;
  return ctx->cursors.reserve(bytes);
}

dctResult_t cpuMergePacked(KernelContext* kc, MergeArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  MergeArgs& a = *args;
  // The check reserves the cursors: the merge after it allocates nothing,
  // so it can run after a call's last vote.
  size_t entries = 0;
  DCTCHECK(cpuPrepareCursors(kc, a.messages, a.count, a.indexBytes, a.n, a.checked, kCursorBytes, a.malformed,
                             entries));
  if (a.checkOnly) return dctSuccess;
  if (a.factor != 1.0 && a.dtype != dctFloat32 && a.dtype != dctFloat64) return dctInvalidArgument;
  if (entries < a.n / kSparseFill) {
    // A few entries a block: every block's cursor seeks cost more than
    // zeroing at memset's rate and adding message after message, which is
    // the merge's definition: the same bits.
    DCTCHECK(cpuZero(kc, a.dense, a.n * dtypeSize(a.dtype), nullptr));
    for (int r = 0; r < a.count; r++) {
      const PackedMessage& m = a.messages[r];
      ScatterArgs add{a.dense, a.n, a.dtype, a.indexBytes, m.indices, m.values, m.nnz, true, m.packedBytes};
      add.valueType = a.valueType;
      DCTCHECK(cpuScatterAddPacked(kc, &add, nullptr));
    }
    return a.factor == 1.0 ? dctSuccess : cpuScale(kc, a.dense, a.n, a.dtype, a.factor, nullptr);
  }
  ScatterArgs types{a.dense, a.n, a.dtype, a.indexBytes, nullptr, nullptr, 0, true};
  types.valueType = a.valueType;
  return dispatchScatter(types, [&]<typename T, typename V, typename I>() { merge<T, V, I>(ctx, a); });
}

}  // namespace dct
