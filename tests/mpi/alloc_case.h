// The allocation fault test's harness (test_allocation_faults.cc): a call
// as a Case, set up afresh for every try, and the loop that fails each of
// its allocations in turn on every rank and on all (alloc_fault.h).
#pragma once

#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "alloc_fault.h"
#include "dct/dct.h"
#include "fault_util.h"
#include "mpi_util.h"

namespace dcttest {

using Bytes = std::vector<unsigned char>;

template <typename T>
void put(Bytes& b, const T* data, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  b.insert(b.end(), p, p + n * sizeof(T));
}
template <typename T>
void put(Bytes& b, const std::vector<T>& v) {
  put(b, v.data(), v.size());
}

// The bytes of several vectors, one after the other.
template <typename... V>
Bytes concat(const V&... v) {
  Bytes b;
  (put(b, v), ...);
  return b;
}

// One entry point's call, set up afresh for every try. All but `call` run
// unarmed.
struct Case {
  std::string name;
  std::function<void()> setUp;
  std::function<dctResult_t()> call;
  std::function<Bytes()> state;   // committed state: unchanged by a failed call
  std::function<Bytes()> inputs;  // the caller's inputs: never changed
  std::function<Bytes()> result;  // after a successful call: the output, then the state it left
  std::function<void()> tearDown;
  dctComm_t comm = nullptr;
};

inline long long maxOverRanks(long long mine) {
  long long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return all;
}

inline bool anyRank(bool mine) { return maxOverRanks(mine ? 1 : 0) != 0; }

// Which allocation indices of [0, N) a case tries.
inline std::vector<long long> sampled(long long N) {
  long long cap = 20;  // a few minutes per rank count under ASan
  if (const char* env = std::getenv("DCT_ALLOC_FAULT_SAMPLE")) cap = std::atoll(env);
  std::vector<long long> ns;
  if (cap <= 0 || N <= cap) {
    for (long long n = 0; n < N; n++) ns.push_back(n);
    return ns;
  }
  for (long long i = 0; i < cap; i++) ns.push_back(cap == 1 ? 0 : i * (N - 1) / (cap - 1));
  return ns;
}

struct Failed {
  long long n;
  int target;
};

// Every allocation of the call fails once, on each rank alone and on all.
// Returns the tries that broke the contract (CHECKed too).
inline std::vector<Failed> everyAllocation(Case& k) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  k.setUp();
  REQUIRE(k.call() == dctSuccess);
  const Bytes reference = k.result();
  k.tearDown();
  k.setUp();
  long long mine = 0;
  {
    alloc::Armed counting(-1);
    const dctResult_t res = k.call();
    mine = counting.stop();
    REQUIRE(res == dctSuccess);
  }
  k.tearDown();
  const long long N = maxOverRanks(mine);
  const std::string name = k.name;
  MESSAGE(name << ": " << N << " allocations");
  std::vector<Failed> failed;
  for (long long n : sampled(N))
    for (int target = P > 1 ? -1 : 0; target < P; target++) {  // -1: every rank
      CAPTURE(name);
      CAPTURE(n);
      CAPTURE(target);
      k.setUp();
      const Bytes before = k.state(), in = k.inputs();
      dctResult_t res;
      {
        alloc::Armed armed(target < 0 || target == rank ? n : -1);
        res = k.call();
      }
      const bool firedHere = alloc::fired(), fired = anyRank(firedHere);
      bool ok = allRanksAgree(res == dctSuccess);
      CHECK(ok);
      if (ok && res != dctSuccess) {
        CHECK(fired);
        const std::string error = dctGetLastError(k.comm);
        CAPTURE(error);
        // Where the allocation failed; elsewhere a hierarchical step's
        // follower only learns that its leader failed.
        const bool says = !firedHere || error.find("memory") != std::string::npos;
        CHECK(says);
        const bool same = k.state() == before;
        CHECK(same);
        ok = says && same;
        res = k.call();
        CHECK(allRanksAgree(res == dctSuccess));
        ok = ok && res == dctSuccess;
      }
      if (ok) {
        const bool inputsKept = k.inputs() == in, exact = k.result() == reference;
        CHECK(inputsKept);
        CHECK(exact);
        ok = inputsKept && exact;
      }
      k.tearDown();
      if (!allTrue(ok)) failed.push_back({n, target});
    }
  if (rank == 0 && !failed.empty()) {
    std::string list;
    for (const Failed& f : failed)
      list += " " + std::to_string(f.n) + (f.target < 0 ? "@all" : "@" + std::to_string(f.target));
    MESSAGE(name << ": contract broken at allocation@rank" << list);
  }
  return failed;
}

// DCT_ALLOC_FAULT_ONLY: only the cases whose name holds it.
inline void runCase(Case k) {
  const char* only = std::getenv("DCT_ALLOC_FAULT_ONLY");
  if (only && k.name.find(only) == std::string::npos) return;
  const std::vector<Failed> failed = everyAllocation(k);
  CHECK(failed.empty());
}

// A plan's stats as bytes; none without a plan.
template <typename Plan>
Bytes planStats(Plan plan, dctResult_t (*get)(Plan, dctAlltoallStats_t*)) {
  Bytes b;
  if (plan == nullptr) return b;
  dctAlltoallStats_t s{};
  REQUIRE(get(plan, &s) == dctSuccess);
  put(b, &s, 1);
  return b;
}

// A plan's three calls, for the all-to-all and DES cases: the armed call is
// the creation, a forward (after a creation) or a backward (after both).
struct PlanCalls {
  std::function<dctResult_t()> create, forward, backward;
  std::function<Bytes()> outputs;  // the forward's and the backward's results
  std::function<Bytes()> stats;    // the plan's, empty without a plan
  bool armCreate = false, armBackward = false;
  // setUp's tail: the calls before the armed one; true when they ran.
  bool runBefore() const {
    if (armCreate) return false;
    REQUIRE(create() == dctSuccess);
    REQUIRE(forward() == dctSuccess);
    if (armBackward) return false;
    REQUIRE(backward() == dctSuccess);
    return true;
  }
  // The armed call, the state it commits, and the result: what the armed
  // call leaves to do, then the outputs and the stats.
  void into(Case& k) const {
    k.call = armCreate ? create : armBackward ? backward : forward;
    k.state = stats;
    const PlanCalls p = *this;
    k.result = [p] {
      if (p.armCreate) REQUIRE(p.forward() == dctSuccess);
      if (!p.armBackward) REQUIRE(p.backward() == dctSuccess);
      Bytes b = p.outputs();
      const Bytes s = p.stats();
      b.insert(b.end(), s.begin(), s.end());
      return b;
    };
  }
};

}  // namespace dcttest
