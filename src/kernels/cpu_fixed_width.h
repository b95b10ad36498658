// Host encode, check and decode of packed index groups (index_packing.h)
// at a bit width known at compile time. The shared functions read or write
// each gap at a runtime width (a multiply, two words, a clamp) and the
// decode tests every index; on the host that made checking and writing the
// split plan's gathered ranges its largest cost. A whole group (kPackGroup
// entries) holds exactly 2 * width words, so every gap's word and shift
// are constants once the width is: one table entry per width, unrolled.
// The short last group of a list and widths past kFastWidths (gaps over
// 2^32) take the shared functions. Same bytes, same indices, same
// verdicts (tests/unit/test_fixed_width_groups.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "kernels/index_packing.h"

namespace dct::packing {

constexpr int kFastWidths = 32;

// Gap J (0-based) of a whole group of width W.
template <int W, size_t J>
inline uint64_t fixedGap(const uint64_t* words) {
  if constexpr (W == 0) {
    return 0;
  } else {
    constexpr size_t bit = J * W, word = bit / 64, shift = bit % 64;
    uint64_t gap = words[word] >> shift;
    if constexpr (shift + W > 64) gap |= words[word + 1] << (64 - shift);
    return gap & ((uint64_t(1) << W) - 1);
  }
}

// Sum of a whole group's gaps: below 2^40 at W <= 32, no wrap.
template <int W, size_t... J>
uint64_t fixedGapSum(const uint64_t* words, std::index_sequence<J...>) {
  return (uint64_t(0) + ... + fixedGap<W, J>(words));
}

template <int W, size_t J>
inline void putFixedGap(uint64_t* words, uint64_t gap) {
  if constexpr (W != 0) {
    constexpr size_t bit = J * W, word = bit / 64, shift = bit % 64;
    words[word] |= gap << shift;
    if constexpr (shift + W > 64) words[word + 1] |= gap >> (64 - shift);
  }
}

template <typename I, int W, size_t... J>
void fixedPack(const I* idx, uint64_t* words, std::index_sequence<J...>) {
  for (size_t w = 0; w < 2 * W; w++) words[w] = 0;
  (putFixedGap<W, J>(words, static_cast<uint64_t>(idx[J + 1] - idx[J] - 1)), ...);
}

template <typename I, int W, size_t... J>
void fixedUnpack(uint64_t base, const uint64_t* words, I* out, std::index_sequence<J...>) {
  out[0] = static_cast<I>(base);
  ((base += fixedGap<W, J>(words) + 1, out[J + 1] = static_cast<I>(base)), ...);
}

using Gaps = std::make_index_sequence<kPackGroup - 1>;
using GapSumFn = uint64_t (*)(const uint64_t*);
template <typename I>
using UnpackFn = void (*)(uint64_t, const uint64_t*, I*);
template <typename I>
using PackFn = void (*)(const I*, uint64_t*);

template <size_t... W>
constexpr std::array<GapSumFn, sizeof...(W)> gapSums(std::index_sequence<W...>) {
  return {[](const uint64_t* words) { return fixedGapSum<int(W)>(words, Gaps{}); }...};
}
template <typename I, size_t... W>
constexpr std::array<UnpackFn<I>, sizeof...(W)> unpackers(std::index_sequence<W...>) {
  return {[](uint64_t base, const uint64_t* words, I* out) { fixedUnpack<I, int(W)>(base, words, out, Gaps{}); }...};
}
template <typename I, size_t... W>
constexpr std::array<PackFn<I>, sizeof...(W)> packers(std::index_sequence<W...>) {
  return {[](const I* idx, uint64_t* words) { fixedPack<I, int(W)>(idx, words, Gaps{}); }...};
}

using FastWidths = std::make_index_sequence<kFastWidths + 1>;
inline constexpr std::array<GapSumFn, kFastWidths + 1> kGapSums = gapSums(FastWidths{});
template <typename I>
inline constexpr std::array<UnpackFn<I>, kFastWidths + 1> kUnpackers = unpackers<I>(FastWidths{});
template <typename I>
inline constexpr std::array<PackFn<I>, kFastWidths + 1> kPackers = packers<I>(FastWidths{});

// encodeGroup's words for `count` ascending indices at `width`.
template <typename I>
void packGroup(const I* idx, size_t count, int width, uint64_t* words) {
  if (count == kPackGroup && width <= kFastWidths) return kPackers<I>[width](idx, words);
  encodeGroup(idx, count, width, words);
}

// validGroup's verdict. A whole group's indices ascend strictly, so they
// all lie in [base, n) exactly when base does and the last index (base plus
// every gap + 1, checked for wrap) does.
template <typename I>
bool validGroupFast(const Sections<I>& s, size_t g, size_t groups, size_t nnz, uint64_t n, size_t words) {
  const int width = s.widths[g];
  if (groupSize(nnz, g) != kPackGroup || width > kFastWidths) return validGroup(s, g, groups, nnz, n, words);
  if (!validFrame(s, g, groups, nnz, words)) return false;
  const uint64_t base = s.bases[g];
  const uint64_t last = base + kGapSums[width](s.data + s.offsets[g]) + (kPackGroup - 1);
  if (base >= n || last < base || last >= n) return false;
  return g + 1 == groups || last < static_cast<uint64_t>(s.bases[g + 1]);
}

// Group g of a checked list (validGroup held) decoded into out[0, count).
template <typename I>
void unpackGroup(const Sections<I>& s, size_t g, size_t nnz, uint64_t n, I* out) {
  const int width = s.widths[g];
  const size_t count = groupSize(nnz, g);
  const uint64_t* words = s.data + s.offsets[g];
  if (count == kPackGroup && width <= kFastWidths) return kUnpackers<I>[width](s.bases[g], words, out);
  decodeGroup<I>(s.bases[g], words, s.offsets[g + 1] - s.offsets[g], width, count, n,
                 [&](size_t j, I i) { out[j] = i; });
}

}  // namespace dct::packing
