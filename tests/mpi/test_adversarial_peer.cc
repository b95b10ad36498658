// Every collective entry point over an adversarial peer (adversary.h): one
// rank corrupts what it sends or announces in one data op of a call. Each
// seeded case must end with every rank failing, or every rank succeeding
// with the same bits (a corruption the data cannot reveal, like a flipped
// value bit, changes the sum alike everywhere; the corrupting rank's own
// result may keep what it meant to send); never with ranks that
// disagree, an out-of-bounds access (run it under ASan + UBSan) or a hang
// (each case is bounded by an alarm). A clean call on the same compressor
// or plan must then succeed everywhere.
//
// A seed picks (entry point, sizes, corrupting rank, op of the call, kind,
// offset, bits); the op count of the call comes from the same call run clean
// just before. DCT_FUZZ_CASES (default 2000) and DCT_FUZZ_SEED (default 1)
// scale the run; scripts/fuzz.sh loops seeds for longer. The hierarchical
// allreduce needs a comm split the callbacks cannot make: not covered here.
// The lies that once reached memory, one by one: test_adversarial_lies.cc.
#include <doctest/doctest.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "adversary.h"
#include "mpi_util.h"

using namespace dcttest;
using namespace dcttest::adversary;

namespace {

enum Entry : int {
  kAllgather, kSplit, kDense, kGlobalTopk, kAutoGlobal, kAuto, kOnebit,
  kAlltoallForward, kAlltoallBackward, kDesThinForward, kDesThinBackward, kDesForward,
  kInputDense, kInputCoo, kSparseAllgather, kEntries,
  kFixed = kEntries  // drawn apart (caseOf), so that every other entry's seeds keep their cases
};
const char* kEntryNames[] = {"allreduce/allgather", "allreduce/split", "allreduce/dense", "allreduce/globaltopk",
                             "allreduce/auto+globaltopk", "allreduce/auto", "allreduce/onebit", "alltoall/forward",
                             "alltoall/backward", "des-thinned/forward", "des-thinned/backward", "des/forward",
                             "sparse-input/dense", "sparse-input/coo", "sparse-allgather", "allreduce/fixed-capacity"};

// What a seed decides, the same on every rank.
struct Case {
  uint64_t seed;
  Entry entry;
  size_t count;     // elements (allreduce, sparse input), or row length
  double density;
  int victim;       // the corrupting rank
  uint64_t opPick;  // the op, modulo the call's op count
  Kind kind;
  uint64_t offset, bits;
  std::string describe(long ops) const {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "seed %llu: %s count %zu density %g, rank %d op %llu of %ld, %s",
                  (unsigned long long)seed, kEntryNames[entry], count, density, victim,
                  (unsigned long long)(ops > 0 ? opPick % ops : 0), ops, kindName(kind));
    return buf;
  }
};

bool isRegression(uint64_t seed);

Case caseOf(uint64_t seed, int P) {
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 17);
  Case c;
  c.seed = seed;
  c.entry = static_cast<Entry>(rng() % kEntries);
  const size_t counts[] = {1, 5, 64, 300, 1000, 4099};
  c.count = counts[rng() % 6];
  const double densities[] = {0.01, 0.05, 0.3, 1.0};
  c.density = densities[rng() % 4];
  c.victim = static_cast<int>(rng() % P);
  c.opPick = rng();
  c.kind = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
  c.offset = rng();
  if (rng() % 3 == 0) c.offset %= 64;  // headers and size tables sit at the front
  c.bits = rng();
  // A third of the allgather plan's cases run it in the fixed-capacity mode
  // (one slot allgather and a vote a step), but not the regression seeds.
  if (c.entry == kAllgather && rng() % 3 == 0 && !isRegression(seed)) c.entry = kFixed;
  return c;
}

// One call's outcome on this rank: the result code and its bytes, where
// they must agree across ranks (empty: per-rank results).
struct Outcome {
  dctResult_t res = dctSuccess;
  std::vector<unsigned char> shared;
  long ops = -1;     // the call's data ops on this rank (-1: the adversary's count)
  std::string note;  // what the attack did, taken before later calls re-arm
};

// The adversary's record of the call just made, before another re-arms it.
void mark(Outcome& o, const Adversary& adv) {
  o.ops = adv.ops();
  o.note = adv.fireNote();
}

template <typename T>
void keep(Outcome& o, const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  o.shared.insert(o.shared.end(), p, p + v.size() * sizeof(T));
}

