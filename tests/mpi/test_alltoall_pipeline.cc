// The pipelined DCT-MP forward (algo/alltoall_pipeline.cc) against the
// unchunked one on the same comm: received rows, the gradients the backward
// brings back on its masks, and the statistics, bit for bit; at a size
// that chunks by itself, with chunks forced on tiny uneven splits (empty
// blocks, chunks of no rows), fp16 values, and rows keeping more than K
// (NaN), which send the step back unchunked.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/alltoall_plan.h"
#include "transport/comm.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

std::vector<float> rowsData(size_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Split {
  std::vector<size_t> send, recv;
  size_t sendRows = 0, recvRows = 0;
};

// Rank p sends base + ((p + 2q) % 3) * extra rows to rank q.
Split split(const World& w, size_t base, size_t extra) {
  Split s;
  s.send.resize(w.size);
  s.recv.resize(w.size);
  for (int q = 0; q < w.size; q++) {
    s.sendRows += s.send[q] = base + ((w.rank + 2 * q) % 3) * extra;
    s.recvRows += s.recv[q] = base + ((q + 2 * w.rank) % 3) * extra;
  }
  return s;
}

struct Outcome {
  std::vector<std::vector<float>> outputs;
  dctAlltoallStats_t stats{};
};

// `steps` forwards and backwards; nanRow >= 0: at step 1 that send row (if
// this rank has it) holds 3K NaNs.
Outcome run(const World& w, const Split& s, size_t D, dctDataType_t wire, int chunks, int steps, long nanRow = -1) {
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = 0.05;
  cfg.rowSelection = dctRowTopK;
  cfg.wireType = wire;
  dctAlltoallPlan_t plan = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), D, dctFloat32, &cfg, &plan) == dctSuccess);
  if (chunks >= 0) plan->chunks = chunks;
  Outcome o;
  for (int step = 0; step < steps; step++) {
    auto in = rowsData(s.sendRows * D, 100 * w.rank + step);
    if (step == 1 && nanRow >= 0 && static_cast<size_t>(nanRow) < s.sendRows)
      for (size_t j = 0; j < 3 * plan->k && j < D; j++) in[nanRow * D + j] = std::numeric_limits<float>::quiet_NaN();
    const auto grad = rowsData(s.recvRows * D, 7 + w.rank + step);
    std::vector<float> out(s.recvRows * D), back(s.sendRows * D);
    REQUIRE(dctSparseAlltoall(plan, in.data(), out.data(), nullptr) == dctSuccess);
    REQUIRE(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
    o.outputs.push_back(out);
    o.outputs.push_back(back);
  }
  REQUIRE(dctAlltoallPlanGetStats(plan, &o.stats) == dctSuccess);
  dctAlltoallPlanDestroy(plan);
  return o;
}

size_t differing(const Outcome& a, const Outcome& b) {
  REQUIRE(a.outputs.size() == b.outputs.size());
  size_t wrong = 0;
  for (size_t i = 0; i < a.outputs.size(); i++) {
    REQUIRE(a.outputs[i].size() == b.outputs[i].size());
    for (size_t j = 0; j < a.outputs[i].size(); j++)
      wrong += std::memcmp(&a.outputs[i][j], &b.outputs[i][j], sizeof(float)) != 0;
  }
  return wrong;
}

// Chunked blocks pad their mask and values to 8 bytes each: up to 14 more
// bytes per block and chunk than whole blocks (a: chunked, b: whole).
void requireSameStats(const dctAlltoallStats_t& a, const dctAlltoallStats_t& b, int chunks, int ranks) {
  CHECK(a.forwardSteps == b.forwardSteps);
  CHECK(a.keptEntries == b.keptEntries);
  CHECK(a.nonFinite == b.nonFinite);
  const uint64_t slack = uint64_t(14) * chunks * ranks;
  CHECK(a.forwardBytesSent >= b.forwardBytesSent);
  CHECK(a.forwardBytesSent <= b.forwardBytesSent + slack);
  CHECK(a.forwardBytesReceived >= b.forwardBytesReceived);
  CHECK(a.forwardBytesReceived <= b.forwardBytesReceived + slack);
  CHECK(a.backwardBytesSent == b.backwardBytesSent);
}

}  // namespace

TEST_CASE("a forward large enough chunks itself and matches the unchunked one") {
  World w;
  const Split s = split(w, 16000 / w.size, 500);  // ~20 bytes a row: past 256 KiB a rank
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = 0.05;
  dctAlltoallPlan_t probe = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), 64, dctFloat32, &cfg, &probe) == dctSuccess);
  if (w.size > 1) CHECK(probe->chunks >= 2);
  else CHECK(probe->chunks == 0);
  dctAlltoallPlanDestroy(probe);
  for (dctDataType_t wire : {dctFloat32, dctFloat16}) {
    CAPTURE(wire);
    const Outcome chunked = run(w, s, 64, wire, -1, 3), whole = run(w, s, 64, wire, 0, 3);
    CHECK(differing(chunked, whole) == 0);
    requireSameStats(chunked.stats, whole.stats, 8, w.size);
  }
}

