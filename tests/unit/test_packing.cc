// Delta bit-packing of index lists (CPU twin): the bytes against a plain
// bit-by-bit reading of the documented layout, scatter-add of packed
// messages against plain scatter-add, malformed lists rejected whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>

#include "kernels/index_packing.h"
#include "kernels/kernels.h"
#include "cpu_twin.h"
#include "malformed_lists.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

// nnz distinct ascending indices below `limit` (any 64-bit range).
template <typename I>
std::vector<I> ascendingIndices(uint64_t limit, size_t nnz, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> pos(0, limit - 1);
  std::set<uint64_t> picked;
  while (picked.size() < nnz) picked.insert(pos(rng));
  return std::vector<I>(picked.begin(), picked.end());
}

template <typename U>
U readAt(const std::vector<uint8_t>& bytes, size_t offset) {
  U v;
  std::memcpy(&v, bytes.data() + offset, sizeof(U));
  return v;
}

// The layout of index_packing.h read with nothing but its description.
template <typename I>
std::vector<I> referenceUnpack(const std::vector<uint8_t>& bytes, size_t nnz) {
  const size_t groups = (nnz + 127) / 128;
  auto pad = [](size_t b) { return (b + 7) / 8 * 8; };
  const size_t offsetsAt = pad(groups * sizeof(I));
  const size_t widthsAt = offsetsAt + pad((groups + 1) * 4);
  const size_t dataAt = widthsAt + pad(groups);
  std::vector<I> out;
  for (size_t g = 0; g < groups; g++) {
    uint64_t index = readAt<I>(bytes, g * sizeof(I));
    const unsigned width = bytes[widthsAt + g];
    const size_t word0 = readAt<uint32_t>(bytes, offsetsAt + 4 * g);
    out.push_back(static_cast<I>(index));
    const size_t count = std::min<size_t>(128, nnz - g * 128);
    for (size_t j = 0; j + 1 < count; j++) {
      uint64_t gap = 0;
      for (unsigned b = 0; b < width; b++) {
        size_t bit = word0 * 64 + j * width + b;
        gap |= uint64_t((bytes[dataAt + bit / 8] >> (bit % 8)) & 1) << b;
      }
      index += gap + 1;
      out.push_back(static_cast<I>(index));
    }
  }
  return out;
}

template <typename I>
void checkRoundTrip(const std::vector<I>& idx) {
  CAPTURE(idx.size());
  Twin twin;
  const auto bytes = twin.pack(idx);
  CHECK(referenceUnpack<I>(bytes, idx.size()) == idx);
}

template <typename T, typename I>
void checkScatterPacked(size_t n, size_t nnz, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  const auto idx = randomIndices<I>(n, nnz, true, seed);
  const auto val = randomVector<T>(nnz, seed + 1);
  auto dense = randomVector<T>(n, seed + 2);
  auto ref = dense;
  for (size_t j = 0; j < nnz; j++) ref[idx[j]] += val[j];
  Twin twin;
  auto bytes = twin.pack(idx);
  ScatterArgs args{dense.data(), n, sizeof(T) == 8 ? dctFloat64 : dctFloat32, static_cast<int>(sizeof(I)),
                   bytes.data(), val.data(), nnz, true, bytes.size()};
  REQUIRE(twin.ops.scatterAddPacked(twin.ctx, &args, nullptr) == dctSuccess);
  for (size_t i = 0; i < n; i++) REQUIRE(sameBits(dense[i], ref[i]));
}

}  // namespace

TEST_CASE("packed lists decode to the original indices") {
  for (size_t nnz : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(7), size_t(11), size_t(127),
                     size_t(128), size_t(129), size_t(1000003)}) {
    checkRoundTrip(ascendingIndices<uint32_t>(nnz * 100 + 1, nnz, 7 + nnz));     // density ~1%
    checkRoundTrip(ascendingIndices<uint32_t>(0xffffffffull, nnz, 8 + nnz));    // widest gaps
    if (nnz <= 1000) checkRoundTrip(ascendingIndices<uint64_t>(~0ull, nnz, 9 + nnz));  // 64-bit gaps
  }
  std::vector<uint32_t> consecutive(1000);  // width 0: no data words at all
  for (size_t i = 0; i < consecutive.size(); i++) consecutive[i] = static_cast<uint32_t>(5 + i);
  checkRoundTrip(consecutive);
}