// A COO result of n entries, when the call succeeded.
void keepCoo(Outcome& o, std::vector<uint32_t>& idx, std::vector<float>& val, size_t n) {
  if (o.res != dctSuccess) return;
  idx.resize(n);
  val.resize(n);
  keep(o, idx);
  keep(o, val);
}

// An entry point with its state (compressor or plan) across the case's calls.
class Subject {
 public:
  virtual ~Subject() = default;
  // Runs the call of step `step` (the backward entries: their forward
  // first, clean).
  virtual Outcome call(int step, bool attacked, Adversary& adv) = 0;
  Attack attack_;                // armed for the attacked call
  dctResult_t retry_ = dctSuccess;  // a backward's clean retry, or the backward after a forward
};

class Allreduce : public Subject {
 public:
  Allreduce(const Case& c, dctComm_t comm) : c_(c), comm_(comm) {
    Settings s;
    s.density = c.density;
    s.algorithm = c.entry == kSplit ? dctAlgoSplit : c.entry == kDense ? dctAlgoDense
                  : c.entry == kGlobalTopk ? dctAlgoGlobalTopk : c.entry == kAllgather ? dctAlgoAllgather
                  : c.entry == kOnebit ? dctAlgoAllgather : dctAlgoAuto;
    s.method = dctThresholdSampled;
    if (c.entry == kFixed) s.capacity = 2;
    if (c.entry == kFixed && c.count % 2) s.algorithm = dctAlgoGlobalTopk;  // fixed pieces, half the cases
    dctConfig_t cfg = explicitConfig(s);
    if (c.entry == kAutoGlobal) cfg.autoGlobalTopk = 1;
    if (c.entry == kOnebit) cfg.compressor = dctCompressorOnebit;
    REQUIRE(dctCompressorCreate(comm, c.count, dctFloat32, &cfg, &comp_) == dctSuccess);
  }
  ~Allreduce() override { dctCompressorDestroy(comp_); }
  Outcome call(int step, bool attacked, Adversary& adv) override {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::vector<float> g = gradient(c_.count, c_.seed, rank, step), out(c_.count, -1.0f);
    const bool inPlace = c_.bits % 2 == 0;
    Outcome o;
    adv.arm(attacked ? attack_ : Attack{});
    o.res = dctSparseAllreduce(g.data(), inPlace ? g.data() : out.data(), c_.count, dctFloat32, dctSum, comp_, comm_,
                               nullptr);
    if (o.res == dctSuccess) keep(o, inPlace ? g : out);
    return o;
  }

 private:
  Case c_;
  dctComm_t comm_;
  dctCompressor_t comp_ = nullptr;
};

// Rows rank p sends rank q (uneven, zeros allowed), the same table everywhere.
size_t rowsBetween(uint64_t seed, int p, int q) { return (seed / 7 + 3 * p + 5 * q) % 4; }

class Alltoall : public Subject {
 public:
  Alltoall(const Case& c, dctComm_t comm, int P, int me) : c_(c), P_(P), me_(me) {
    send_.resize(P);
    recv_.resize(P);
    for (int q = 0; q < P; q++) {
      send_[q] = rowsBetween(c.seed, me, q);
      recv_[q] = rowsBetween(c.seed, q, me);
      sendRows_ += send_[q];
      recvRows_ += recv_[q];
    }
    L_ = c.count > 300 ? 300 : c.count;
    Settings s;
    s.density = c.density;
    dctConfig_t cfg = explicitConfig(s);
    cfg.rowSelection = c.bits % 3 == 0 ? dctRowThreshold : dctRowTopK;
    REQUIRE(dctAlltoallPlanCreate(comm, send_.data(), recv_.data(), L_, dctFloat32, &cfg, &plan_) == dctSuccess);
  }
  ~Alltoall() override { dctAlltoallPlanDestroy(plan_); }
  Outcome call(int step, bool attacked, Adversary& adv) override {
    const bool backward = c_.entry == kAlltoallBackward;
    Outcome o;
    std::vector<float> in = gradient(sendRows_ * L_, c_.seed, me_, step), out(recvRows_ * L_, -1.0f);
    if (backward) {  // its forward, clean
      adv.arm(Attack{});
      REQUIRE(dctSparseAlltoall(plan_, in.data(), out.data(), nullptr) == dctSuccess);
      std::vector<float> g = gradient(recvRows_ * L_, c_.seed + 1, me_, step), back(sendRows_ * L_, -1.0f);
      adv.arm(attacked ? attack_ : Attack{});
      o.res = dctSparseAlltoallBackward(plan_, g.data(), back.data(), nullptr);
      mark(o, adv);
      if (o.res != dctSuccess) {  // a failed backward changes nothing: the retry runs
        adv.arm(Attack{});
        retry_ = dctSparseAlltoallBackward(plan_, g.data(), back.data(), nullptr);
      }
      return o;
    }
    adv.arm(attacked ? attack_ : Attack{});
    o.res = dctSparseAlltoall(plan_, in.data(), out.data(), nullptr);
    return o;
  }

