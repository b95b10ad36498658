// The CPU twin's 1-bit kernels with segments (dctCompressorSetSegments)
// against the plain reference of tests/common/onebit_reference.h: the
// whole collective of P ranks run in one process through the kernels
// (worker compress into P slots, the slots handed to their servers, the
// servers' compress of their pieces, the gathered slots decoded), three
// chained steps with keepX and the pending per-segment scales, as the
// allreduce runs them. Seeded odd sizes, segments of odd lengths, empty
// segments, cuts on and off word and chunk boundaries; one segment passed
// as offsets equals the unsegmented kernels bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "../common/onebit_reference.h"
#include "base/half_types.h"
#include "core/onebit_state.h"
#include "kernels/kernels.h"
#include "kernels/onebit_math.h"

using namespace dct;
using namespace dct::test;

namespace {

struct Cpu {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  Cpu() { REQUIRE(ops.createContext(&ctx) == dctSuccess); }
  ~Cpu() { ops.destroyContext(ctx); }
};

// 8-byte aligned zeroed bytes (the arena is zeroed once).
struct Bytes {
  std::vector<uint64_t> v;
  explicit Bytes(size_t n) : v((n + 7) / 8, 0) {}
  unsigned char* at(size_t off = 0) { return reinterpret_cast<unsigned char*>(v.data()) + off; }
};

// One rank's (worker) or one server's compression state: the kept x and
// the scales it was sent with.
template <typename A>
struct Side {
  std::vector<A> kept[2];
  int committed = 0;
  bool pending = false;
  std::vector<double> pendingScales, stepScales;
  double pendingScale = 0;  // unsegmented
  // The error the kept x left, per element, offsets being its segments.
  std::vector<A> error(const std::vector<size_t>& offsets, bool segmented) const {
    std::vector<A> e = kept[committed];
    if (!pending) return e;
    for (size_t s = 0; s + 1 < offsets.size(); s++)
      for (size_t i = offsets[s]; i < offsets[s + 1]; i++)
        e[i] = onebitError(e[i], static_cast<A>(segmented ? pendingScales[s] : pendingScale));
    return e;
  }
};

// The collective through the kernels. mode 0: unsegmented (null
// segments); 1: the segments as offsets (also for one segment).
template <typename T>
struct Simulated {
  using A = typename Value<T>::Acc;
  Cpu cpu;
  size_t n;
  int P;
  OnebitChunks chunks;
  OnebitSegments seg;  // the segments as the library keeps them (compacted)
  std::vector<OnebitSegments> serverSeg;
  bool segmented;
  size_t scales, slotBytes;
  std::vector<Side<A>> workers, servers;
  std::vector<Bytes> workerSlots, received;
  Bytes gathered;

  Simulated(size_t count, int ranks, const std::vector<size_t>& offsets, bool useOffsets)
      : n(count), P(ranks), chunks(count, ranks), gathered(0) {
    seg = onebitSegmentsOf(offsets.data(), static_cast<int>(offsets.size()) - 1, n, P, 0);
    segmented = useOffsets;
    if (segmented && !seg.many()) seg.offsets = {0, n};  // one segment, passed as offsets
    for (int j = 0; j < P; j++) serverSeg.push_back(onebitSegmentsOf(offsets.data(), static_cast<int>(offsets.size()) - 1, n, P, j));
    scales = seg.scalesPerSlot;
    slotBytes = onebitSlotBytes(chunks.chunkWords, sizeof(A), scales);
    workers.resize(P);
    servers.resize(P);
    for (int r = 0; r < P; r++) {
      workers[r].kept[0].assign(n, A(0));
      workers[r].kept[1].assign(n, A(0));
      workers[r].pendingScales.assign(segCount(), 0);
      workers[r].stepScales.assign(segCount(), 0);
      workerSlots.emplace_back(P * slotBytes);
      received.emplace_back(P * slotBytes);
      const size_t len = chunks.length(r);
      servers[r].kept[0].assign(len, A(0));
      servers[r].kept[1].assign(len, A(0));
      servers[r].pendingScales.assign(pieceCount(r), 0);
      servers[r].stepScales.assign(pieceCount(r), 0);
    }
    gathered = Bytes(P * slotBytes);
  }
  int segCount() const { return static_cast<int>(seg.offsets.size()) - 1 > 0 ? static_cast<int>(seg.offsets.size()) - 1 : 1; }
  // Server j's pieces, from its chunk's start.
  std::vector<size_t> pieceOffsets(int j) const {
    if (serverSeg[j].many()) return serverSeg[j].serverOffsets;
    return {0, chunks.length(j)};
  }
  int pieceCount(int j) const { return static_cast<int>(pieceOffsets(j).size()) - 1; }