TEST_CASE("packing halves the bytes per index at density 1% or below") {
  Twin twin;
  for (double density : {0.01, 0.001}) {
    const size_t n = 1 << 22, nnz = static_cast<size_t>(density * n);
    const auto bytes = twin.pack(ascendingIndices<uint32_t>(n, nnz, 3));
    const double perIndex = double(bytes.size()) / nnz;
    CAPTURE(density);
    CHECK(perIndex < 2.0);  // measured ~1.3 at 1%, ~1.7 at 0.1%
  }
}

TEST_CASE("scatter-add of packed messages matches plain scatter-add") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t nnz : {size_t(0), size_t(1), n / 100, n / 2, n}) {
      checkScatterPacked<float, uint32_t>(n, nnz, 51 + nnz);
      checkScatterPacked<double, uint64_t>(n, nnz, 52 + nnz);
    }
  }
}

namespace {

// Each corruption of a valid list fails the whole call: nothing is written,
// whichever group is bad and however the groups are split among workers.
template <typename I>
void checkMalformedRejected(size_t n, size_t nnz, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, true, seed);
  const auto val = randomVector<float>(nnz, seed + 1, false);
  Twin twin;
  const auto good = twin.pack(idx);
  for (const MalformedList& m : malformedLists(good, idx, n)) {
    CAPTURE(m.what);
    const auto before = randomVector<float>(m.n, seed + 2, false);
    auto dense = before;
    ScatterArgs args{dense.data(), m.n, dctFloat32, static_cast<int>(sizeof(I)), m.bytes.data(), val.data(),
                     nnz, true, m.bytes.size()};
    CHECK(twin.ops.scatterAddPacked(twin.ctx, &args, nullptr) == dctInternalError);
    CHECK(std::memcmp(dense.data(), before.data(), m.n * sizeof(float)) == 0);
  }
  auto dense = randomVector<float>(n, seed + 2, false);
  ScatterArgs args{dense.data(), n, dctFloat32, static_cast<int>(sizeof(I)), good.data(), val.data(), nnz,
                   true, good.size()};
  CHECK(twin.ops.scatterAddPacked(twin.ctx, &args, nullptr) == dctSuccess);
}

}  // namespace

TEST_CASE("malformed packed lists are rejected whole; nothing is written") {
  checkMalformedRejected<uint32_t>(10000, 300, 61);
  checkMalformedRejected<uint64_t>(10000, 300, 62);
  checkMalformedRejected<uint32_t>(4000037, 200003, 63);  // ~1600 groups: several workers
}

namespace {

// mergePacked against its definition: zero the output, then scatter-add the
// messages one after another. Messages of mixed sizes, empty ones included.
// stream: the output built on the stack and streamed out (large tensors),
// `offset` elements past a 64-byte aligned start (0: the AVX2 lanes, 16
// bytes: the SSE2 ones, less: not streamed). factor != 1: then scaled by the
// scale op (dctAvg's 1/P, which the merge applies as it goes).
template <typename T, typename I>
void checkMerge(size_t n, int ranks, uint64_t seed, bool stream = false, size_t offset = 0, double factor = 1.0) {
  CAPTURE(n);
  CAPTURE(ranks);
  CAPTURE(offset);
  CAPTURE(factor);
  Twin twin;
  const dctDataType_t type = sizeof(T) == 8 ? dctFloat64 : dctFloat32;
  std::vector<std::vector<uint8_t>> packed(ranks);
  std::vector<std::vector<T>> values(ranks);
  std::vector<PackedMessage> messages(ranks);
  std::vector<T> ref(n, T(0));
  for (int r = 0; r < ranks; r++) {
    const size_t sizes[] = {0, 1, n / 1000, n / 100, n / 7, n / 2, n};  // n / 1000: below one entry in 64 elements in all
    const size_t nnz = std::min(n, sizes[(seed + r) % 7]);
    const auto idx = randomIndices<I>(n, nnz, true, seed + 10 * r);
    values[r] = randomVector<T>(nnz, seed + 10 * r + 1);
    packed[r] = twin.pack(idx);
    messages[r] = PackedMessage{packed[r].data(), values[r].data(), nnz, packed[r].size()};
    ScatterArgs add{ref.data(), n, type, static_cast<int>(sizeof(I)), packed[r].data(), values[r].data(),
                    nnz, true, packed[r].size()};
    REQUIRE(twin.ops.scatterAddPacked(twin.ctx, &add, nullptr) == dctSuccess);
  }
  if (factor != 1.0) REQUIRE(twin.ops.scale(twin.ctx, ref.data(), n, type, factor, nullptr) == dctSuccess);
  auto dense = randomVector<T>(n + offset + 64 / sizeof(T), seed + 99);  // every element is overwritten
  offset += (64 - reinterpret_cast<uintptr_t>(dense.data()) % 64) % 64 / sizeof(T);
  MergeArgs merge{dense.data() + offset, n, type, type, static_cast<int>(sizeof(I)), messages.data(), ranks};
  merge.stream = stream;
  merge.factor = factor;
  REQUIRE(twin.ops.mergePacked(twin.ctx, &merge, nullptr) == dctSuccess);
  CHECK(merge.malformed == -1);
  for (size_t i = 0; i < n; i++) REQUIRE(sameBits(dense[offset + i], ref[i]));
}

}  // namespace

