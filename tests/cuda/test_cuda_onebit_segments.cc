// The CUDA twin's 1-bit kernels with segments (dctCompressorSetSegments)
// against the CPU twin, byte for byte on the same seeded inputs: a
// worker's compression into P slots of K scale entries (segments of odd
// lengths, words shared by several segments, keepX and pending
// per-segment scales, and the two-pass error), a server's compression of
// its ranks' mean piece by piece, and the decode piece by piece.
#include <algorithm>
#include <cstring>
#include <random>

#include "../common/onebit_reference.h"
#include "cuda_util.h"
#include "base/half_types.h"
#include "core/onebit_state.h"

using namespace dct;
using namespace dct::test;

namespace {

std::vector<size_t> cuts(size_t n, int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> o{0, n};
  for (int k = 0; k < count; k++) o.push_back(1 + rng() % std::max<size_t>(n - 1, 1));
  std::sort(o.begin(), o.end());
  o.erase(std::unique(o.begin(), o.end()), o.end());
  return o;  // strictly increasing, as the library passes them
}

template <typename T>
void compare(Twins& tw, size_t n, int P, const std::vector<size_t>& o, bool keepX, bool pending, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(P);
  CAPTURE(o.size());
  CAPTURE(keepX);
  CAPTURE(pending);
  const OnebitChunks chunks(n, P);
  const int m = static_cast<int>(o.size()) - 1;
  const size_t K = onebitScalesPerSlot(chunks, o.data(), m), cw = chunks.chunkWords;
  const size_t slotBytes = onebitSlotBytes(cw, sizeof(A), K), units = (P * slotBytes + 7) / 8;
  const std::vector<T> input = seededValues<T>(n, seed);
  const std::vector<A> errorIn = seededValues<A>(n, seed + 1, 0.5);
  std::vector<double> pend(m);
  for (int s = 0; s < m; s++) pend[s] = static_cast<A>(0.25 + 0.1 * s);
  const size_t scratch = onebitScratchBytes(n, m) / sizeof(double);

  // Worker: CPU.
  std::vector<uint64_t> cpuSlots(units, 0);
  std::vector<A> cpuErr(n);
  std::vector<double> cpuScratch(scratch), cpuScales(m), gpuScales(m);
  OnebitCompressArgs c{input.data(), errorIn.data(), cpuErr.data(), n, dtypeOf<T>(), cpuSlots.data(), slotBytes, cw,
                       P, cpuScratch.data()};
  c.keepX = keepX;
  c.pending = pending;
  c.segments = o.data();
  c.segmentCount = m;
  c.scalesPerSlot = K;
  c.pendingScales = pend.data();
  c.scaleValues = cpuScales.data();
  REQUIRE(tw.cpu.onebitCompress(tw.cpuCtx, &c, nullptr) == dctSuccess);
  // Worker: GPU.
  DeviceArray<T> dIn(input);
  DeviceArray<A> dErrIn(errorIn), dErrOut(n);
  DeviceArray<uint64_t> dSlots(std::vector<uint64_t>(units, 0));
  DeviceArray<double> dScratch(scratch);
  OnebitCompressArgs g = c;
  g.input = dIn.get();
  g.errorIn = dErrIn.get();
  g.errorOut = dErrOut.get();
  g.slots = dSlots.get();
  g.scratch = dScratch.get();
  g.scaleValues = gpuScales.data();
  REQUIRE(tw.gpu.onebitCompress(tw.gpuCtx, &g, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));
  CHECK(std::memcmp(cpuScales.data(), gpuScales.data(), m * sizeof(double)) == 0);
  CHECK(sameBits(g.scaleValue, c.scaleValue));
  CHECK(sameBytes(dSlots.download(), cpuSlots));
  CHECK(sameBytes(dErrOut.download(), cpuErr));

  // Server 0's compression of P ranks' slots (this worker's slots as every rank's), and the decode.
  const OnebitSegments seg = onebitSegmentsOf(o.data(), m, n, P, 0);
  const size_t len = chunks.length(0);
  std::vector<uint64_t> received(units, 0);
  for (int r = 0; r < P; r++)
    std::memcpy(reinterpret_cast<unsigned char*>(received.data()) + r * slotBytes, cpuSlots.data(), slotBytes);
  const std::vector<A> serverErr = seededValues<A>(len, seed + 2, 0.2);
  std::vector<double> spend(seg.serverCount(), 0.5), cpuS(seg.serverCount()), gpuS(seg.serverCount());
  std::vector<uint64_t> cpuServer((slotBytes + 7) / 8, 0);
  std::vector<A> cpuServerErr(len);
  OnebitCompressArgs cs{nullptr, serverErr.data(), cpuServerErr.data(), len, dtypeOf<T>(), cpuServer.data(),
                        slotBytes, cw, 1, cpuScratch.data()};
  cs.mean = OnebitMean{received.data(), slotBytes, P};
  cs.keepX = keepX;
  cs.pending = pending;
  cs.scalesPerSlot = K;
  if (seg.many() && len > 0) {
    cs.segments = seg.serverOffsets.data();
    cs.segmentCount = seg.serverCount();
    cs.pendingScales = spend.data();
    cs.scaleValues = cpuS.data();
  }
  REQUIRE(tw.cpu.onebitCompress(tw.cpuCtx, &cs, nullptr) == dctSuccess);
  DeviceArray<uint64_t> dReceived(received), dServer(std::vector<uint64_t>(cpuServer.size(), 0));
  DeviceArray<A> dServerErr(serverErr), dServerOut(len);
  OnebitCompressArgs gs = cs;
  gs.errorIn = dServerErr.get();
  gs.errorOut = dServerOut.get();
  gs.slots = dServer.get();
  gs.scratch = dScratch.get();
  gs.mean.slots = dReceived.get();
  if (gs.scaleValues) gs.scaleValues = gpuS.data();
  REQUIRE(tw.gpu.onebitCompress(tw.gpuCtx, &gs, tw.stream) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(tw.stream));
  CHECK(sameBytes(dServer.download(), cpuServer));
  CHECK(sameBytes(dServerOut.download(), cpuServerErr));

  std::vector<T> cpuOut(n);
  OnebitDecodeArgs d{cpuSlots.data(), slotBytes, cw, n, dtypeOf<T>(), cpuOut.data(), 2.0};
  d.segments = o.data();
  d.segmentCount = m;
  d.scalesPerSlot = K;
  REQUIRE(tw.cpu.onebitDecode(tw.cpuCtx, &d, nullptr) == dctSuccess);
  DeviceArray<T> dOut(n);
  OnebitDecodeArgs gd = d;
  gd.slots = dSlots.get();
  gd.out = dOut.get();
  REQUIRE(tw.gpu.onebitDecode(tw.gpuCtx, &gd, tw.stream) == dctSuccess);
  CHECK(sameBytes(dOut.download(), cpuOut));
}

template <typename T>
void forType(Twins& tw, uint64_t seed) {
  for (size_t n : {size_t(33), size_t(1001), size_t(33003), size_t(1000003)})
    for (int P : {1, 3, 4})
      for (int count : {1, 5, 40}) {
        const std::vector<size_t> o = cuts(n, count, seed);
        compare<T>(tw, n, P, o, true, true, seed++);
        compare<T>(tw, n, P, o, false, false, seed++);
      }
}

}  // namespace

TEST_CASE("segments: the CUDA twin's compress, server compress and decode equal the CPU twin's byte for byte") {
  Twins tw;
  forType<float>(tw, 1);
  forType<double>(tw, 2);
  forType<Half>(tw, 3);
  forType<BFloat16>(tw, 4);
}
