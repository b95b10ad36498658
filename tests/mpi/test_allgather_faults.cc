// dctSparseAllgather under fault injection (transport/fault_injection.h):
// whatever transport operation fails, on one rank or on all, every rank
// returns an error (none hangs), and the retried call gives exactly the
// result of a run without the fault. The call prepares the transport
// before its vote, so the exchange's room is reserved (and NCCL's device
// checked) where a failure still reaches every rank.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 10007;

struct Gathered {
  std::vector<uint32_t> idx;
  std::vector<float> val;
  std::vector<size_t> counts;
  size_t total = 0;
  bool operator==(const Gathered& o) const {
    return idx == o.idx && val == o.val && counts == o.counts && total == o.total;
  }
};

// Rank r sends 13 * r + 5 entries.
void input(int rank, std::vector<uint32_t>& idx, std::vector<float>& val) {
  std::mt19937 rng(500 + rank);
  std::uniform_int_distribution<uint32_t> pos(0, kCount - 1);
  idx.resize(13 * rank + 5);
  val.resize(idx.size());
  for (size_t j = 0; j < idx.size(); j++) {
    idx[j] = pos(rng);
    val[j] = static_cast<float>(rank) + 0.25f * static_cast<float>(j);
  }
}

// One fetch (capacity for every rank's entries), retried until it works;
// `failures` counts the failed attempts.
Gathered fetch(const World& w, int& failures) {
  std::vector<uint32_t> idx;
  std::vector<float> val;
  input(w.rank, idx, val);
  size_t capacity = 0;
  for (int r = 0; r < w.size; r++) capacity += 13 * r + 5;
  Gathered g;
  g.idx.assign(capacity, 0);
  g.val.assign(capacity, 0.0f);
  g.counts.assign(w.size, 0);
  for (int attempt = 0;; attempt++) {
    REQUIRE(attempt < 3);  // one armed fault: one retry
    const dctResult_t res = dctSparseAllgather(val.data(), idx.data(), idx.size(), kCount, g.val.data(), g.idx.data(),
                                               capacity, g.counts.data(), &g.total, dctFloat32, w.comm, nullptr);
    REQUIRE(allRanksAgree(res == dctSuccess));
    if (res == dctSuccess) return g;
    CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
    failures++;
  }
}

void everyFault(World& w) {
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  int failures = 0;
  const uint64_t before = dct::transportOps(w.comm), preparesBefore = dct::transportPrepares(w.comm);
  const Gathered clean = fetch(w, failures);
  const uint64_t ops = dct::transportOps(w.comm) - before;
  CHECK(dct::transportPrepares(w.comm) - preparesBefore == 1);  // the call prepares its exchange
  for (int victim = -1; victim < w.size; victim++)
    for (uint64_t n = 0; n < ops; n++) {
      CAPTURE(victim);
      CAPTURE(n);
      failures = 0;
      dct::armFault(w.comm, n, victim);
      const Gathered faulty = fetch(w, failures);
      dct::disarmFault(w.comm);
      CHECK(failures == 1);
      CHECK(faulty == clean);
    }
}

}  // namespace

TEST_CASE("dctSparseAllgather: a transport fault at any operation, on any rank or all, fails every rank") {
  World w;
  everyFault(w);
}

TEST_CASE("dctSparseAllgather: the same through the split (piecewise) paths") {
  World w;
  dct::setMpiCountLimitForTesting(97);
  everyFault(w);
  dct::setMpiCountLimitForTesting(0);
}

TEST_CASE("dctSparseAllgather: a staging failure on one rank fails every rank") {
  World w;
  int failures = 0;
  const Gathered clean = fetch(w, failures);
  for (int victim = 0; victim < w.size; victim++)
    for (uint64_t call = 0; call < 6; call++) {  // the header gather's, then the exchange's
      CAPTURE(victim);
      CAPTURE(call);
      if (w.rank == victim) dct::armStagingFault(call);
      failures = 0;
      const Gathered faulty = fetch(w, failures);
      int fired = w.rank == victim && !dct::stagingFaultArmed(), anyFired = 0;
      dct::armStagingFault(UINT64_MAX);
      MPI_Allreduce(&fired, &anyFired, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      CHECK(failures == anyFired);
      CHECK(faulty == clean);
    }
}
