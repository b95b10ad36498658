// The host's fixed-width group encode and decode (cpu_fixed_width.h)
// against the generic ones (index_packing.h): the same bytes for every
// list, the same indices from every valid one, and the same verdict, group
// by group, on valid lists and on seeded corruptions of every section
// (bases, widths, offsets, gap words).
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "cpu_twin.h"
#include "kernels/cpu_fixed_width.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

// nnz ascending indices whose gaps are uniform in [1, 2^bits]: every
// group's width is about `bits` (0: consecutive).
template <typename I>
std::vector<I> gappedIndices(size_t nnz, int bits, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint64_t top = bits >= 64 ? ~uint64_t(0) >> 8 : (uint64_t(1) << bits) - 1;
  std::uniform_int_distribution<uint64_t> gap(0, top);
  std::vector<I> idx(nnz);
  uint64_t at = rng() % 1000;
  for (size_t j = 0; j < nnz; j++, at += gap(rng) + 1) idx[j] = static_cast<I>(at);
  return idx;
}

// Every group of `bytes` (a list of nnz entries over n elements): the fast
// verdict equals validGroup's, and where it holds, the decodes agree.
template <typename I>
void checkGroups(std::vector<uint8_t>& bytes, size_t nnz, uint64_t n) {
  const packing::Layout l(nnz, sizeof(I));
  if (!packing::validSize(l, bytes.size())) return;
  packing::Sections<I> s(bytes.data(), l);
  const size_t words = (bytes.size() - l.data) / 8;
  for (size_t g = 0; g < l.groups; g++) {
    CAPTURE(g);
    const bool valid = packing::validGroup<I>(s, g, l.groups, nnz, n, words);
    REQUIRE(packing::validGroupFast<I>(s, g, l.groups, nnz, n, words) == valid);
    if (!valid) continue;
    std::vector<I> fast(packing::kPackGroup), plain(packing::kPackGroup);
    packing::unpackGroup<I>(s, g, nnz, n, fast.data());
    packing::decodeGroup<I>(s.bases[g], s.data + s.offsets[g], s.offsets[g + 1] - s.offsets[g], s.widths[g],
                            packing::groupSize(nnz, g), n, [&](size_t j, I i) { plain[j] = i; });
    fast.resize(packing::groupSize(nnz, g));
    plain.resize(fast.size());
    REQUIRE(fast == plain);
  }
}

// The packed list of idx written with the generic encodeGroup alone.
template <typename I>
std::vector<uint8_t> genericPack(const std::vector<I>& idx) {
  const packing::Layout l(idx.size(), sizeof(I));
  std::vector<uint64_t> words(packing::maxPackedBytes(idx.size(), sizeof(I)) / 8 + 1, 0);
  packing::Sections<I> s(words.data(), l);
  for (size_t g = 0; g < l.groups; g++) {
    const I* first = idx.data() + g * packing::kPackGroup;
    const size_t count = packing::groupSize(idx.size(), g);
    s.bases[g] = first[0];
    s.widths[g] = static_cast<uint8_t>(packing::groupWidth(first, count));
    s.offsets[g + 1] = s.offsets[g] + static_cast<uint32_t>(packing::groupWords(count, s.widths[g]));
  }
  for (size_t g = 0; g < l.groups; g++)
    packing::encodeGroup(idx.data() + g * packing::kPackGroup, packing::groupSize(idx.size(), g), s.widths[g],
                         s.data + s.offsets[g]);
  const auto* bytes = reinterpret_cast<const uint8_t*>(words.data());
  return std::vector<uint8_t>(bytes, bytes + l.bytes(s.offsets[l.groups]));
}

template <typename I>
void checkWidths(int maxBits) {
  Twin twin;
  for (int bits = 0; bits <= maxBits; bits++) {
    for (size_t nnz : {size_t(128), size_t(3 * 128 + 5), size_t(1000)}) {
      CAPTURE(bits);
      CAPTURE(nnz);
      const auto idx = gappedIndices<I>(nnz, bits, 100 * bits + nnz);
      auto bytes = twin.pack(idx);
      REQUIRE(bytes == genericPack(idx));
      const uint64_t last = idx.back();
      checkGroups<I>(bytes, nnz, last + 1);  // the tightest n: the last index is n - 1
      checkGroups<I>(bytes, nnz, last);      // one less: the last group fails
      // Seeded corruptions: a random byte of the list xor a random nonzero mask.
      std::mt19937_64 rng(bits * 7919 + nnz);
      for (int t = 0; t < 64; t++) {
        auto bad = bytes;
        bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        checkGroups<I>(bad, nnz, last + 1);
      }
    }
  }
}

}  // namespace

TEST_CASE("fixed-width encode and decode equal the generic ones at every width, 32-bit indices") {
  checkWidths<uint32_t>(31);
}

TEST_CASE("fixed-width encode and decode equal the generic ones at every width, 64-bit indices") {
  checkWidths<uint64_t>(40);  // past kFastWidths: the generic path
}

TEST_CASE("a whole group whose last index wraps past 2^64 is malformed on both paths") {
  // Gaps of 2^31 and one of 2^32 (width 32), ending 5 below 2^64.
  std::vector<uint64_t> idx(128);
  idx[0] = ~uint64_t(0) - (uint64_t(1) << 38) - 4;
  for (size_t j = 1; j < idx.size(); j++) idx[j] = idx[j - 1] + (uint64_t(1) << (j == 1 ? 32 : 31));
  Twin twin;
  auto bytes = twin.pack(idx);
  const packing::Layout l(idx.size(), sizeof(uint64_t));
  packing::Sections<uint64_t> s(bytes.data(), l);
  REQUIRE(s.widths[0] == 32);
  const size_t words = s.offsets[1];
  CHECK(packing::validGroupFast<uint64_t>(s, 0, 1, idx.size(), ~uint64_t(0), words));
  checkGroups<uint64_t>(bytes, idx.size(), ~uint64_t(0));
  // Every gap at its widest: 127 x 2^32 past a base this close to 2^64 wraps.
  for (size_t w = 0; w < words; w++) s.data[w] = ~uint64_t(0);
  CHECK_FALSE(packing::validGroupFast<uint64_t>(s, 0, 1, idx.size(), ~uint64_t(0), words));
  checkGroups<uint64_t>(bytes, idx.size(), ~uint64_t(0));
}