 private:
  Case c_;
  int P_, me_;
  std::vector<size_t> send_, recv_;
  size_t sendRows_ = 0, recvRows_ = 0, L_ = 1;
  dctAlltoallPlan_t plan_ = nullptr;
};

class Des : public Subject {
 public:
  Des(const Case& c, dctComm_t comm, int P, int me) : c_(c), me_(me) {
    rows_.resize(P);
    for (int q = 0; q < P; q++) {
      rows_[q] = (c.seed / 11 + 2 * q) % 5;
      total_ += rows_[q];
    }
    L_ = c.count > 300 ? 300 : c.count;
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    const bool thin = c.entry != kDesForward;
    cfg.density = thin ? (c.density < 1 ? c.density : 0.3) : 1.0;
    cfg.rowSelection = c.bits % 3 == 0 ? dctRowThreshold : dctRowTopK;
    cfg.thresholdInterval = 1;
    REQUIRE(dctDesPlanCreate(comm, rows_.data(), L_, dctFloat32, &cfg, &plan_) == dctSuccess);
  }
  ~Des() override { dctDesPlanDestroy(plan_); }
  // Partials with whole zero rows, so that flags and counts vary.
  std::vector<float> partials(int step) const {
    std::vector<float> v = gradient(total_ * L_, c_.seed, me_, step);
    for (size_t r = 0; r < total_; r++)
      if ((r + step + me_) % 3 == 0) std::fill(v.begin() + r * L_, v.begin() + (r + 1) * L_, 0.0f);
    return v;
  }
  Outcome call(int step, bool attacked, Adversary& adv) override {
    const bool backward = c_.entry == kDesThinBackward;
    Outcome o;
    std::vector<float> in = partials(step), summed(rows_[me_] * L_, -1.0f);
    if (backward) {
      adv.arm(Attack{});
      REQUIRE(dctDesReduceScatter(plan_, in.data(), summed.data(), nullptr) == dctSuccess);
      std::vector<float> back(total_ * L_, -1.0f);
      adv.arm(attacked ? attack_ : Attack{});
      o.res = dctDesReduceScatterBackward(plan_, summed.data(), back.data(), nullptr);
      mark(o, adv);
      if (o.res != dctSuccess) {
        adv.arm(Attack{});
        retry_ = dctDesReduceScatterBackward(plan_, summed.data(), back.data(), nullptr);
      }
      return o;
    }
    adv.arm(attacked ? attack_ : Attack{});
    o.res = dctDesReduceScatter(plan_, in.data(), summed.data(), nullptr);
    mark(o, adv);
    if (o.res == dctSuccess) {  // the backward that forward set up, clean
      adv.arm(Attack{});
      std::vector<float> back(total_ * L_);
      retry_ = dctDesReduceScatterBackward(plan_, summed.data(), back.data(), nullptr);
    }
    return o;
  }

 private:
  Case c_;
  int me_;
  std::vector<size_t> rows_;
  size_t total_ = 0, L_ = 1;
  dctDesPlan_t plan_ = nullptr;
};

// Each rank's ascending indices (about density of count) and values.
void cooInput(const Case& c, int rank, int step, std::vector<uint32_t>& idx, std::vector<float>& val) {
  std::mt19937_64 rng(c.seed * 31 + rank * 101 + step);
  std::normal_distribution<float> d;
  idx.clear();
  val.clear();
  for (size_t i = 0; i < c.count; i++)
    if (std::uniform_real_distribution<double>()(rng) < c.density) {
      idx.push_back(static_cast<uint32_t>(i));
      val.push_back(d(rng));
    }
}