  void compress(Side<A>& side, const T* input, size_t len, const std::vector<size_t>& offsets, void* slots,
                int slotCount, const OnebitMean& mean) {
    std::vector<double> scratch(onebitScratchBytes(len, offsets.size()) / 8 + 1);
    OnebitCompressArgs a{input, side.kept[side.committed].data(), side.kept[1 - side.committed].data(), len,
                         Value<T>::type, slots, slotBytes, chunks.chunkWords, slotCount, scratch.data()};
    a.mean = mean;
    a.keepX = true;
    a.pending = side.pending;
    a.pendingScale = side.pendingScale;
    a.scalesPerSlot = scales;
    if (segmented && len > 0) {
      a.segments = offsets.data();
      a.segmentCount = static_cast<int>(offsets.size()) - 1;
      a.pendingScales = side.pendingScales.data();
      a.scaleValues = side.stepScales.data();
    }
    REQUIRE(cpu.ops.onebitCompress(cpu.ctx, &a, nullptr) == dctSuccess);
    side.committed = 1 - side.committed;
    side.pending = true;
    side.pendingScale = a.scaleValue;
    if (a.segments) side.pendingScales.swap(side.stepScales);
    else if (!side.pendingScales.empty()) side.pendingScales[0] = a.scaleValue;
  }

  std::vector<T> step(const std::vector<std::vector<T>>& inputs, bool sum) {
    const std::vector<size_t> whole{0, n};
    for (int r = 0; r < P; r++)
      compress(workers[r], inputs[r].data(), n, segmented ? seg.offsets : whole, workerSlots[r].at(), P, {});
    for (int j = 0; j < P; j++)  // the alltoallv
      for (int r = 0; r < P; r++) std::memcpy(received[j].at(r * slotBytes), workerSlots[r].at(j * slotBytes), slotBytes);
    for (int j = 0; j < P; j++) {
      compress(servers[j], nullptr, chunks.length(j), pieceOffsets(j), gathered.at(j * slotBytes), 1,
               OnebitMean{received[j].at(), slotBytes, P});
    }
    std::vector<T> out(n);
    OnebitDecodeArgs d{gathered.at(), slotBytes, chunks.chunkWords, n, Value<T>::type, out.data(),
                       sum ? static_cast<double>(P) : 1.0};
    d.scalesPerSlot = scales;
    if (segmented) {
      d.segments = seg.offsets.data();
      d.segmentCount = static_cast<int>(seg.offsets.size()) - 1;
    }
    REQUIRE(cpu.ops.onebitDecode(cpu.ctx, &d, nullptr) == dctSuccess);
    return out;
  }
};

// Random cuts of [0, n): some empty segments, some on word and chunk
// boundaries, odd lengths otherwise.
std::vector<size_t> randomOffsets(size_t n, int cuts, int P, std::mt19937_64& rng) {
  std::vector<size_t> o{0, n};
  const size_t chunk = referenceChunkLength(n, P);
  for (int k = 0; k < cuts && n > 0; k++) {
    size_t c = rng() % (n + 1);
    if (k % 4 == 1) c = std::min(n, c / 32 * 32);
    if (k % 4 == 2 && chunk) c = std::min(n, c / chunk * chunk);
    o.push_back(c);
    if (k % 5 == 3) o.push_back(c);  // an empty segment
  }
  std::sort(o.begin(), o.end());
  return o;
}

template <typename T>
void checkCollective(size_t n, int P, const std::vector<size_t>& offsets, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(P);
  CAPTURE(offsets.size());
  OnebitReference<T> ref(n, P);
  ref.segments = offsets;
  Simulated<T> sim(n, P, offsets, true);
  for (int t = 0; t < 3; t++) {
    std::vector<std::vector<T>> inputs(P);
    for (int r = 0; r < P; r++) {
      inputs[r] = seededValues<T>(n, seed + 10 * t + r);
      // Segments of very different magnitudes: what the scales are for.
      for (size_t s = 0; s + 1 < offsets.size(); s++)
        for (size_t i = offsets[s]; i < offsets[s + 1]; i++)
          inputs[r][i] = Value<T>::store(static_cast<float>(Value<T>::load(inputs[r][i]) * (s % 3 == 0 ? 1e-3 : 1.0)));
    }
    const bool sum = t == 1;
    const std::vector<T> want = ref.step(inputs, sum), got = sim.step(inputs, sum);
    CHECK(sameBytes(got, want));
    for (int r = 0; r < P; r++) CHECK(sameBytes(sim.workers[r].error(sim.seg.offsets, true), ref.workerError[r]));
    for (int j = 0; j < P; j++) CHECK(sameBytes(sim.servers[j].error(sim.pieceOffsets(j), true), ref.serverError[j]));
  }
}

}  // namespace

