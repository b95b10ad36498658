// CUDA twin of delta bit-packing against the CPU twin: the same bytes for
// the same index list, the same dense result from a packed scatter-add, and
// the same malformed lists rejected whole.
#include "cuda_util.h"
#include "kernels/index_packing.h"
#include "malformed_lists.h"

using namespace dct;
using namespace dct::test;

namespace {

template <typename I>
std::vector<uint8_t> cpuPack(Twins& tw, const std::vector<I>& idx) {
  std::vector<uint8_t> out(packing::maxPackedBytes(idx.size(), sizeof(I)));
  PackArgs args{idx.data(), idx.size(), static_cast<int>(sizeof(I)), out.data()};
  REQUIRE(tw.cpu.packIndices(tw.cpuCtx, &args, nullptr) == dctSuccess);
  out.resize(args.bytes);
  return out;
}

template <typename T, typename I>
void comparePacking(Twins& tw, size_t n, size_t nnz, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, true, seed);
  const auto val = randomVector<T>(nnz, seed + 1);
  const auto dense = randomVector<T>(n, seed + 2);
  const auto bytes = cpuPack(tw, idx);

  DeviceArray<I> dIdx(idx);
  DeviceArray<uint8_t> dPacked(packing::maxPackedBytes(nnz, sizeof(I)) + 8);
  dPacked.fillBytes(0xee);
  PackArgs pa{dIdx.get(), nnz, static_cast<int>(sizeof(I)), dPacked.get()};
  REQUIRE(tw.gpu.packIndices(tw.gpuCtx, &pa, tw.stream) == dctSuccess);
  REQUIRE(pa.bytes == bytes.size());
  auto gpuBytes = dPacked.download();
  gpuBytes.resize(pa.bytes);
  REQUIRE(gpuBytes == bytes);

  std::vector<T> cpuDense = dense;
  ScatterArgs ca{cpuDense.data(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), bytes.data(), val.data(),
                 nnz, true, bytes.size()};
  REQUIRE(tw.cpu.scatterAddPacked(tw.cpuCtx, &ca, nullptr) == dctSuccess);
  DeviceArray<T> dDense(dense), dVal(val);
  ScatterArgs ga{dDense.get(), n, dtypeOf<T>(), static_cast<int>(sizeof(I)), dPacked.get(), dVal.get(),
                 nnz, true, pa.bytes};
  REQUIRE(tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
  requireSameValues(dDense.download(), cpuDense, n);
}

}  // namespace

TEST_CASE("CUDA packing writes the CPU twin's bytes; packed scatter-add matches") {
  Twins tw;
  for (size_t n : kOddSizes) {
    if (n == 0) continue;
    for (size_t nnz : {size_t(0), size_t(1), n / 100, n / 2, n}) {
      comparePacking<float, uint32_t>(tw, n, nnz, 71 + nnz);
      comparePacking<double, uint64_t>(tw, n, nnz, 72 + nnz);
    }
  }
}

namespace {

// The CPU twin's rejection cases (malformed_lists.h): the CUDA twin rejects
// each one too, and writes nothing.
template <typename I>
void compareRejection(Twins& tw, size_t n, size_t nnz, uint64_t seed) {
  CAPTURE(n);
  CAPTURE(nnz);
  CAPTURE(sizeof(I));
  const auto idx = randomIndices<I>(n, nnz, true, seed);
  const auto val = randomVector<float>(nnz, seed + 1, false);
  const auto good = cpuPack(tw, idx);
  DeviceArray<float> dVal(val);
  for (const MalformedList& m : malformedLists(good, idx, n)) {
    CAPTURE(m.what);
    const auto before = randomVector<float>(m.n, seed + 2, false);
    auto cpuDense = before;
    ScatterArgs ca{cpuDense.data(), m.n, dctFloat32, static_cast<int>(sizeof(I)), m.bytes.data(),
                   val.data(), nnz, true, m.bytes.size()};
    CHECK(tw.cpu.scatterAddPacked(tw.cpuCtx, &ca, nullptr) == dctInternalError);
    DeviceArray<uint8_t> dPacked(m.bytes);
    DeviceArray<float> dDense(before);
    ScatterArgs ga{dDense.get(), m.n, dctFloat32, static_cast<int>(sizeof(I)), dPacked.get(), dVal.get(),
                   nnz, true, m.bytes.size()};
    CHECK(tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) == dctInternalError);
    REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
    const auto after = dDense.download();
    CHECK(std::memcmp(after.data(), before.data(), m.n * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("CUDA packed scatter-add rejects what the CPU twin rejects, writing nothing") {
  Twins tw;
  compareRejection<uint32_t>(tw, 10000, 300, 81);
  compareRejection<uint64_t>(tw, 10000, 300, 82);
  compareRejection<uint32_t>(tw, 4000037, 200003, 83);  // ~1600 groups: several blocks
}

// One hand-made group of `count` 8-byte indices at width 64, base 5, every
// gap 0 (consecutive) but gap `at`; dense size count + 10. A gap of 2^64 - 3
// wraps that entry below the previous one, 2^64 - 1 onto it: both twins
// reject the list and write nothing. A gap of 1 is accepted. Entry `at` + 1
// sits in the warp decode's first round (count 2) or its second (count 40).
TEST_CASE("CUDA packed scatter-add rejects an index that wraps past 2^64, as the CPU twin does") {
  Twins tw;
  for (auto [count, at] : {std::pair<size_t, size_t>{2, 0}, {40, 34}}) {
    const packing::Layout l(count, 8);
    const size_t n = count + 10;
    const auto val = randomVector<float>(count, 91, false);
    const std::vector<float> before(n, 1.0f);
    DeviceArray<float> dVal(val);
    for (uint64_t gap : {~uint64_t(2), ~uint64_t(0), uint64_t(1)}) {
      CAPTURE(count);
      CAPTURE(gap);
      std::vector<uint8_t> bytes(l.bytes(count - 1), 0);
      writeAt<uint64_t>(bytes, 0, 5);                                       // bases[0]
      writeAt<uint32_t>(bytes, l.offsets + 4, static_cast<uint32_t>(count - 1));  // offsets[1]
      bytes[l.widths] = 64;
      writeAt<uint64_t>(bytes, l.data + 8 * at, gap);
      const dctResult_t want = gap == 1 ? dctSuccess : dctInternalError;
      auto cpuDense = before;
      ScatterArgs ca{cpuDense.data(), n, dctFloat32, 8, bytes.data(), val.data(), count, true, bytes.size()};
      CHECK(tw.cpu.scatterAddPacked(tw.cpuCtx, &ca, nullptr) == want);
      DeviceArray<uint8_t> dPacked(bytes);
      DeviceArray<float> dDense(before);
      ScatterArgs ga{dDense.get(), n, dctFloat32, 8, dPacked.get(), dVal.get(), count, true, bytes.size()};
      CHECK(tw.gpu.scatterAddPacked(tw.gpuCtx, &ga, tw.stream) == want);
      REQUIRE(tw.gpu.synchronize(tw.gpuCtx, tw.stream) == dctSuccess);
      CHECK(dDense.download() == cpuDense);
      CHECK((gap == 1) == (cpuDense != before));
    }
  }
}
