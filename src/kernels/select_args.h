// Arguments of the select and threshold ops (kernels.h): error feedback,
// threshold select and compaction, and the threshold estimate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dct/dct.h"

namespace dct {

// Fused error feedback + threshold select + compaction:
//   acc = (grad ? grad : 0) + (residualIn ? residualIn : residual)
//   selected = { i : !(|acc_i| < tau) }   (so NaN and Inf are always selected)
//   out = selected entries in ascending index order, at most `capacity`,
//         each value rounded to valueType, a valueType narrower than dtype
//         clamped to +-valueLimit first (storeSaturated: a finite acc never
//         becomes Inf, and P such values never sum past the type's range)
//   residual = acc minus what was written for the written entries (0 when
//   valueType is dtype, or the rounding error; 0 for NaN/Inf), entries
//   beyond capacity keep their acc: nothing is ever lost.
// dtype is the accumulation type (residual, acc: fp32 or fp64); grad is
// gradType (any, converted exactly or rounded to dtype), values valueType.
// Reading the old residual from residualIn and writing the new one to
// `residual` costs the same traffic as in place and leaves the old one
// intact: the compressor commits a step only when every rank succeeded.
// Tensors from this size on leave the caches before their result is read
// again (a step touches gradient, residual, spare and result: 4x this): the
// CPU twin's select writes the new residual and its merge writes the result
// with non-temporal stores, sparing every line's read for ownership
// (SelectArgs::stream, MergeArgs::stream; measured crossover on a 32 MiB L3:
// 2^21 fp32 elements, bench/results/2026-11-25-select-avx2).
constexpr size_t kStreamBytes = size_t(8) << 20;

struct SelectArgs {
  const void* grad;  // may be null
  void* residual;    // out (and in, when residualIn is null)
  size_t n;
  dctDataType_t dtype;
  int indexBytes;  // 4 or 8
  double tau;      // > 0
  size_t capacity;
  void* outIndices;
  void* outValues;
  size_t nnz = 0;        // out: entries written
  size_t selected = 0;   // out: entries meeting the threshold (may exceed nnz)
  size_t nonFinite = 0;  // out: NaN/Inf among the written entries
  const void* residualIn = nullptr;  // may equal residual
  dctDataType_t gradType = dctNumTypes;   // dctNumTypes: dtype
  dctDataType_t valueType = dctNumTypes;  // dctNumTypes: dtype
  double valueLimit = 0;  // a valueType value; 0: valueType's largest finite
  bool stream = false;    // the tensor is past kStreamBytes
  const void* in() const { return residualIn ? residualIn : residual; }
  dctDataType_t gradT() const { return gradType == dctNumTypes ? dtype : gradType; }
  dctDataType_t valueT() const { return valueType == dctNumTypes ? dtype : valueType; }
};

struct ThresholdArgs {
  const void* data;
  size_t n;
  dctDataType_t dtype;  // any type (the all-to-all's rows may be fp16/bf16)
  double density;
  dctThresholdMethod_t method;
  uint64_t seed;  // sample PRNG stream (sampled method)
  int maxPasses = 0;  // bisect: counting-pass budget (0: kBisectMaxPasses, threshold_bisect.h)
  int passes = 0;     // out: counting passes over x the bisect method made (0 for the others)
  // Sampled and exact: estimate on data + addend (the gradient, in its own
  // type, widened to data's float/double first, as the add kernel forms an
  // accumulator), bit for bit the estimate on that sum materialised, without
  // writing it. Bisect passes over x many times: it takes no addend.
  const void* addend = nullptr;
  dctDataType_t addendType = dctNumTypes;  // dctNumTypes: dtype
  dctDataType_t addendT() const { return addendType == dctNumTypes ? dtype : addendType; }
};

}  // namespace dct
