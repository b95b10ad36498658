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
// of a vector travels in slot q, slotBytes from slot q - 1: the chunk's
// scale (one accumulation-type value) first, then its sign words. The
// scale rides with the signs, so a phase is one collective, and slotBytes
// (onebitSlotBytes) is a multiple of the scale's size, so every scale is
// aligned where the slots' base is (8 bytes).
DCT_HOST_DEVICE size_t onebitSlotBytes(size_t chunkWords, size_t scaleBytes) {
  return scaleBytes + (chunkWords * 4 + scaleBytes - 1) / scaleBytes * scaleBytes;
}

template <typename A>
struct OnebitSlotsOf {
  const unsigned char* base;
  size_t slotBytes;
  DCT_HOST_DEVICE A scale(size_t q) const { return *reinterpret_cast<const A*>(base + q * slotBytes); }
  DCT_HOST_DEVICE const uint32_t* words(size_t q) const {
    return reinterpret_cast<const uint32_t*>(base + q * slotBytes + sizeof(A));
  }
};

// A server's input: slot r of `slots` holds rank r's scale and its signs of
// the server's chunk (word w: elements 32w..32w+31 of the chunk).
struct OnebitMean {
  const void* slots = nullptr;
  size_t slotBytes = 0;
  int ranks = 0;  // 0: no mean (a worker's compression)
};

// One worker's (or server's) compression of n values:
//   e = errorIn, or with pending, errorIn - (errorIn >= 0 ? p : -p) with
//       p = pendingScale (errorIn holds the x of a keepX compression, p
//       its scale: e is the error that x left)
//   x = (input ? input : 0) + e         (input widened exactly; e alone
//                                       when input is null), or, when
//                                       mean.ranks > 0 (input null),
//   x = (sum over r = 0..ranks-1, in r order, of (bit ? s_r : -s_r)) / ranks
//       + e                              (bit i of rank r's signs, s_r its
//                                       scale; the server's average)
//   signs = the sign bits of x, scale = the rule above,
//   errorOut = x - (x >= 0 ? scale : -scale)   (errorOut = x when the
//                                              scale is NaN: never committed)
//   or, with keepX, errorOut = x: the error is formed by the next
//   compression (pending), which reads x once for both, so the error
//   update needs no pass of its own.
// input is dtype (any), errorIn/errorOut/scale accumulationType(dtype).
// errorOut may equal errorIn. The signs go into slots (layout above): sign
// word w into slot w / chunkWords; the scale into the first slotCount
// slots (at least every slot that holds words). Words past the vector are
// not written. scratch: onebitScratchBytes(n) bytes in this twin's memory.
// The op returns sumOfSquares and scaleValue on the host.
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
};

// The allreduce's output: out[i] = (bit i ? s_j : -s_j) * factor, formed in
// the accumulation type and rounded once to dtype, where j = i / (32 *
// chunkWords) and slot j of `slots` holds s_j and chunk j's sign words. A
// NaN factor writes the canonical quiet NaN everywhere (the same bits on
// both twins).
struct OnebitDecodeArgs {
  const void* slots;
  size_t slotBytes;
  size_t chunkWords;  // > 0
  size_t n;
  dctDataType_t dtype;  // out's type
  void* out;
  double factor;
};

DCT_HOST_DEVICE size_t onebitWords(size_t n) { return (n + 31) / 32; }

// Level-1 partials (one per 1024 elements) and room for the next level
// beside them (the CUDA twin reduces level to level in two halves).
inline size_t onebitScratchBytes(size_t n) {
  const size_t groups = (onebitWords(n) + 31) / 32;
  return (groups + (groups + 31) / 32 + 1) * sizeof(double);
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

}  // namespace dct
