// The CUDA twin of the 1-bit allreduce's queued ops (onebit_step_args.h,
// with streamCommit's 1-bit commit) against the CPU twin, step after step
// on the same seeded inputs: the state, every error buffer, the slots and
// the result bit for bit (the kept x of a non-finite step NaN-aware: NaN
// payloads may differ there, and it is never committed). Simulated ranks
// share one process: the "alltoallv" and "allgather" copy slots between
// the ranks' arenas, and the vote reads every rank's verdict and writes
// the max. Steps cover a non-finite step (output NaN, errors kept), a
// step one rank votes failed (nothing committed anywhere, the sticky word
// set) and one where a rank's call digest differs (dctInvalidUsage voted).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/onebit_state.h"
#include "../common/onebit_reference.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

// Bytes in one twin's memory.
struct Mem {
  bool device;
  size_t bytes;
  void* p = nullptr;
  std::vector<uint64_t> host;
  Mem(const Mem&) = delete;
  Mem(bool d, size_t b) : device(d), bytes(b) {
    if (device) {
      CUDA_REQUIRE(cudaMalloc(&p, bytes ? bytes : 8));
      CUDA_REQUIRE(cudaMemset(p, 0, bytes ? bytes : 8));
      CUDA_REQUIRE(cudaDeviceSynchronize());
    } else {
      host.assign((bytes + 7) / 8 + 1, 0);
      p = host.data();
    }
  }
  ~Mem() {
    if (device) cudaFree(p);
  }
  std::vector<unsigned char> read(size_t count) const {
    std::vector<unsigned char> out(count);
    if (count == 0) return out;
    if (device) {
      CUDA_REQUIRE(cudaDeviceSynchronize());
      CUDA_REQUIRE(cudaMemcpy(out.data(), p, count, cudaMemcpyDeviceToHost));
    } else {
      std::memcpy(out.data(), p, count);
    }
    return out;
  }
  std::vector<unsigned char> read() const { return read(bytes); }
  void write(const void* src, size_t count) {
    if (count == 0) return;
    if (device) {
      CUDA_REQUIRE(cudaDeviceSynchronize());
      CUDA_REQUIRE(cudaMemcpy(p, src, count, cudaMemcpyHostToDevice));
      CUDA_REQUIRE(cudaDeviceSynchronize());
    } else {
      std::memcpy(p, src, count);
    }
  }
  char* at(size_t offset) const { return static_cast<char*>(p) + offset; }
};

// One simulated rank's buffers in one twin.
struct Rank {
  Mem state, failed, input, result, errors0, errors1, server0, server1, arena;
};

template <typename T>
struct Sim {
  using A = typename Value<T>::Acc;
  const KernelOps& ops;
  KernelContext* ctx;
  void* stream;
  bool device;
  size_t n;
  int P;
  OnebitChunks chunks;
  OnebitArena arena;
  std::vector<std::unique_ptr<Rank>> ranks;
  int oddDigest = -1;  // this rank's call differs from the others'

  Sim(const KernelOps& o, KernelContext* c, void* s, bool d, size_t count, int p)
      : ops(o), ctx(c), stream(s), device(d), n(count), P(p), chunks(count, p), arena(chunks, sizeof(A)) {
    for (int r = 0; r < P; r++) {
      const size_t sn = chunks.length(r) * sizeof(A);
      ranks.push_back(std::unique_ptr<Rank>(new Rank{Mem(d, sizeof(StreamState)), Mem(d, 8), Mem(d, n * sizeof(T)),
                                                     Mem(d, n * sizeof(T)), Mem(d, n * sizeof(A)),
                                                     Mem(d, n * sizeof(A)), Mem(d, sn), Mem(d, sn),
                                                     Mem(d, arena.bytes)}));
    }
  }

  OnebitStepArgs args(int r, double factor) {
    Rank& k = *ranks[r];
    OnebitStepArgs a{};
    a.state = static_cast<StreamState*>(k.state.p);
    a.failed = static_cast<int32_t*>(k.failed.p);
    a.input = k.input.p;
    a.dtype = Value<T>::type;
    a.n = n;
    a.errors[0] = k.errors0.p;
    a.errors[1] = k.errors1.p;
    a.serverN = chunks.length(r);
    a.serverErrors[0] = k.server0.p;
    a.serverErrors[1] = k.server1.p;
    a.workerSlots = k.arena.at(arena.workerSlots);
    a.receivedSlots = k.arena.at(arena.receivedSlots);
    a.serverSlot = k.arena.at(arena.serverSlot);
    a.gatheredSlots = k.arena.at(arena.gatheredSlots);
    a.slotBytes = arena.slotBytes;
    a.chunkWords = chunks.chunkWords;
    a.ranks = P;
    a.scratch = reinterpret_cast<double*>(k.arena.at(arena.scratch));
    a.result = k.result.p;
    a.factor = factor;
    a.digest = r == oddDigest ? 0xd1ffull : 0x1b17ull;
    return a;
  }

  void copy(void* dst, const void* src, size_t bytes) {
    REQUIRE(ops.copy(ctx, dst, src, bytes, stream) == dctSuccess);
  }

