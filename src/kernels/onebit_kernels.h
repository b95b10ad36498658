// The 1-bit compressed allreduce's kernels (1-bit Adam's collective): the
// message layout, the argument structs of the two ops in the KernelOps
// table, the chunking of a vector over the ranks, and the rules both twins
// share.
//
// Sign bits: bit k of word w stands for element 32w + k; it is set when
// x >= 0 (so sign(0) = sign(-0) = +1 and a set bit decodes to +scale) and
// clear for x < 0 and NaN. Bits past the end of the vector are zero.
//
// Sum of squares, in one fixed order on both twins (so their scales agree
// bit for bit): each square is formed in fp64 ((double)x * (double)x, exact
// for fp32 and the half types); 32 values reduce by the halving tree
// tree32() (t[i] += t[i + s] for s = 16, 8, 4, 2, 1: what a warp's
// shuffle-down reduction computes); level 0 turns each word's 32 elements
// into one sum, level 1 each group of 32 words (1024 elements) into one
// partial, and further levels reduce 32 consecutive partials at a time
// until one value is left. Missing entries (past n) count as +0, which
// changes no sum. Neither twin may contract a square and an add into an
// FMA (the CPU file is built with -ffp-contract=off, the CUDA one uses
// __dmul_rn/__dadd_rn).
//
// scale = sqrt(sumsq / len) in fp64, rounded once to the accumulation type;
// 0 for len 0; NaN when not finite (a NaN/Inf entry, or an fp64 sum of
// squares past DBL_MAX): the allreduce then outputs NaN and commits no error.
//
// Segments (dctCompressorSetSegments): [0, n) cut at offsets 0 = o_0 < o_1
// < ... < o_m = n; each segment has its own scale, and its elements are
// sent and their errors formed with it. A segment's sum of squares is the
// tree above over the whole vector with every square outside the segment
// replaced by +0 (so one segment is the rule above, bit for bit); a twin
// may skip the words and partials that are all zero, since adding +0
// changes no sum of squares. len is the segment's length.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "base/dtype.h"
#include "dct/dct.h"
#include "base/host_device.h"

