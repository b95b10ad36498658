// cuda_kernel_perf -R: the CUDA twin's DCT-MP row kernels (per-row top-K
// select, wire pack, unpack into dense rows) against cudaMemcpy D2D, on
// n elements as n / rowLength fp32 rows. Bytes per call as kernel_perf's
// row kernels (row_bench.h): 4 per element of the dense rows.
#pragma once

#include <cstddef>

namespace dctbench {

struct CudaRowOptions {
  size_t minN = size_t(1) << 20, maxN = size_t(1) << 26, factor = 4;
  int reps = 10;
  size_t rowLength = 64;
  double rowDensity = 0.05;
};

// Prints one table; returns the exit status.
int runCudaRowBench(const CudaRowOptions& opt, const char* deviceName);

}  // namespace dctbench
