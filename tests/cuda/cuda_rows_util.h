// Shared by the CUDA row tests (test_cuda_rows.cc, test_cuda_rows_reject.cc):
// the wire mask formats a row length allows, and the bit-exact compare.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

namespace dct::test {

inline std::vector<int> formatsFor(size_t D) {
  std::vector<int> f = {-1, 0, 4};
  if (D <= 256) f.push_back(1);
  if (D <= 65536) f.push_back(2);
  return f;
}

template <typename V>
void requireSameBytes(const std::vector<V>& gpu, const std::vector<V>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  CHECK(std::memcmp(gpu.data(), cpu.data(), gpu.size() * sizeof(V)) == 0);
}

}  // namespace dct::test
