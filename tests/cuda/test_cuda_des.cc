// CUDA twin of the DES row-block kernels against the CPU twin on the same
// seeded rows (zero, -0, NaN and Inf rows; all four types; odd sizes): row
// flags, counts and non-finite totals, gathered rows, scattered rows, and
// sums, bit for bit; malformed wire flags rejected with nothing written.
#include <cstring>

#include "../mpi/des_util.h"
#include "base/dtype.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;
using namespace dcttest::des;

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
void sameBytes(const std::vector<V>& gpu, const std::vector<V>& cpu) {
  REQUIRE(gpu.size() == cpu.size());
  CHECK(std::memcmp(gpu.data(), cpu.data(), gpu.size() * sizeof(V)) == 0);
}

template <dctDataType_t DT>
void compareBlock(Twins& tw, size_t R, size_t D, double zeros, uint64_t seed) {
  using S = typename Ty<DT>::S;
  using Acc = typename Ty<DT>::Acc;
  CAPTURE(DT);
  CAPTURE(R);
  CAPTURE(D);
  const auto rows = partials<DT>(5, R, D, seed, zeros);
  const size_t W = maskWords(R);
  std::vector<uint32_t> flags(W);
  auto cf = blockArgs(const_cast<S*>(rows.data()), R, D, DT, flags.data(), nullptr);
  REQUIRE(tw.cpu.rowFlags(tw.cpuCtx, &cf, nullptr) == dctSuccess);
  DeviceArray<S> dRows(rows);
  DeviceArray<uint32_t> dFlags(W + 1);
  dFlags.fillBytes(0xff);
  auto gf = blockArgs(dRows.get(), R, D, DT, dFlags.get(), nullptr);
  REQUIRE(tw.gpu.rowFlags(tw.gpuCtx, &gf, tw.stream) == dctSuccess);
  CHECK(gf.count == cf.count);
  CHECK(gf.nonFinite == cf.nonFinite);
  auto gotFlags = dFlags.download();
  CHECK(gotFlags.back() == ~0u);  // nothing past the block's words
  gotFlags.pop_back();
  sameBytes(gotFlags, flags);
  dFlags.upload([&] { auto f = flags; f.push_back(0); return f; }());

  const size_t count = cf.count;
  std::vector<S> packed(count * D);
  auto cg = blockArgs(const_cast<S*>(rows.data()), R, D, DT, flags.data(), packed.data());
  REQUIRE(tw.cpu.rowGather(tw.cpuCtx, &cg, nullptr) == dctSuccess);
  DeviceArray<S> dPacked(count * D);
  auto gg = blockArgs(dRows.get(), R, D, DT, dFlags.get(), dPacked.get());
  REQUIRE(tw.gpu.rowGather(tw.gpuCtx, &gg, tw.stream) == dctSuccess);
  sameBytes(dPacked.download(), packed);

  for (bool dense : {false, true}) {
    std::vector<S> back(R * D);
    auto cs = blockArgs(back.data(), R, D, DT, flags.data(), dense ? const_cast<S*>(rows.data()) : packed.data());
    cs.denseSource = dense;
    REQUIRE(tw.cpu.rowScatter(tw.cpuCtx, &cs, nullptr) == dctSuccess);
    DeviceArray<S> dBack(R * D);
    dBack.fillBytes(0x3c);
    auto gs = blockArgs(dBack.get(), R, D, DT, dFlags.get(), dense ? dRows.get() : dPacked.get());
    gs.denseSource = dense;
    REQUIRE(tw.gpu.rowScatter(tw.gpuCtx, &gs, tw.stream) == dctSuccess);
    sameBytes(dBack.download(), back);
  }

  const auto start = gradRows<DT == dctFloat64 ? dctFloat64 : dctFloat32>(0, R, D, seed);
  std::vector<Acc> acc(start.begin(), start.end());
  for (bool every : {false, true}) {
    std::vector<Acc> sum = acc;
    auto ca = blockArgs(sum.data(), R, D, DT, every ? nullptr : flags.data(),
                        every ? const_cast<S*>(rows.data()) : packed.data());
    ca.count = count;
    REQUIRE(tw.cpu.rowAccumulate(tw.cpuCtx, &ca, nullptr) == dctSuccess);
    DeviceArray<Acc> dSum(acc);
    auto ga = blockArgs(dSum.get(), R, D, DT, every ? nullptr : dFlags.get(), every ? dRows.get() : dPacked.get());
    ga.count = count;
    REQUIRE(tw.gpu.rowAccumulate(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
    sameBytes(dSum.download(), sum);
  }
  if (R == 0) return;
  DeviceArray<Acc> dSum(acc);
  auto bad = blockArgs(dSum.get(), R, D, DT, dFlags.get(), dPacked.get());
  bad.count = count + 1;
  CHECK(tw.gpu.rowAccumulate(tw.gpuCtx, &bad, tw.stream) == dctInternalError);
  sameBytes(dSum.download(), acc);
}

template <dctDataType_t DT>
void compareType() {
  Twins tw;
  uint64_t seed = 1;
  for (size_t R : {0, 1, 2, 3, 7, 11, 70})
    for (size_t D : {1, 3, 7, 11, 300})
      for (double zeros : {0.0, 0.5, 1.0}) compareBlock<DT>(tw, R, D, zeros, seed++);
  compareBlock<DT>(tw, 100003, 5, 0.8, 7);
}

}  // namespace

TEST_CASE("CUDA DES row blocks match the CPU twin (fp32)") { compareType<dctFloat32>(); }
TEST_CASE("CUDA DES row blocks match the CPU twin (fp64)") { compareType<dctFloat64>(); }
TEST_CASE("CUDA DES row blocks match the CPU twin (fp16)") { compareType<dctFloat16>(); }
TEST_CASE("CUDA DES row blocks match the CPU twin (bf16)") { compareType<dctBFloat16>(); }
