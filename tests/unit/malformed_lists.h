// Corruptions of a valid packed index list (index_packing.h) that both
// twins must reject whole: scatterAddPacked returns dctInternalError and
// writes nothing. Shared by the CPU (unit) and CUDA packing tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/index_packing.h"

namespace dct::test {

struct MalformedList {
  std::string what;
  std::vector<uint8_t> bytes;
  size_t n;  // dense size to scatter into
};

template <typename U>
void writeAt(std::vector<uint8_t>& bytes, size_t offset, U value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(U));
}

// `good` packs idx (at least 3 groups), whose indices are all < n.
template <typename I>
std::vector<MalformedList> malformedLists(const std::vector<uint8_t>& good, const std::vector<I>& idx,
                                          size_t n) {
  const packing::Layout l(idx.size(), sizeof(I));
  const size_t last = l.groups - 1, mid = l.groups / 2;
  std::vector<MalformedList> out;
  auto add = [&](const char* what, size_t denseSize, auto&& edit) {
    MalformedList m{what, good, denseSize};
    edit(m.bytes);
    out.push_back(std::move(m));
  };
  add("truncated by a word", n, [](auto& b) { b.resize(b.size() - 8); });
  add("size not a whole word", n, [](auto& b) { b.resize(b.size() + 4); });
  add("width wider than the index type", n,
      [&](auto& b) { b[l.widths + mid] = static_cast<uint8_t>(8 * sizeof(I) + 8); });
  add("width disagreeing with the offsets", n, [&](auto& b) { b[l.widths + last - 1] += 1; });
  add("offsets out of order", n, [&](auto& b) { writeAt<uint32_t>(b, l.offsets + 4, 1u << 30); });
  add("first offset not zero", n, [&](auto& b) { writeAt<uint32_t>(b, l.offsets, 1u); });
  add("not ascending across a group boundary", n,
      [&](auto& b) { writeAt<I>(b, (mid + 1) * sizeof(I), idx[(mid + 1) * packing::kPackGroup - 1]); });
  add("a group starting far below the previous one", n, [&](auto& b) { writeAt<I>(b, last * sizeof(I), I(0)); });
  add("a middle group at index n", n, [&](auto& b) { writeAt<I>(b, mid * sizeof(I), static_cast<I>(n)); });
  add("last index at n", static_cast<size_t>(idx.back()), [](auto&) {});
  return out;
}

}  // namespace dct::test