TEST_CASE("merging packed messages equals zeroing and scatter-adding them in order") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (int ranks : {1, 2, 3, 5}) {
      checkMerge<float, uint32_t>(n, ranks, 70 + n + ranks);
      checkMerge<double, uint64_t>(n, ranks, 71 + n + ranks);
    }
  }
  checkMerge<float, uint32_t>(4000037, 4, 72);  // many blocks: several workers
  checkMerge<float, uint32_t>(4000037, 2, 72);  // 1.1% in all: zero and scatter
  checkMerge<double, uint64_t>(1000003, 3, 70);  // 0, 1 and 0.1% entries
}

TEST_CASE("a merge with a factor equals merging, then the scale op, bit for bit") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (int ranks : {1, 3}) {
      checkMerge<float, uint32_t>(n, ranks, 90 + n + ranks, false, 0, 1.0 / 3);
      checkMerge<double, uint64_t>(n, ranks, 91 + n + ranks, false, 0, 1.0 / 3);
      checkMerge<float, uint32_t>(n, ranks, 92 + n + ranks, true, 1, 1.0 / 7);
    }
  }
  checkMerge<float, uint32_t>(4000037, 3, 93, false, 0, 1.0 / 3);  // blocks on several workers
  checkMerge<float, uint32_t>(4000037, 2, 72, false, 0, 0.5);      // zero and scatter, then scaled
}

TEST_CASE("a streamed merge gives the same bits at every alignment") {
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t offset : {0, 1, 2, 4}) {
      checkMerge<float, uint32_t>(n, 3, 80 + n, true, offset);
      checkMerge<double, uint64_t>(n, 2, 81 + n, true, offset);
    }
  }
  // Filled past the zero-and-scatter path (seeds 3-5: n / 100 to n entries
  // a message), over many blocks and workers: the stack block must be zero
  // again before each next block.
  for (uint64_t seed : {3, 4, 5})
    for (size_t offset : {0, 4}) {
      checkMerge<float, uint32_t>(1000003, 3, seed, true, offset);
      checkMerge<double, uint64_t>(300007, 2, seed, true, offset);
    }
}