TEST_CASE("forced chunks on tiny uneven splits: empty blocks and chunks without rows") {
  World w;
  for (size_t D : {size_t(7), size_t(64), size_t(300)})
    for (int chunks : {2, 5, 8}) {
      CAPTURE(D);
      CAPTURE(chunks);
      const Split s = split(w, 0, 3);  // 0, 3 or 6 rows a peer
      const Outcome chunked = run(w, s, D, dctFloat32, chunks, 3), whole = run(w, s, D, dctFloat32, 0, 3);
      CHECK(differing(chunked, whole) == 0);
      requireSameStats(chunked.stats, whole.stats, chunks, w.size);
    }
}

TEST_CASE("a row keeping more than K (NaN) sends the step back unchunked, on every rank") {
  World w;
  const Split s = split(w, 40, 7);
  for (long nanRow : {0L, 61L}) {
    CAPTURE(nanRow);
    const Outcome chunked = run(w, s, 64, dctFloat32, 4, 3, w.rank == 0 ? nanRow : -1);
    const Outcome whole = run(w, s, 64, dctFloat32, 0, 3, w.rank == 0 ? nanRow : -1);
    CHECK(differing(chunked, whole) == 0);
    requireSameStats(chunked.stats, whole.stats, 4, w.size);
  }
}

namespace {

// A transport whose ialltoallv, once, sends a copy of this rank's chunk with
// the status word of its block for rank 1 set: only rank 1 sees it, as with
// a block garbled on the way.
const dct::Transport* gReal = nullptr;
int gCountdown = -1;
std::vector<char> gGarbled;  // outlives the request

dctResult_t garblingIalltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                               void* recv, const size_t* recvBytes, const size_t* recvOffsets, void** request) {
  if (gCountdown-- == 0 && sendBytes[1] >= sizeof(uint64_t)) {
    const auto* from = static_cast<const char*>(send);
    gGarbled.assign(from, from + dct::blocksExtent(sendBytes, sendOffsets, comm->size));
    const uint64_t flag = 1;
    std::memcpy(gGarbled.data() + sendOffsets[1], &flag, sizeof(flag));
    send = gGarbled.data();
  }
  return gReal->ialltoallv(comm, send, sendBytes, sendOffsets, recv, recvBytes, recvOffsets, request);
}

}  // namespace

TEST_CASE("a status word that reaches one rank only sends every rank back unchunked, or none") {
  World w;
  if (w.size < 2) return;
  alarm(120);  // ranks that disagree on the fallback would wait on each other
  const Split s = split(w, 40, 7);
  const size_t D = 64;
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = 0.05;
  cfg.rowSelection = dctRowTopK;
  dctAlltoallPlan_t chunked = nullptr, whole = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), D, dctFloat32, &cfg, &chunked) == dctSuccess);
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), D, dctFloat32, &cfg, &whole) == dctSuccess);
  chunked->chunks = 4;
  whole->chunks = 0;
  const auto in = rowsData(s.sendRows * D, 100 * w.rank);
  std::vector<float> out(s.recvRows * D), expected(s.recvRows * D);
  REQUIRE(dctSparseAlltoall(whole, in.data(), expected.data(), nullptr) == dctSuccess);
  dct::Transport garbling = *w.comm->transport;
  gReal = w.comm->transport;
  garbling.ialltoallv = garblingIalltoallv;
  w.comm->transport = &garbling;
  gCountdown = w.rank == 0 ? 1 : -1;  // rank 0's second chunk
  const dctResult_t res = dctSparseAlltoall(chunked, in.data(), out.data(), nullptr);
  w.comm->transport = gReal;
  CHECK(allTrue(res == dctSuccess));
  CHECK(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0);
  // Both plans go on alike: the backward of each forward.
  const auto grad = rowsData(s.recvRows * D, 7 + w.rank);
  std::vector<float> back(s.sendRows * D), backWhole(s.sendRows * D);
  CHECK(dctSparseAlltoallBackward(chunked, grad.data(), back.data(), nullptr) == dctSuccess);
  CHECK(dctSparseAlltoallBackward(whole, grad.data(), backWhole.data(), nullptr) == dctSuccess);
  CHECK(std::memcmp(back.data(), backWhole.data(), back.size() * sizeof(float)) == 0);
  dctAlltoallPlanDestroy(chunked);
  dctAlltoallPlanDestroy(whole);
  alarm(0);
}