TEST_CASE("segments: the collective through the kernels equals the segmented reference (keepX, pending, 3 steps)") {
  std::mt19937_64 rng(2026);
  uint64_t seed = 500;
  for (size_t n : {size_t(1), size_t(33), size_t(95), size_t(1000), size_t(33001)})
    for (int P = 1; P <= 4; P++)
      for (int cuts : {1, 3, 9}) {
        const std::vector<size_t> o = randomOffsets(n, cuts, P, rng);
        checkCollective<float>(n, P, o, seed++);
        checkCollective<double>(n, P, o, seed++);
        checkCollective<Half>(n, P, o, seed++);
        checkCollective<BFloat16>(n, P, o, seed++);
      }
  // Large enough for the thread pool to split a segment's groups.
  for (int P : {1, 4}) checkCollective<float>(300007, P, randomOffsets(300007, 5, P, rng), seed++);
}

TEST_CASE("segments: many small segments (one per few elements), words shared by up to 32 segments") {
  uint64_t seed = 900;
  for (size_t n : {size_t(257), size_t(4099)})
    for (int P : {1, 3}) {
      std::vector<size_t> o{0};
      for (size_t at = 1; at < n; at += 1 + at % 7) o.push_back(at);
      o.push_back(n);
      checkCollective<float>(n, P, o, seed++);
      checkCollective<double>(n, P, o, seed++);
    }
}

TEST_CASE("segments: one segment as offsets equals the unsegmented kernels bit for bit") {
  uint64_t seed = 700;
  for (size_t n : {size_t(1), size_t(31), size_t(1025), size_t(100003)})  // count 0 never reaches the kernels
    for (int P = 1; P <= 4; P++) {
      CAPTURE(n);
      CAPTURE(P);
      const std::vector<size_t> one{0, n};
      Simulated<float> plain(n, P, one, false), offsets(n, P, one, true);
      for (int t = 0; t < 3; t++) {
        std::vector<std::vector<float>> inputs(P);
        for (int r = 0; r < P; r++) inputs[r] = seededValues<float>(n, seed++);
        CHECK(sameBytes(plain.step(inputs, false), offsets.step(inputs, false)));
        for (int r = 0; r < P; r++) {
          CHECK(sameBytes(plain.workers[r].kept[plain.workers[r].committed],
                          offsets.workers[r].kept[offsets.workers[r].committed]));
          CHECK(plain.workers[r].pendingScale == offsets.workers[r].pendingScales[0]);
        }
        for (int j = 0; j < P; j++) CHECK(0 == std::memcmp(plain.gathered.at(), offsets.gathered.at(), P * plain.slotBytes));
      }
    }
}

TEST_CASE("segments: a NaN in one segment makes its scale NaN, the others stay finite") {
  Cpu cpu;
  const size_t n = 1000;
  std::vector<float> in = seededValues<float>(n, 1), err(n, 0.f), x(n);
  in[700] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<size_t> o{0, 333, 600, n};
  const size_t cw = onebitWords(n), slotBytes = onebitSlotBytes(cw, 4, 3);
  Bytes slots(slotBytes);
  std::vector<double> scratch(onebitScratchBytes(n, 3) / 8), scales(3);
  OnebitCompressArgs a{in.data(), err.data(), x.data(), n, dctFloat32, slots.at(), slotBytes, cw, 1, scratch.data()};
  a.keepX = true;
  a.segments = o.data();
  a.segmentCount = 3;
  a.scalesPerSlot = 3;
  a.scaleValues = scales.data();
  REQUIRE(cpu.ops.onebitCompress(cpu.ctx, &a, nullptr) == dctSuccess);
  CHECK(std::isfinite(scales[0]));
  CHECK(std::isfinite(scales[1]));
  CHECK(std::isnan(scales[2]));
  CHECK(std::isnan(a.scaleValue));
  float entry[3];
  std::memcpy(entry, slots.at(), sizeof entry);
  CHECK(entry[0] == static_cast<float>(scales[0]));
  CHECK(entry[1] == static_cast<float>(scales[1]));
  CHECK(std::isnan(entry[2]));
}
