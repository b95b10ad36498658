// The threshold estimator's deterministic sample: positions, per-step
// seeds and the sample size, the same in both twins.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"

namespace dct {

// Deterministic sample positions: splitmix64 stream mapped onto [0, n).
DCT_HOST_DEVICE uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// The sample stream of one step: the same on every run, different every step
// (on a device too: the fixed-capacity step reads its step from device memory).
DCT_HOST_DEVICE uint64_t stepSeed(long long seed, uint64_t step) {
  uint64_t s = static_cast<uint64_t>(seed) ^ (step * 0xd1b54a32d192ed03ull);
  return splitmix64(s);
}
inline size_t samplePosition(uint64_t random, size_t n) {
  return static_cast<size_t>((static_cast<unsigned __int128>(random) * n) >> 64);
}
// Sample size for the sampled estimator: ~256 samples above the kept
// quantile (count noise ~ +-6%, well inside the +-25% drift band), at least
// 4096, at most 2^20 random gathers (5M gathers at density 1e-4 measured 3x
// slower than the dense allreduce). Past n/2 the estimate is exact (n).
inline size_t thresholdSampleSize(size_t n, double density) {
  double s = 256.0 / density;
  if (s < 4096.0) s = 4096.0;
  if (s > 1048576.0) s = 1048576.0;
  return 2.0 * s >= static_cast<double>(n) ? n : static_cast<size_t>(s);
}

}  // namespace dct
