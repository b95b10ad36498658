// CPU twin of mergePackedCoo: the sum of P packed messages as COO, walking
// only their entries. Building the dense sum and selecting its nonzeros
// costs two passes over the whole tensor (64 MiB at 16M fp32) however few
// entries there are; a union of sparse messages needs only their entries.
// The index space is cut in chunks, one cursor per message walks each; a
// chunk's output starts where its messages' entries start (the union of a
// chunk has at most that many), and the chunks are closed up afterwards.
// Within a chunk, up to kMaxStepped messages step together
// (cpu_union_steps.h). More are summed in windows of the index space in
// cache (message after message, a bit marking each touched element) and
// read out in index order: per entry an add and two bits (the element's,
// and its word's in a summary word, so a window of a few entries reads
// those words, not 64), no data-dependent choice of the next message (a
// k-way scan mispredicted every step: 20 ns an entry).
// Per index: the same additions in the same order as mergePacked, then the
// scale op's multiply and the select's test: the same entries and bits.
#include <algorithm>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "base/debug.h"
#include "kernels/cpu_context.h"
#include "kernels/cpu_union_steps.h"
#include "kernels/packed_cursor.h"

namespace dct {
namespace {

// Elements of one summing window (16 KiB of fp32): it stays in L1.
constexpr size_t kWindow = 4096;
// Entries below which one thread merges everything.
constexpr size_t kMinEntriesPerChunk = size_t(1) << 14;

template <typename T, typename V, typename I>
void mergeCoo(CpuContext* ctx, MergeCooArgs& a, size_t entries) {
  using Cursor = PackedCursor<V, I>;
  static_assert(std::is_trivially_destructible_v<Cursor> && sizeof(Cursor) <= kCursorBytes);
  const size_t workers = static_cast<size_t>(ctx->pool.size());
  size_t chunks = entries / kMinEntriesPerChunk;
  chunks = chunks < 1 ? 1 : chunks > 4 * workers ? 4 * workers : chunks;
  if (chunks > a.n) chunks = a.n ? a.n : 1;
  std::vector<size_t> starts(chunks), written(chunks);
  I* const outIndices = static_cast<I*>(a.outIndices);
  T* const outValues = static_cast<T*>(a.outValues);
  const T factor = static_cast<T>(a.factor), tau = static_cast<T>(a.tau);
  ctx->pool.parallelFor(chunks, 1, [&](size_t b, size_t e, int w) {
    char* arena = ctx->cursors.as<char>() + size_t(w) * a.count * (kCursorBytes + sizeof(uint64_t));
    Cursor* cursors = reinterpret_cast<Cursor*>(arena);
    uint64_t* heads = reinterpret_cast<uint64_t*>(arena + a.count * kCursorBytes);  // each cursor's next index
    // A window of the index space summed in cache: the sums, and a bit per
    // element that some message touched (the union's members), both left
    // zero after each window.
    alignas(64) T window[kWindow];
    static_assert(kWindow == 64 * 64, "one summary word marks the window's touched words");
    uint64_t touched[kWindow / 64];
    uint64_t touchedWords = 0;  // bit w: touched[w] has a bit (a sparse window reads only those)
    if (a.count > kMaxStepped) {
      std::fill(window, window + kWindow, T(0));  // +0: the first addition is exact, as in mergePacked
      std::fill(touched, touched + kWindow / 64, uint64_t(0));
    }
    for (size_t k = b; k < e; k++) {
      const uint64_t begin = a.n / chunks * k + std::min<uint64_t>(k, a.n % chunks);
      const uint64_t end = begin + a.n / chunks + (k < a.n % chunks ? 1 : 0);
      auto headOf = [&](const Cursor& c) { return c.done() ? end : std::min<uint64_t>(c.index(), end); };
      size_t at = 0;
      for (int r = 0; r < a.count; r++) {
        new (&cursors[r]) Cursor(a.messages[r], a.n);
        cursors[r].seek(begin);
        at += cursors[r].position();
        heads[r] = headOf(cursors[r]);
      }
      starts[k] = at;
      CooOut<T, I> out{outIndices, outValues, at, a.indexBase, factor, tau};
      if (a.count <= kMaxStepped) {
        Cursor* live[kMaxStepped];
        int count = 0;
        for (int r = 0; r < a.count; r++)
          if (cursors[r].runBelow(end) != 0) live[count++] = &cursors[r];
        out.at = unionOfAny(live, count, end, out);
      }
      for (; a.count > kMaxStepped;) {
        uint64_t base = end;  // the window starts at the smallest index left
        for (int r = 0; r < a.count; r++) base = heads[r] < base ? heads[r] : base;
        if (base == end) break;
        const uint64_t stop = std::min<uint64_t>(base + kWindow, end);
        for (int r = 0; r < a.count; r++) {  // message after message: rank order per index
          Cursor& c = cursors[r];
          c.visitBelow(stop, [&](uint64_t index, V v) {
            const uint64_t i = index - base;
            addInto(window[i], v);
            touched[i / 64] |= uint64_t(1) << (i % 64);
            touchedWords |= uint64_t(1) << (i / 64);
          });
          heads[r] = headOf(c);
        }
        for (; touchedWords != 0; touchedWords &= touchedWords - 1) {
          const uint64_t word = static_cast<uint64_t>(__builtin_ctzll(touchedWords));
          for (uint64_t bits = touched[word]; bits != 0; bits &= bits - 1) {
            const uint64_t i = word * 64 + static_cast<uint64_t>(__builtin_ctzll(bits));
            out.put(base + i, window[i]);
            window[i] = T(0);
          }
          touched[word] = 0;
        }
      }
      written[k] = out.at - starts[k];
    }
  });
  size_t nnz = 0;
  for (size_t k = 0; k < chunks; k++) {
    if (starts[k] != nnz) {
      std::memmove(outIndices + nnz, outIndices + starts[k], written[k] * sizeof(I));
      std::memmove(outValues + nnz, outValues + starts[k], written[k] * sizeof(T));
    }
    nnz += written[k];
  }
  a.nnz = nnz;
}

}  // namespace

dctResult_t cpuMergePackedCoo(KernelContext* kc, MergeCooArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  MergeCooArgs& a = *args;
  a.nnz = 0;
  a.malformed = -1;
  if (a.dtype != dctFloat32 && a.dtype != dctFloat64) return dctNotSupported;  // sums in an accumulation type
  size_t entries = 0;
  DCTCHECK(cpuPrepareCursors(kc, a.messages, a.count, a.indexBytes, a.n, a.checked, kCursorBytes + sizeof(uint64_t),
                             a.malformed, entries));
  if (entries > a.capacity) return dctInvalidArgument;
  if (entries == 0) return dctSuccess;
  ScatterArgs types{nullptr, a.n, a.dtype, a.indexBytes, nullptr, nullptr, 0, true};
  types.valueType = a.valueType;
  return dispatchScatter(types, [&]<typename T, typename V, typename I>() {
    if constexpr (std::is_floating_point_v<T>) mergeCoo<T, V, I>(ctx, a, entries);
  });
}

}  // namespace dct
