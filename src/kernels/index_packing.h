// Wire format of a message's strictly ascending indices: delta bit-packing.
//
// Plain COO spends 4 bytes per index, as much as the fp32 value it locates.
// Neighbouring selected indices lie ~1/density apart, so their gaps need
// ~log2(1/density) + 1.5 bits: about 1.3 bytes at density 1%. The list is cut
// in groups of kPackGroup entries; each group stores its first index whole
// and the other gaps (minus one) at the group's own bit width. Groups are
// independent, so both twins encode and decode them in parallel, and they
// share the per-group functions below (host and device), which makes the
// bytes identical whichever twin wrote them.
//
// Layout, each section starting on an 8-byte boundary (G = number of groups):
//   bases   [G]     index type: first index of each group
//   offsets [G + 1] uint32: words of `data` before each group (offsets[G]: all)
//   widths  [G]     uint8: bits per gap of each group (0: consecutive indices)
//   data    [offsets[G]] uint64: the gaps, little-endian bit order
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"

namespace dct::packing {

constexpr size_t kPackGroup = 128;

DCT_HOST_DEVICE size_t pad8(size_t bytes) { return (bytes + 7) & ~size_t(7); }
DCT_HOST_DEVICE size_t groupsOf(size_t nnz) { return (nnz + kPackGroup - 1) / kPackGroup; }
DCT_HOST_DEVICE size_t groupSize(size_t nnz, size_t g) {
  size_t begin = g * kPackGroup;
  return nnz - begin < kPackGroup ? nnz - begin : kPackGroup;
}

// Byte offsets of the sections for nnz entries of indexBytes each.
struct Layout {
  size_t groups, offsets, widths, data;  // offsets/widths/data: byte offsets
  DCT_HOST_DEVICE Layout(size_t nnz, int indexBytes) : groups(groupsOf(nnz)) {
    offsets = pad8(groups * indexBytes);
    widths = offsets + pad8((groups + 1) * sizeof(uint32_t));
    data = widths + pad8(groups);
  }
  DCT_HOST_DEVICE size_t bytes(size_t words) const { return groups ? data + words * 8 : 0; }
};

DCT_HOST_DEVICE int bitWidth(uint64_t x) {
  int w = 0;
  while (x) {
    w++;
    x >>= 1;
  }
  return w;
}

// Bits per gap of one group: OR of all (gap - 1) has the largest one's width.
template <typename I>
DCT_HOST_DEVICE int groupWidth(const I* idx, size_t count) {
  uint64_t bits = 0;
  for (size_t j = 1; j < count; j++) bits |= static_cast<uint64_t>(idx[j] - idx[j - 1] - 1);
  return bitWidth(bits);
}

DCT_HOST_DEVICE size_t groupWords(size_t count, int width) {
  return count > 1 ? ((count - 1) * static_cast<size_t>(width) + 63) / 64 : 0;
}

// The sections of a packed list at `base`, typed (both twins' view).
template <typename I>
struct Sections {
  I* bases;
  uint32_t* offsets;
  uint8_t* widths;
  uint64_t* data;
  DCT_HOST_DEVICE Sections(void* base, const Layout& l) {
    char* p = static_cast<char*>(base);
    bases = reinterpret_cast<I*>(p);
    offsets = reinterpret_cast<uint32_t*>(p + l.offsets);
    widths = reinterpret_cast<uint8_t*>(p + l.widths);
    data = reinterpret_cast<uint64_t*>(p + l.data);
  }
};

// Most bytes nnz indices can take: every gap at full width.
inline size_t maxPackedBytes(size_t nnz, int indexBytes) {
  Layout l(nnz, indexBytes);
  return l.bytes(l.groups * groupWords(kPackGroup, 8 * indexBytes));
}

// Word offsets are uint32: lists that could need more words are refused.
inline bool fitsOffsets(size_t nnz, int indexBytes) {
  return groupsOf(nnz) * groupWords(kPackGroup, 8 * indexBytes) <= UINT32_MAX;
}

template <typename I>
DCT_HOST_DEVICE void encodeGroup(const I* idx, size_t count, int width, uint64_t* words) {
  const size_t nw = groupWords(count, width);
  for (size_t w = 0; w < nw; w++) words[w] = 0;
  if (width == 0) return;
  size_t bit = 0;
  for (size_t j = 1; j < count; j++, bit += width) {
    const uint64_t gap = static_cast<uint64_t>(idx[j] - idx[j - 1] - 1);
    const unsigned shift = bit & 63;
    words[bit >> 6] |= gap << shift;
    if (shift + width > 64) words[(bit >> 6) + 1] |= gap >> (64 - shift);
  }
}

DCT_HOST_DEVICE uint64_t widthMask(int width) {
  return width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
}

// Gap j (0-based, so entry j + 1) of a group of wordCount words. Branch-free:
// the next word (clamped to the group) is always merged in, and its bits
// land above `width` unless the gap straddles the two words.
DCT_HOST_DEVICE uint64_t gapAt(const uint64_t* words, size_t wordCount, size_t j, int width,
                               uint64_t mask) {
  const size_t bit = j * static_cast<size_t>(width), w = bit >> 6;
  const unsigned shift = bit & 63;
  const size_t next = w + 1 < wordCount ? w + 1 : w;
  return ((words[w] >> shift) | ((words[next] << 1) << (63 - shift))) & mask;
}

// Calls visit(j, index) for the count entries of one group, in order. Returns
// false (having visited only indices < n) if the group is malformed: a width
// wider than the index type, a word count that disagrees with the offsets,
// or an index at or past n. Never reads outside the group's words.
template <typename I, typename Visit>
DCT_HOST_DEVICE bool decodeGroup(I base, const uint64_t* words, size_t wordCount, int width,
                                 size_t count, uint64_t n, Visit&& visit) {
  if (width > 8 * static_cast<int>(sizeof(I)) || groupWords(count, width) != wordCount) return false;
  const uint64_t mask = widthMask(width);
  uint64_t index = base;
  if (index >= n) return false;
  visit(0, static_cast<I>(index));
  for (size_t j = 1; j < count; j++) {
    const uint64_t gap = width ? gapAt(words, wordCount, j - 1, width, mask) : 0;
    const uint64_t next = index + gap + 1;
    if (next <= index || next >= n) return false;  // wrapped past 2^64, or out of range
    index = next;
    visit(j, static_cast<I>(index));
  }
  return true;
}

// validGroup's checks that decode nothing: group g's words lie inside the
// list, and its width and word count agree (decodeGroup checks the last two
// again; the CUDA twin's warp-parallel decode relies on them).
template <typename I>
DCT_HOST_DEVICE bool validFrame(const Sections<I>& s, size_t g, size_t groups, size_t nnz, size_t words) {
  const uint32_t begin = s.offsets[g], end = s.offsets[g + 1];
  if ((g == 0 && begin != 0) || (g + 1 == groups && end != words)) return false;
  if (end < begin || end > words) return false;
  const int width = s.widths[g];
  return width <= 8 * static_cast<int>(sizeof(I)) && groupWords(groupSize(nnz, g), width) == end - begin;
}

// Whether group g of a packed list of nnz entries and `words` data words is
// well formed: its words lie inside the list (offsets start at 0, ascend and
// end at `words`) and decode (decodeGroup), and its last index lies below the
// next group's first. Groups then cover disjoint ascending ranges: no two
// entries of a valid list share a target, so groups may scatter in parallel.
// Both twins check every group before writing anything.
template <typename I>
DCT_HOST_DEVICE bool validGroup(const Sections<I>& s, size_t g, size_t groups, size_t nnz, uint64_t n,
                                size_t words) {
  if (!validFrame(s, g, groups, nnz, words)) return false;
  const uint32_t begin = s.offsets[g], end = s.offsets[g + 1];
  uint64_t last = 0;
  if (!decodeGroup<I>(s.bases[g], s.data + begin, end - begin, s.widths[g], groupSize(nnz, g), n,
                      [&](size_t, I index) { last = index; }))
    return false;
  return g + 1 == groups || last < static_cast<uint64_t>(s.bases[g + 1]);
}

// The size checks of a packed list, before any group is read.
DCT_HOST_DEVICE bool validSize(const Layout& l, size_t packedBytes) {
  return packedBytes >= l.data && (packedBytes - l.data) % 8 == 0;
}

}  // namespace dct::packing
