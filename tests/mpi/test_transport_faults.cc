// The MPI transport's failure contract under mpirun: a rank whose staging
// fails (the seam in transport/fault_injection.h) still takes part in the
// collective, so every peer completes with the right data, and reports the
// failure itself. Every data op, at int-sized and split (piecewise) counts.
#include <doctest/doctest.h>
#include <mpi.h>

#include <functional>
#include <numeric>
#include <vector>

#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

// Byte b of rank r's block: a pattern every rank can check.
unsigned char pattern(int rank, size_t b) { return static_cast<unsigned char>(31 * rank + 7 * b + 1); }

std::vector<unsigned char> block(int rank, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t b = 0; b < bytes; b++) v[b] = pattern(rank, b);
  return v;
}

// Runs `op` with the staging call `call` armed to fail on `victim`: the
// victim reports the failure, the others succeed and check their data,
// nobody waits. Returns whether the armed call was reached on the victim.
bool faultOn(const World& w, int victim, uint64_t call, const std::function<dctResult_t()>& op,
             const std::function<bool()>& dataOk) {
  if (w.rank == victim) dct::armStagingFault(call);
  const dctResult_t res = op();
  const bool fired = w.rank == victim && !dct::stagingFaultArmed();
  dct::armStagingFault(UINT64_MAX);
  int firedAny = fired, any = 0;
  MPI_Allreduce(&firedAny, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (!any) {
    CHECK(res == dctSuccess);
    return false;
  }
  if (w.rank == victim) CHECK(res == dctTransportError);
  else {
    CHECK(res == dctSuccess);
    CHECK(dataOk());
  }
  return true;
}

// Every staging call of `op` in turn, on every rank in turn.
void everyStagingCall(const World& w, const std::function<dctResult_t()>& op, const std::function<bool()>& dataOk) {
  for (int victim = 0; victim < w.size; victim++)
    for (uint64_t call = 0;; call++) {
      CAPTURE(victim);
      CAPTURE(call);
      REQUIRE(call < 4);
      if (!faultOn(w, victim, call, op, dataOk)) break;
    }
}

void everyOp(const World& w, size_t bytes) {
  const dct::Transport* t = w.comm->transport;
  const int P = w.size, me = w.rank;
  const std::vector<unsigned char> mine = block(me, bytes);
  std::vector<unsigned char> all(bytes * P);
  auto gatheredOk = [&] {
    for (int r = 0; r < P; r++)
      if (std::vector<unsigned char>(all.begin() + r * bytes, all.begin() + (r + 1) * bytes) != block(r, bytes))
        return false;
    return true;
  };
  SUBCASE("allgather") {
    everyStagingCall(w, [&] { return t->allgather(w.comm, mine.data(), all.data(), bytes, nullptr); }, gatheredOk);
  }
  SUBCASE("allgatherv") {
    std::vector<size_t> sizes(P, bytes), offsets(P);
    for (int r = 0; r < P; r++) offsets[r] = r * bytes;
    everyStagingCall(
        w,
        [&] { return t->allgatherv(w.comm, mine.data(), bytes, all.data(), sizes.data(), offsets.data(), nullptr); },
        gatheredOk);
  }
  SUBCASE("alltoallv") {  // block for rank q: pattern(me) again, so every received block is its sender's
    std::vector<unsigned char> send(bytes * P);
    for (int q = 0; q < P; q++) std::copy(mine.begin(), mine.end(), send.begin() + q * bytes);
    std::vector<size_t> sizes(P, bytes), offsets(P);
    for (int r = 0; r < P; r++) offsets[r] = r * bytes;
    everyStagingCall(w,
                     [&] {
                       return t->alltoallv(w.comm, send.data(), sizes.data(), offsets.data(), all.data(),
                                           sizes.data(), offsets.data(), bytes * P * P, nullptr);
                     },
                     gatheredOk);
  }
  const size_t count = bytes / sizeof(float);
  std::vector<float> x(count), sum(count);
  std::iota(x.begin(), x.end(), static_cast<float>(me));
  auto sumOk = [&] {
    for (size_t i = 0; i < count; i++)
      if (sum[i] != static_cast<float>(P * i) + static_cast<float>(P * (P - 1) / 2)) return false;
    return true;
  };
  SUBCASE("allreduce") {
    everyStagingCall(w, [&] { return t->allreduce(w.comm, x.data(), sum.data(), count, dctFloat32, nullptr); }, sumOk);
  }
  SUBCASE("allreduce in place") {
    everyStagingCall(
        w,
        [&] {
          std::copy(x.begin(), x.end(), sum.begin());
          return t->allreduce(w.comm, sum.data(), sum.data(), count, dctFloat32, nullptr);
        },
        sumOk);
  }
  SUBCASE("reduce") {
    const int root = P - 1;
    everyStagingCall(w, [&] { return t->reduce(w.comm, x.data(), sum.data(), count, dctFloat32, root, nullptr); },
                     [&] { return me != root || sumOk(); });
  }
  SUBCASE("broadcast") {
    std::vector<unsigned char> buf;
    everyStagingCall(
        w,
        [&] {
          buf = block(me, bytes);
          return t->broadcast(w.comm, buf.data(), bytes, 0, nullptr);
        },
        [&] { return buf == block(0, bytes); });
  }
}

}  // namespace

TEST_CASE("a staging failure on one rank: every transport op still takes part") {
  World w;
  everyOp(w, 4000);
}

TEST_CASE("a staging failure on one rank: the split (piecewise) paths still take part") {
  World w;
  dct::setMpiCountLimitForTesting(97);
  everyOp(w, 4000);
  dct::setMpiCountLimitForTesting(0);
}
