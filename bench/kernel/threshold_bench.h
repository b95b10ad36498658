// Threshold estimators side by side (kernel_perf -T, cuda_kernel_perf -T):
// sampled, exact and bisect on the same inputs, through an ops table as the
// compressor calls them. Per input x n x density x method: the median time
// of one estimate (host wall clock around the op, which returns tau on the
// host, so the CUDA twin's work is included), bisect's counting passes, and
// the count the returned tau selects (!(|x| < tau), counted on the host)
// against k = round(density * n) and the drift band [k/1.25, 1.25k].
//
// Inputs (seeded, the same for every method):
//   normal   N(0, 1): gradient-like, light tails
//   grad     Student-t(3) noise times a log-normal(0, 1) scale per element
//            (dct_perf's gradient model): moderately heavy tails
//   cauchy   Cauchy(0, 1): very heavy tails (max/mean ~ n)
#pragma once

#include <cstddef>
#include <functional>

#include "dct/dct.h"
#include "kernels/kernels.h"

namespace dctbench {

struct ThresholdBenchOptions {
  size_t minN = size_t(1) << 20, maxN = size_t(1) << 24;
  double factor = 4.0;
  int reps = 5;  // timed estimates per row, median reported (+1 warm-up)
  dctDataType_t dtype = dctFloat32;
  double density = 0;  // 0: 0.001, 0.01 and 0.1
};

// Where the estimators read x: the host (nullptr) or device memory.
struct DataPlacement {
  std::function<void*(size_t bytes)> alloc;
  std::function<void(void* dst, const void* src, size_t bytes)> upload;
  std::function<void(void*)> release;
};

// Prints a markdown table; 0 on success, 1 if an estimate failed.
int runThresholdComparison(const ThresholdBenchOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx,
                           void* stream, const DataPlacement* device, const char* title);

// "float" / "double" / "half" (or "fp16") / "bf16".
bool parseThresholdType(const char* s, dctDataType_t& out);

}  // namespace dctbench