namespace dct {

// The messages (what travels, and what the ops read and write): chunk q
// of a vector travels in slot q, slotBytes from slot q - 1: `scales`
// scale entries (accumulation-type values) first, then its sign words.
// Entry k of slot q is the scale of the k-th segment that chunk q meets
// (its pieces: onebitPieces; one segment: entry 0 is the scale); entries
// past the chunk's pieces are zero. The scales ride with the signs, so a
// phase is one collective, and slotBytes (onebitSlotBytes) is a multiple of
// the scale's size, so every scale is aligned where the slots' base is (8
// bytes).
DCT_HOST_DEVICE size_t onebitSlotBytes(size_t chunkWords, size_t scaleBytes, size_t scales = 1) {
  return scales * scaleBytes + (chunkWords * 4 + scaleBytes - 1) / scaleBytes * scaleBytes;
}

// The allreduce's slots (core/onebit_state.h: OnebitArena) are longer: the
// call's digest rides in each slot's last 8 bytes (8-byte aligned), past
// what the ops above read or write; the queued step writes and checks it
// (onebit_step_args.h).
constexpr size_t kOnebitDigestBytes = 8;
DCT_HOST_DEVICE size_t onebitSlotWithDigest(size_t slotBytes) { return (slotBytes + 7) / 8 * 8 + kOnebitDigestBytes; }
DCT_HOST_DEVICE size_t onebitDigestOffset(size_t slotBytes) { return slotBytes - kOnebitDigestBytes; }
// Slot q's digest, and whether each of the `ranks` slots carries `digest`:
// the queued step's write and check on both twins.
DCT_HOST_DEVICE uint64_t* onebitDigestAt(void* slots, size_t slotBytes, size_t q) {
  unsigned char* slot = static_cast<unsigned char*>(slots) + q * slotBytes;
  return reinterpret_cast<uint64_t*>(slot + onebitDigestOffset(slotBytes));
}
DCT_HOST_DEVICE bool onebitDigestsMatch(const void* slots, size_t slotBytes, int ranks, uint64_t digest) {
  const unsigned char* base = static_cast<const unsigned char*>(slots) + onebitDigestOffset(slotBytes);
  for (int j = 0; j < ranks; j++)
    if (*reinterpret_cast<const uint64_t*>(base + static_cast<size_t>(j) * slotBytes) != digest) return false;
  return true;
}

template <typename A>
struct OnebitSlotsOf {
  const unsigned char* base;
  size_t slotBytes;
  size_t scales = 1;  // scale entries in front of each slot's words
  DCT_HOST_DEVICE A scale(size_t q, size_t k = 0) const {
    return *reinterpret_cast<const A*>(base + q * slotBytes + k * sizeof(A));
  }
  DCT_HOST_DEVICE const uint32_t* words(size_t q) const {
    return reinterpret_cast<const uint32_t*>(base + q * slotBytes + scales * sizeof(A));
  }
};

// A server's input: slot r of `slots` holds rank r's scale and its signs of
// the server's chunk (word w: elements 32w..32w+31 of the chunk).
struct OnebitMean {
  const void* slots = nullptr;
  size_t slotBytes = 0;
  int ranks = 0;  // 0: no mean (a worker's compression)
};

// One worker's (or server's) compression of n values, segment by segment
// (segments null: one segment [0, n), pendingScale and scaleValue; else
// pendingScales[s] and scaleValues[s] per segment s):
//   e = errorIn, or with pending, errorIn - (errorIn >= 0 ? p : -p) with
//       p = the element's segment's pending scale (errorIn holds the x of a
//       keepX compression, p its scale: e is the error that x left)
//   x = (input ? input : 0) + e         (input widened exactly; e alone
//                                       when input is null), or, when
//                                       mean.ranks > 0 (input null),
//   x = (sum over r = 0..ranks-1, in r order, of (bit ? s_r : -s_r)) / ranks
//       + e                              (bit i of rank r's signs, s_r its
//                                       scale; the server's average)
//   signs = the sign bits of x, scale = the rule above, per segment,
//   errorOut = x - (x >= 0 ? scale : -scale)   (errorOut = x when the
//                                              scale is NaN: never committed)
//   or, with keepX, errorOut = x: the error is formed by the next
//   compression (pending), which reads x once for both, so the error
//   update needs no pass of its own.
// input is dtype (any), errorIn/errorOut/scale accumulationType(dtype).
// errorOut may equal errorIn. The signs go into slots (layout above): sign
// word w into slot w / chunkWords; the scale into the first slotCount
// slots (at least every slot that holds words). Words past the vector are
// not written. Segment s's scale goes into entry s - f(q) of every slot q <
// slotCount whose chunk it meets, f(q) the segment holding the chunk's
// first element (onebitPieces); a slot of an empty chunk takes the last
// segment's scale in entry 0. A server (slotCount 1, n within one chunk)
// thus writes piece k into entry k. With a mean, rank r's scale of element
// i is entry s(i) of its slot (the server's segments are its chunk's
// pieces). scratch: onebitScratchBytes(n, segments) bytes in this twin's
// memory. The op returns sumOfSquares (the segments' total) and
// scaleValue (the largest segment scale, NaN if any is) on the host.
struct OnebitCompressArgs {
  const void* input;  // may be null
  const void* errorIn;
  void* errorOut;
  size_t n;
  dctDataType_t dtype;  // the tensor's type
  void* slots;          // out
  size_t slotBytes;
  size_t chunkWords;
  int slotCount;
  double* scratch;
  OnebitMean mean{};
  bool keepX = false;
  bool pending = false;
  double pendingScale = 0;  // exactly an accumulation-type value
  double sumOfSquares = 0;  // out (host)
  double scaleValue = 0;    // out (host): the scale, exactly
  // Segments: host offsets, segmentCount + 1 of them, 0 first, n last,
  // strictly increasing; null: one segment.
  const size_t* segments = nullptr;
  int segmentCount = 0;
  size_t scalesPerSlot = 1;               // the slots' (and the mean's) scale entries
  const double* pendingScales = nullptr;  // host, per segment (with segments)
  double* scaleValues = nullptr;          // out (host), per segment (with segments)
};

// The allreduce's output: out[i] = (bit i ? s : -s) * factor, formed in
// the accumulation type and rounded once to dtype, where j = i / (32 *
// chunkWords), slot j of `slots` holds chunk j's sign words and s is its
// entry s(i) - f(j) (s(i): i's segment; one segment: entry 0). A NaN factor
// writes the canonical quiet NaN everywhere (the same bits on both twins).
struct OnebitDecodeArgs {
  const void* slots;
  size_t slotBytes;
  size_t chunkWords;  // > 0
  size_t n;
  dctDataType_t dtype;  // out's type
  void* out;
  double factor;
  const size_t* segments = nullptr;  // host, as OnebitCompressArgs's
  int segmentCount = 0;
  size_t scalesPerSlot = 1;
};

DCT_HOST_DEVICE size_t onebitWords(size_t n) { return (n + 31) / 32; }

// Level-1 partials (one per 1024 elements) and room for the next level
// beside them (the CUDA twin reduces level to level in two halves; a
// segment's range of partials may start mid-group, hence the + 2), then
// one sum per segment.
inline size_t onebitScratchBytes(size_t n, size_t segments = 1) {
  const size_t groups = (onebitWords(n) + 31) / 32;
  return (groups + (groups + 31) / 32 + 2 + segments) * sizeof(double);
}

// The fixed rule above; returns a value exactly representable in accType.
inline double onebitScale(double sumOfSquares, size_t len, dctDataType_t accType) {
  if (len == 0) return 0.0;
  double s = std::sqrt(sumOfSquares / static_cast<double>(len));
  if (accType != dctFloat64) s = static_cast<double>(static_cast<float>(s));
  return std::isfinite(s) ? s : std::numeric_limits<double>::quiet_NaN();
}

// Chunking over P ranks: chunk j = [j*c, min(n, (j+1)*c)) with c a multiple
// of 32, so each chunk starts on a sign word; rank j serves chunk j. Chunks
// past the end are empty (n < 32 * P).
struct OnebitChunks {
  size_t n = 0;
  int ranks = 1;
  size_t chunkWords = 0;  // words per chunk: ceil(ceil(n / 32) / P)

