// The training and test splits as normalised floats, and this rank's shard
// of each epoch's shuffled order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fmnist {

constexpr int kPixels = 28 * 28;
constexpr int kClasses = 10;

struct Split {
  size_t count = 0;
  std::vector<float> x;    // count x kPixels, (p/255 - mean) / std
  std::vector<uint8_t> y;  // count labels
};

// Reads the four files under dir; keeps the first trainCount / testCount
// samples (0 = all). false with the reason in *error.
bool loadFashionMnist(const std::string& dir, size_t trainCount, size_t testCount, Split* train, Split* test,
                      std::string* error);

// The epoch's permutation of 0..count-1 (the same on every rank, from the
// seed), cut into this rank's share: positions rank, rank + ranks, ...
// truncated so every rank has the same number of samples.
std::vector<uint32_t> epochShard(size_t count, uint64_t seed, int epoch, int rank, int ranks);

}  // namespace fmnist
