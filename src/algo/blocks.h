// One alltoallv's per-peer blocks: their sizes and where each starts in a
// contiguous buffer (the DCT-MP all-to-all and the DES reduce-scatter).
#pragma once

#include <cstddef>
#include <vector>

namespace dct {

struct Blocks {
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  void place() {
    offsets.resize(bytes.size());
    total = 0;
    for (size_t q = 0; q < bytes.size(); q++) {
      offsets[q] = total;
      total += bytes[q];
    }
  }
};

}  // namespace dct