  OnebitChunks(size_t count, int p) : n(count), ranks(p), chunkWords((onebitWords(count) + p - 1) / p) {}
  size_t chunkLength() const { return chunkWords * 32; }
  size_t begin(int j) const {
    const size_t b = static_cast<size_t>(j) * chunkLength();
    return b < n ? b : n;
  }
  size_t length(int j) const { return begin(j + 1) - begin(j); }
  size_t words(int j) const { return onebitWords(length(j)); }
};

// The segment holding element i (offsets: count + 1 of them, strictly
// increasing; null: one segment).
inline int onebitSegmentAt(const size_t* offsets, int count, size_t i) {
  if (offsets == nullptr || count <= 1) return 0;
  int lo = 0, hi = count - 1;  // the last s with offsets[s] <= i
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (offsets[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Chunk q's pieces: the segments [first, first + count) it meets (count 0
// for an empty chunk, whose first is the last segment).
struct OnebitPieces {
  int first = 0, count = 0;
};
inline OnebitPieces onebitPieces(const OnebitChunks& chunks, const size_t* offsets, int segments, int q) {
  const size_t b = chunks.begin(q), e = b + chunks.length(q);
  const int m = offsets == nullptr ? 1 : segments;
  if (e == b) return {m - 1, 0};
  const int first = onebitSegmentAt(offsets, m, b);
  return {first, onebitSegmentAt(offsets, m, e - 1) - first + 1};
}

// Scale entries per slot: the most pieces a chunk has (at least 1).
inline size_t onebitScalesPerSlot(const OnebitChunks& chunks, const size_t* offsets, int segments) {
  int most = 1;
  for (int q = 0; q < chunks.ranks; q++) {
    const int k = onebitPieces(chunks, offsets, segments, q).count;
    most = k > most ? k : most;
  }
  return static_cast<size_t>(most);
}

}  // namespace dct
