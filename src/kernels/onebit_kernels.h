// The 1-bit compressed allreduce's kernels (1-bit Adam's collective): the
// argument structs of the three ops in the KernelOps table, the chunking of
// a vector over the ranks, and the rules both twins share.
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

// One worker's (or server's) compression of n values:
//   x = (input ? input : 0) + errorIn   (input widened exactly; errorIn alone
//                                       when input is null)
//   signs = the sign bits of x, scale = the rule above,
//   errorOut = x - (x >= 0 ? scale : -scale)   (errorOut = x when the
//                                              scale is NaN: never committed)
// input is dtype (any), errorIn/errorOut/scale accumulationType(dtype).
// errorOut may equal errorIn. scratch: onebitScratchBytes(n) bytes in this
// twin's memory. The op writes *scale (this twin's memory) and returns
// sumOfSquares and scaleValue on the host.
struct OnebitCompressArgs {
  const void* input;  // may be null
  const void* errorIn;
  void* errorOut;
  size_t n;
  dctDataType_t dtype;  // the tensor's type
  uint32_t* signs;      // out: onebitWords(n) words
  void* scale;          // out: one accumulation-type value
  double* scratch;
  double sumOfSquares = 0;  // out (host)
  double scaleValue = 0;    // out (host): *scale, exactly
};

// A server's average of its chunk over the ranks, plus its error:
//   out[i] = (sum over r = 0..ranks-1, in r order, of (bit ? s_r : -s_r)) / ranks
//            + errorIn[i]
// where bit is bit i of rank r's sign words (at signs + r * strideWords)
// and s_r = scales[r]. Everything in the accumulation type; out may equal
// errorIn.
struct OnebitAverageArgs {
  const uint32_t* signs;
  size_t strideWords;
  const void* scales;  // ranks values
  int ranks;
  const void* errorIn;
  void* out;
  size_t n;
  dctDataType_t dtype;  // the tensor's type (errorIn, out, scales: its accumulation type)
};

// The allreduce's output: out[i] = (bit i ? s_j : -s_j) * factor, formed in
// the accumulation type and rounded once to dtype, where j = i / chunkLength
// and s_j = scales[j]. signs hold the whole vector's words (chunk j's at
// word j * chunkLength / 32). A NaN factor writes the canonical quiet NaN
// everywhere (the same bits on both twins).
struct OnebitDecodeArgs {
  const uint32_t* signs;
  const void* scales;
  size_t chunkLength;  // a multiple of 32
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