// The merge, its check-only pass and the union (mergePackedCoo) reject the
// same lists, name the message, and the check and the union write nothing.
TEST_CASE("a malformed message fails the merge, its check and the union, and names itself") {
  Twin twin;
  const size_t n = 10000, nnz = 300;
  const auto idx = randomIndices<uint32_t>(n, nnz, true, 81);
  const auto val = randomVector<float>(nnz, 82, false);
  const auto good = twin.pack(idx);
  for (const MalformedList& m : malformedLists(good, idx, n)) {
    CAPTURE(m.what);
    const PackedMessage messages[3] = {{good.data(), val.data(), nnz, good.size()},
                                       {m.bytes.data(), val.data(), nnz, m.bytes.size()},
                                       {good.data(), val.data(), nnz, good.size()}};
    const int bad = m.n == n ? 1 : 0;  // a smaller n fails the good list too
    std::vector<float> merged(m.n);
    MergeArgs merge{merged.data(), m.n, dctFloat32, dctFloat32, 4, messages, 3};
    CHECK(twin.ops.mergePacked(twin.ctx, &merge, nullptr) == dctInternalError);
    CHECK(merge.malformed == bad);
    std::vector<float> dense(m.n, 7.0f);
    MergeArgs check{dense.data(), m.n, dctFloat32, dctFloat32, 4, messages, 3};
    check.checkOnly = true;
    CHECK(twin.ops.mergePacked(twin.ctx, &check, nullptr) == dctInternalError);
    CHECK(check.malformed == bad);
    std::vector<uint32_t> outIdx(3 * nnz, 7);
    std::vector<float> outVal(3 * nnz, 7.0f);
    MergeCooArgs coo{messages, 3, m.n, dctFloat32, dctFloat32, 4, 1.0, 1e-45, outIdx.data(), outVal.data(), 3 * nnz};
    CHECK(twin.ops.mergePackedCoo(twin.ctx, &coo, nullptr) == dctInternalError);
    CHECK(coo.malformed == bad);
    CHECK(coo.nnz == 0);
    CHECK(std::count(outIdx.begin(), outIdx.end(), 7u) == static_cast<long>(outIdx.size()));
    CHECK(std::count(outVal.begin(), outVal.end(), 7.0f) == static_cast<long>(outVal.size()));
    CHECK(std::count(dense.begin(), dense.end(), 7.0f) == static_cast<long>(dense.size()));
  }
  // Well-formed messages pass the check and still nothing is written.
  const PackedMessage ok[2] = {{good.data(), val.data(), nnz, good.size()}, {good.data(), val.data(), nnz, good.size()}};
  std::vector<float> dense(n, 7.0f);
  MergeArgs check{dense.data(), n, dctFloat32, dctFloat32, 4, ok, 2};
  check.checkOnly = true;
  CHECK(twin.ops.mergePacked(twin.ctx, &check, nullptr) == dctSuccess);
  CHECK(std::count(dense.begin(), dense.end(), 7.0f) == static_cast<long>(n));
}

TEST_CASE("a piece packed with a base decodes to its indices minus the base") {
  Twin twin;
  for (size_t nnz : {size_t(1), size_t(3), size_t(128), size_t(129), size_t(1000)}) {
    CAPTURE(nnz);
    const auto idx = ascendingIndices<uint32_t>(nnz * 50 + 1, nnz, 21 + nnz);
    for (uint64_t base : {uint64_t(0), uint64_t(idx[0]) / 2, uint64_t(idx[0])}) {
      CAPTURE(base);
      std::vector<uint32_t> relative(idx);
      for (uint32_t& i : relative) i -= static_cast<uint32_t>(base);
      std::vector<uint8_t> out(packing::maxPackedBytes(nnz, 4), 0xee);
      PackArgs args{idx.data(), nnz, 4, out.data()};
      args.base = base;
      REQUIRE(twin.ops.packIndices(twin.ctx, &args, nullptr) == dctSuccess);
      out.resize(args.bytes);
      CHECK(out == twin.pack(relative));  // the same bytes as packing the relative list
      CHECK(referenceUnpack<uint32_t>(out, nnz) == relative);
    }
  }
}

template <typename I>
void checkLowerBounds(uint64_t limit, size_t nnz, const std::vector<uint64_t>& keys) {
  CAPTURE(nnz);
  Twin twin;
  const auto idx = ascendingIndices<I>(limit, nnz, 31 + nnz);
  std::vector<uint64_t> positions(keys.size(), 12345);
  BoundsArgs args{idx.data(), idx.size(), static_cast<int>(sizeof(I)), keys.data(), keys.size(), positions.data()};
  REQUIRE(twin.ops.lowerBounds(twin.ctx, &args, nullptr) == dctSuccess);
  for (size_t j = 0; j < keys.size(); j++) {
    uint64_t below = 0;  // plain count of the entries under the key
    for (I i : idx) below += static_cast<uint64_t>(i) < keys[j];
    CHECK(positions[j] == below);
  }
}

TEST_CASE("lowerBounds cuts an ascending list where each key begins") {
  checkLowerBounds<uint32_t>(1000, 0, {0, 5, 1000});
  checkLowerBounds<uint32_t>(1000, 1, {0, 250, 500, 750, 1000});
  checkLowerBounds<uint32_t>(1000, 300, {0, 0, 1, 333, 334, 666, 999, 1000});
  checkLowerBounds<uint32_t>(0xffffffffull, 2000, {0, 1ull << 31, 0xffffffffull, 1ull << 33});  // key past uint32
  checkLowerBounds<uint64_t>(~0ull, 500, {0, 1ull << 40, 1ull << 63, ~0ull});
}