  // One step of every rank; `halt` >= 0: that rank's sticky word is set first.
  void step(const std::vector<std::vector<T>>& inputs, double factor, int halt) {
    for (int r = 0; r < P; r++) {
      ranks[r]->input.write(inputs[r].data(), n * sizeof(T));
      const int32_t f = r == halt ? dctTransportError : 0;
      ranks[r]->failed.write(&f, sizeof f);
    }
    std::vector<OnebitStepArgs> a;
    for (int r = 0; r < P; r++) a.push_back(args(r, factor));
    for (int r = 0; r < P; r++) REQUIRE(ops.onebitStepCompress(ctx, &a[r], 0, stream) == dctSuccess);
    for (int q = 0; q < P; q++)  // alltoallv: rank r's slot q to rank q's slot r, whole (its digest too)
      for (int r = 0; r < P; r++)
        copy(static_cast<char*>(const_cast<void*>(a[q].receivedSlots)) + r * arena.slotBytes,
             static_cast<char*>(a[r].workerSlots) + q * arena.slotBytes, arena.slotBytes);
    for (int r = 0; r < P; r++) REQUIRE(ops.onebitStepCompress(ctx, &a[r], 1, stream) == dctSuccess);
    for (int r = 0; r < P; r++)  // allgather
      for (int j = 0; j < P; j++)
        copy(static_cast<char*>(const_cast<void*>(a[r].gatheredSlots)) + j * arena.slotBytes, a[j].serverSlot,
             arena.slotBytes);
    for (int r = 0; r < P; r++) REQUIRE(ops.onebitStepCheck(ctx, &a[r], stream) == dctSuccess);
    REQUIRE(ops.synchronize(ctx, stream) == dctSuccess);
    int32_t worst = 0;
    for (int r = 0; r < P; r++) {
      StreamState s;
      std::memcpy(&s, ranks[r]->state.read().data(), sizeof s);
      worst = std::max(worst, s.vote);
    }
    for (int r = 0; r < P; r++) {
      StreamStepArgs v{};
      v.state = a[r].state;
      v.failed = a[r].failed;
      v.sticky = true;
      v.onebit = true;
      REQUIRE(ops.streamPost(ctx, &v, worst, stream) == dctSuccess);
      REQUIRE(ops.streamCommit(ctx, &v, stream) == dctSuccess);
      REQUIRE(ops.onebitStepDecode(ctx, &a[r], stream) == dctSuccess);
    }
    REQUIRE(ops.synchronize(ctx, stream) == dctSuccess);
  }
};

template <typename T>
std::vector<std::vector<T>> inputsOf(size_t n, int P, int step, bool poison) {
  std::vector<std::vector<T>> in;
  for (int r = 0; r < P; r++) {
    in.push_back(seededValues<T>(n, 1000u * step + r));
    if (poison && r == 0 && n) in[r][n / 2] = Value<T>::store(std::numeric_limits<float>::infinity());
  }
  return in;
}

template <typename A>
void sameErrors(const std::vector<unsigned char>& g, const std::vector<unsigned char>& c) {
  REQUIRE(g.size() == c.size());
  std::vector<A> a(g.size() / sizeof(A)), b(a.size());
  if (a.empty()) return;
  std::memcpy(a.data(), g.data(), g.size());
  std::memcpy(b.data(), c.data(), c.size());
  requireSameValues(a, b, a.size());
}

template <typename T>
void compareSteps(size_t n, int P, dctRedOp_t op) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(P);
  CAPTURE(dtypeOf<T>());
  Twins tw;
  Sim<T> cpu(tw.cpu, tw.cpuCtx, nullptr, false, n, P), gpu(tw.gpu, tw.gpuCtx, tw.stream, true, n, P);
  const double factor = op == dctSum ? P : 1.0;
  for (int step = 0; step < 7; step++) {
    CAPTURE(step);
    const bool poison = step == 2, halt = step == 4, odd = step == 5 && P > 1;
    cpu.oddDigest = gpu.oddDigest = odd ? P - 1 : -1;
    const auto in = inputsOf<T>(n, P, step, poison);
    cpu.step(in, factor, halt ? P - 1 : -1);
    gpu.step(in, factor, halt ? P - 1 : -1);
    for (int r = 0; r < P; r++) {
      CAPTURE(r);
      const Rank &c = *cpu.ranks[r], &g = *gpu.ranks[r];
      CHECK(g.state.read() == c.state.read());
      CHECK(g.failed.read() == c.failed.read());
      CHECK(g.result.read() == c.result.read());
      // The slots (the scratch past them holds partial sums: NaN-aware below).
      CHECK(g.arena.read(cpu.arena.scratch) == c.arena.read(cpu.arena.scratch));
      if (poison) {  // the spare buffers hold a non-finite x, never committed
        sameErrors<A>(g.errors0.read(), c.errors0.read());
        sameErrors<A>(g.errors1.read(), c.errors1.read());
        sameErrors<A>(g.server0.read(), c.server0.read());
        sameErrors<A>(g.server1.read(), c.server1.read());
      } else {
        CHECK(g.errors0.read() == c.errors0.read());
        CHECK(g.errors1.read() == c.errors1.read());
        CHECK(g.server0.read() == c.server0.read());
        CHECK(g.server1.read() == c.server1.read());
      }
    }
    StreamState s;
    std::memcpy(&s, cpu.ranks[0]->state.read().data(), sizeof s);
    CHECK(s.lastOk == (halt || odd ? 0 : 1));
    if (odd) CHECK(s.vote == dctInvalidUsage);
    CHECK(s.draftNonFinite == (poison ? 1 : 0));
  }
}

}  // namespace

TEST_CASE("the queued 1-bit step's CUDA ops equal the CPU twin's, step after step (a differing digest too)") {
  compareSteps<float>(1001, 3, dctSum);
  compareSteps<float>(40, 4, dctAvg);  // empty chunks
  compareSteps<float>(70001, 2, dctAvg);  // several reduction levels
  compareSteps<double>(5003, 3, dctAvg);
  compareSteps<BFloat16>(3001, 4, dctSum);
  compareSteps<Half>(2049, 1, dctAvg);
}