class SparseInput : public Subject {
 public:
  SparseInput(const Case& c, dctComm_t comm, int me) : c_(c), comm_(comm), me_(me) {}
  Outcome call(int step, bool attacked, Adversary& adv) override {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    cooInput(c_, me_, step, idx, val);
    const dctAlgorithm_t algos[] = {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense, dctAlgoAuto};
    const dctAlgorithm_t algo = algos[(c_.bits >> 8) % 4];
    const size_t n = c_.count;
    Outcome o;
    adv.arm(attacked ? attack_ : Attack{});
    if (c_.entry == kInputDense) {
      std::vector<float> dense(n, -1.0f);
      size_t nnz = 0;
      o.res = dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum, algo, dense.data(),
                                      nullptr, nullptr, 0, &nnz, nullptr, comm_, nullptr);
      if (o.res == dctSuccess) keep(o, dense);
      return o;
    }
    std::vector<uint32_t> outIdx(n, 0xdeadbeef);
    std::vector<float> outVal(n, -1.0f);
    size_t nnz = 0;
    o.res = dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum, algo, nullptr,
                                    outIdx.data(), outVal.data(), n, &nnz, nullptr, comm_, nullptr);
    keepCoo(o, outIdx, outVal, nnz);
    return o;
  }

 private:
  Case c_;
  dctComm_t comm_;
  int me_;
};

class Allgather : public Subject {
 public:
  Allgather(const Case& c, dctComm_t comm, int P, int me) : c_(c), comm_(comm), P_(P), me_(me) {}
  Outcome call(int step, bool attacked, Adversary& adv) override {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    cooInput(c_, me_, step, idx, val);
    const size_t capacity = c_.count * P_;
    std::vector<uint32_t> outIdx(capacity, 0xdeadbeef);
    std::vector<float> outVal(capacity, -1.0f);
    std::vector<size_t> counts(P_);
    size_t total = 0;
    Outcome o;
    adv.arm(attacked ? attack_ : Attack{});
    o.res = dctSparseAllgather(val.data(), idx.data(), idx.size(), c_.count, outVal.data(), outIdx.data(), capacity,
                               counts.data(), &total, dctFloat32, comm_, nullptr);
    if (o.res == dctSuccess) keep(o, counts);
    keepCoo(o, outIdx, outVal, total);
    return o;
  }

 private:
  Case c_;
  dctComm_t comm_;
  int P_, me_;
};

std::unique_ptr<Subject> subjectFor(const Case& c, dctComm_t comm, int P, int me) {
  switch (c.entry) {
    case kAlltoallForward:
    case kAlltoallBackward: return std::make_unique<Alltoall>(c, comm, P, me);
    case kDesThinForward:
    case kDesThinBackward:
    case kDesForward: return std::make_unique<Des>(c, comm, P, me);
    case kInputDense:
    case kInputCoo: return std::make_unique<SparseInput>(c, comm, me);
    case kSparseAllgather: return std::make_unique<Allgather>(c, comm, P, me);
    default: return std::make_unique<Allreduce>(c, comm);
  }
}

// The case being run, for the alarm's message.
char gRunning[300] = "";
void onAlarm(int) {
  const char head[] = "\nFUZZ HANG: ";
  (void)!write(2, head, sizeof(head) - 1);
  (void)!write(2, gRunning, strnlen(gRunning, sizeof(gRunning)));
  (void)!write(2, "\n", 1);
  _exit(3);
}

long envLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// True when every rank with `counts` set holds the same hash.
bool identicalAmong(uint64_t h, bool counts) {
  uint64_t lo = counts ? h : UINT64_MAX, hi = counts ? h : 0, min = 0, max = 0;
  MPI_Allreduce(&lo, &min, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&hi, &max, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return min == max || min > max;  // min > max: no rank counted
}

uint64_t hashOf(const std::vector<unsigned char>& b) { return fnv1a(b.data(), b.size()); }

// Runs one seeded case; false (with the reason printed) when it broke the
// contract.
bool runCase(uint64_t seed, Adversary& adv, int P, int me) {
  const Case c = caseOf(seed, P);
  std::snprintf(gRunning, sizeof(gRunning), "%s", c.describe(-1).c_str());
  alarm(120);
  std::unique_ptr<Subject> s = subjectFor(c, adv.comm(), P, me);
  // Step 0 clean: counts the call's data ops on the corrupting rank.
  Outcome clean = s->call(0, false, adv);
  REQUIRE(allTrue(clean.res == dctSuccess));
  long ops = clean.ops >= 0 ? clean.ops : adv.ops();
  MPI_Bcast(&ops, 1, MPI_LONG, c.victim, MPI_COMM_WORLD);
  Attack a;
  a.rank = c.victim;
  a.op = ops > 0 ? static_cast<long>(c.opPick % static_cast<uint64_t>(ops)) : 0;
  a.kind = c.kind;
  a.offset = c.offset;
  a.bits = c.bits;
  s->attack_ = a;
  const std::string what = c.describe(ops);
  std::snprintf(gRunning, sizeof(gRunning), "%s", what.c_str());
  const bool verbose = std::getenv("DCT_FUZZ_VERBOSE") != nullptr;
  if (verbose && me == 0) std::fprintf(stderr, "%s\n", what.c_str());  // before: a crash names its case
  Outcome hit = s->call(1, true, adv);
  char note[200];
  std::snprintf(note, sizeof(note), "%s", (hit.ops >= 0 ? hit.note : adv.fireNote()).c_str());
  MPI_Bcast(note, sizeof(note), MPI_CHAR, c.victim, MPI_COMM_WORLD);
  bool ok = true;
  std::string why;
  const bool succeeded = hit.res == dctSuccess;
  if (allTrue(succeeded) != succeeded || allTrue(!succeeded) != !succeeded) {
    ok = false;
    why = "ranks disagree on success";
  } else if (succeeded) {
    // The corrupting rank may keep what it meant to send where it reads its
    // own block locally (a split owner's dense range): its own view is the
    // faulty peer's; every other rank must hold the same bits.
    const uint64_t h = hashOf(hit.shared);
    if (!identicalAmong(h, me != c.victim)) ok = false, why = "ranks succeeded with different results";
  }
  const dctResult_t retried = s->retry_;
  if (ok && !allTrue(retried == dctSuccess)) ok = false, why = "the clean retry failed";
  // A clean call after it must work everywhere, with the same bits.
  Outcome after = s->call(2, false, adv);
  if (ok && !allTrue(after.res == dctSuccess)) ok = false, why = "the clean call after it failed";
  if (ok) {
    const uint64_t h = hashOf(after.shared);
    if (!identicalOnAllRanks(&h, sizeof(h))) ok = false, why = "the clean call after it differs across ranks";
  }
  alarm(0);
  if (!ok && me == 0)
    std::fprintf(stderr, "FUZZ FAIL %s [%s]: %s (rank 0: %s)\n", what.c_str(), note, why.c_str(),
                 dctGetErrorString(hit.res));
  if (verbose && me == 0)
    std::fprintf(stderr, "  [%s]: %s\n", note, succeeded ? "success" : dctGetLastError(adv.comm()));
  return ok;
}

}  // namespace

// Seeds that found a defect (at 2-4 ranks), run first every time: headers
// whose message sizes sent the allgather plan's decoder outside the gathered
// buffer (68, 132, 195, 619, 908, 960, 1460) or hung it on a huge
// reservation (1454); DES row and entry counts that overflowed the entry
// offsets (69, 229, 417, 1403, 1615, 1988), a memset or memcpy (283, 811),
// or left the backward unable to run after a forward that succeeded (1391);
// a sparse allgather whose own altered header sized a read past its
// caller's buffers (1322).
const uint64_t kRegressions[] = {68,  69,  132, 195,  229,  283,  417,  619,  811, 908,
                                 960, 1322, 1391, 1403, 1454, 1460, 1615, 1988};

namespace {
bool isRegression(uint64_t seed) {
  for (uint64_t r : kRegressions)
    if (r == seed) return true;
  return false;
}
}  // namespace

TEST_CASE("an adversarial peer makes every rank fail, or changes every rank's result alike") {
  int P = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::signal(SIGALRM, onAlarm);
  Adversary adv;
  const long cases = envLong("DCT_FUZZ_CASES", 2000);
  const uint64_t first = static_cast<uint64_t>(envLong("DCT_FUZZ_SEED", 1));
  std::vector<uint64_t> seeds(std::begin(kRegressions), std::end(kRegressions));
  for (long i = 0; i < cases; i++) seeds.push_back(first + static_cast<uint64_t>(i));
  int failures = 0;
  for (uint64_t seed : seeds) {
    CAPTURE(seed);
    const bool ok = runCase(seed, adv, P, me);
    CHECK(ok);
    failures += ok ? 0 : 1;
  }
  if (me == 0) std::fprintf(stderr, "adversarial peer: %zu cases, %d broke the contract\n", seeds.size(), failures);
}
