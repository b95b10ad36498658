// DES row-block kernels of the CPU twin against plain references: row
// flags (zero, -0, NaN and Inf rows), gather of the flagged rows, scatter
// back with zeros elsewhere, and the accumulation in the accumulation type,
// which rejects malformed wire flags with nothing written. All four types,
// odd sizes.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "../mpi/des_util.h"
#include "base/dtype.h"
#include "kernels/kernels.h"
#include "../common/same_bytes.h"
#include "cpu_twin.h"

using namespace dct;
using namespace dcttest::des;

using dcttest::sameBytes;
using dct::test::Twin;

namespace {

RowBlockArgs blockArgs(void* rows, size_t R, size_t D, dctDataType_t dt, uint32_t* flags, void* packed) {
  RowBlockArgs a{};
  a.rows = rows;
  a.rowCount = R;
  a.rowLength = D;
  a.dtype = dt;
  a.flags = flags;
  a.packed = packed;
  a.accType = accumulationType(dt);
  return a;
}

template <typename V>
void* ptr(V& v) { return v.empty() ? nullptr : static_cast<void*>(v.data()); }

template <dctDataType_t DT>
void checkBlock(Twin& t, size_t R, size_t D, double zeros, uint64_t seed) {
  using S = typename Ty<DT>::S;
  using Acc = typename Ty<DT>::Acc;
  CAPTURE(DT);
  CAPTURE(R);
  CAPTURE(D);
  CAPTURE(zeros);
  auto rows = partials<DT>(3, R, D, seed, zeros);
  const size_t W = maskWords(R);
  // Reference flags, count and non-finite entries.
  std::vector<uint32_t> want(W, 0);
  uint64_t count = 0, nonFinite = 0;
  std::vector<S> packedWant;
  for (size_t r = 0; r < R; r++) {
    if (zeroRow(rows.data() + r * D, D)) continue;
    want[r / 32] |= 1u << (r % 32);
    count++;
    for (size_t j = 0; j < D; j++) nonFinite += !std::isfinite(Ty<DT>::load(rows[r * D + j]));
    packedWant.insert(packedWant.end(), rows.begin() + r * D, rows.begin() + (r + 1) * D);
  }
  std::vector<uint32_t> flags(W, 0xdeadbeef);
  RowBlockArgs f = blockArgs(ptr(rows), R, D, DT, ptr(flags) ? flags.data() : nullptr, nullptr);
  REQUIRE(t.ops.rowFlags(t.ctx, &f, nullptr) == dctSuccess);
  CHECK(flags == want);
  CHECK(f.count == count);
  CHECK(f.nonFinite == nonFinite);

  std::vector<S> packed(count * D, S(5));
  RowBlockArgs g = blockArgs(ptr(rows), R, D, DT, flags.data(), ptr(packed));
  REQUIRE(t.ops.rowGather(t.ctx, &g, nullptr) == dctSuccess);
  CHECK(sameBytes(packed.data(), packedWant.data(), packed.size() * sizeof(S)));

  // Scatter back: the flagged rows, zeros elsewhere (-0 rows become +0).
  std::vector<S> expect(R * D, S(0));
  for (size_t r = 0; r < R; r++)
    if ((want[r / 32] >> (r % 32)) & 1u) std::memcpy(&expect[r * D], &rows[r * D], D * sizeof(S));
  for (bool dense : {false, true}) {
    std::vector<S> back(R * D, S(9));
    RowBlockArgs s = blockArgs(ptr(back), R, D, DT, flags.data(), dense ? ptr(rows) : ptr(packed));
    s.denseSource = dense;
    REQUIRE(t.ops.rowScatter(t.ctx, &s, nullptr) == dctSuccess);
    CHECK(sameBytes(back.data(), expect.data(), back.size() * sizeof(S)));
  }

  // Accumulate onto random sums, with flags and with every row.
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<Acc> acc(R * D);
  for (Acc& x : acc) x = static_cast<Acc>(normal(rng));
  for (bool every : {false, true}) {
    std::vector<Acc> sum = acc, ref = acc;
    for (size_t r = 0; r < R; r++) {
      if (!every && !((want[r / 32] >> (r % 32)) & 1u)) continue;
      for (size_t j = 0; j < D; j++) ref[r * D + j] = ref[r * D + j] + Ty<DT>::load(rows[r * D + j]);
    }
    RowBlockArgs a = blockArgs(ptr(sum), R, D, DT, every ? nullptr : flags.data(), every ? ptr(rows) : ptr(packed));
    a.count = count;
    REQUIRE(t.ops.rowAccumulate(t.ctx, &a, nullptr) == dctSuccess);
    CHECK(sameBytes(sum.data(), ref.data(), sum.size() * sizeof(Acc)));
  }
  if (R == 0) return;
  // Malformed wire flags: a count that disagrees, or a bit past R.
  std::vector<Acc> sum = acc;
  RowBlockArgs bad = blockArgs(ptr(sum), R, D, DT, flags.data(), ptr(packed));
  bad.count = count + 1;
  CHECK(t.ops.rowAccumulate(t.ctx, &bad, nullptr) == dctInternalError);
  if (R % 32 != 0) {
    std::vector<uint32_t> tail = flags;
    tail[W - 1] |= 1u << 31;
    bad.flags = tail.data();
    bad.count = count + 1;
    CHECK(t.ops.rowAccumulate(t.ctx, &bad, nullptr) == dctInternalError);
  }
  CHECK(sameBytes(sum.data(), acc.data(), sum.size() * sizeof(Acc)));
  RowBlockArgs wrongType = bad;
  wrongType.flags = flags.data();
  wrongType.count = count;
  wrongType.accType = DT == dctFloat64 ? dctFloat32 : dctFloat64;
  CHECK(t.ops.rowAccumulate(t.ctx, &wrongType, nullptr) == dctNotSupported);
}

template <dctDataType_t DT>
void checkType() {
  Twin t;
  uint64_t seed = 1;
  for (size_t R : {0, 1, 2, 3, 7, 11, 32, 70})
    for (size_t D : {1, 2, 3, 7, 11})
      for (double zeros : {0.0, 0.5, 1.0}) checkBlock<DT>(t, R, D, zeros, seed++);
  // Enough rows for several workers.
  checkBlock<DT>(t, 20011, 7, 0.7, 99);
}

}  // namespace

TEST_CASE("DES row blocks: flags, gather, scatter, accumulate (fp32)") { checkType<dctFloat32>(); }
TEST_CASE("DES row blocks: flags, gather, scatter, accumulate (fp64)") { checkType<dctFloat64>(); }
TEST_CASE("DES row blocks: flags, gather, scatter, accumulate (fp16)") { checkType<dctFloat16>(); }
TEST_CASE("DES row blocks: flags, gather, scatter, accumulate (bf16)") { checkType<dctBFloat16>(); }
