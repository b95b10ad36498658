// The pipelined allreduce (algo/pipeline.cc) when a chunk header reaches
// one rank garbled: rank 1 sees rank 0's first chunk marked as outgrown,
// the others see it intact. Every rank must redo the step unchunked, or
// none (ranks that disagreed waited on each other), with the unchunked
// step's bits. The garbling happens on the way in (the transport's test()
// of that chunk), as a bad link would do it.
#include <doctest/doctest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "mpi_util.h"
#include "transport/comm.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 10007;

const dct::Transport* gReal = nullptr;
int gCountdown = -1;        // iallgatherv calls until the one to garble
void* gRequest = nullptr;   // its request
char* gHeader = nullptr;    // rank 0's block in it

dctResult_t watchingIallgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                                const size_t* recvBytes, const size_t* recvOffsets, void** request) {
  const dctResult_t res = gReal->iallgatherv(comm, send, sendBytes, recv, recvBytes, recvOffsets, request);
  if (gCountdown-- == 0) {
    gRequest = *request;
    gHeader = static_cast<char*>(recv) + recvOffsets[0];
  }
  return res;
}

dctResult_t garblingTest(dctComm_t comm, void* request, int* done) {
  const dctResult_t res = gReal->test(comm, request, done);
  if (*done && request != nullptr && request == gRequest) {
    const int32_t outgrew = 1;  // ChunkHeader: nnz, need, then status (kChunkOutgrew)
    std::memcpy(gHeader + 16, &outgrew, sizeof(outgrew));
    gRequest = nullptr;
  }
  return res;
}

std::vector<float> gradient(int rank, int step) {
  std::mt19937 rng(1000 * rank + step);
  std::normal_distribution<float> d;
  std::vector<float> g(kCount);
  for (float& x : g) x = d(rng);
  return g;
}

// Three steps (the second and third chunked: the first sizes their slots);
// `garble`: rank 1 garbles rank 0's first chunk header in the second step.
std::vector<float> run(const World& w, bool garble) {
  const ScopedEnv chunking("DCT_CHUNK_ELEMENTS", 997);
  Settings s;
  s.density = 0.05;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> outputs;
  dct::Transport garbling = *w.comm->transport;
  gReal = w.comm->transport;
  garbling.iallgatherv = watchingIallgatherv;
  garbling.test = garblingTest;
  for (int step = 0; step < 3; step++) {
    if (garble && step == 1) {
      w.comm->transport = &garbling;
      gCountdown = w.rank == 1 ? 0 : -1;
    }
    std::vector<float> g = gradient(w.rank, step), out(kCount);
    const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), kCount, dctFloat32, dctSum, c, w.comm, nullptr);
    w.comm->transport = gReal;
    gCountdown = -1;
    REQUIRE(allTrue(res == dctSuccess));
    outputs.insert(outputs.end(), out.begin(), out.end());
  }
  dctCompressorDestroy(c);
  return outputs;
}

}  // namespace

TEST_CASE("a chunk header garbled for one rank sends every rank back unchunked, or none") {
  World w;
  if (w.size < 2) return;
  const bool nonblocking = w.comm->transport->iallgatherv != nullptr;
  REQUIRE(nonblocking);
  alarm(120);  // ranks that disagree on the fallback would wait on each other
  const std::vector<float> clean = run(w, false), garbled = run(w, true);
  CHECK(std::memcmp(clean.data(), garbled.data(), clean.size() * sizeof(float)) == 0);
  CHECK(identicalOnAllRanks(garbled.data(), garbled.size() * sizeof(float)));
  alarm(0);
}
