// dctDesReduceScatter / dctDesReduceScatterBackward under mpirun against a
// plain dense reduce-scatter: every rank rebuilds every rank's seeded
// partials, checks the gathered sums bit for bit (all 4 datatypes, uneven
// and empty splits, zero / -0 / NaN / Inf rows), the backward's routes,
// the traffic statistics, and bad input failing every rank with nothing
// written. Thinned plans (density < 1) against the same reference built
// from each rank's partials cut to their per-row top-K (or tau) entries.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../common/row_reference.h"
#include "des_util.h"
#include "mpi_util.h"
#include "../common/same_bytes.h"

using namespace dcttest;
using namespace dcttest::des;

namespace {

// Uneven splits; `withEmpty` gives every even rank no rows.
std::vector<size_t> splitOf(int P, bool withEmpty) {
  std::vector<size_t> rows(P);
  for (int q = 0; q < P; q++) rows[q] = withEmpty && q % 2 == 0 ? 0 : static_cast<size_t>((q * 5 + 3) % 7) + 1;
  return rows;
}

std::vector<size_t> startsOf(const std::vector<size_t>& rows) {
  std::vector<size_t> start(rows.size() + 1, 0);
  for (size_t q = 0; q < rows.size(); q++) start[q + 1] = start[q] + rows[q];
  return start;
}

// Every rank's bytes, in rank order.
std::vector<char> gathered(const void* mine, size_t bytes) {
  int P = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  int b = static_cast<int>(bytes);
  std::vector<int> counts(P), displs(P);
  MPI_Allgather(&b, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int q = 0; q < P; q++) displs[q] = total, total += counts[q];
  std::vector<char> all(total);
  MPI_Allgatherv(mine, b, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
  return all;
}

template <typename V>
void* ptr(V& v) { return v.empty() ? nullptr : static_cast<void*>(v.data()); }

template <dctDataType_t DT>
void checkSteps(size_t d, bool withEmpty, double zeros) {
  using S = typename Ty<DT>::S;
  World w;
  CAPTURE(DT);
  CAPTURE(d);
  CAPTURE(withEmpty);
  CAPTURE(zeros);
  const auto rows = splitOf(w.size, withEmpty), start = startsOf(rows);
  const size_t N = start[w.size], mine = rows[w.rank];
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, DT, nullptr, &plan) == dctSuccess);
  for (uint64_t step = 0; step < 2; step++) {
    const uint64_t seed = 17 + step * 5 + d;
    auto in = partials<DT>(w.rank, N, d, seed, zeros);
    std::vector<S> summed(mine * d, S(7));
    REQUIRE(dctDesReduceScatter(plan, ptr(in), ptr(summed), nullptr) == dctSuccess);
    // Every owner's sums, gathered, against the reference over all rows.
    const auto all = gathered(ptr(summed), summed.size() * sizeof(S));
    const auto expected = referenceSums<DT>(w.size, 0, N, d, seed, zeros);
    REQUIRE(all.size() == expected.size() * sizeof(S));
    CHECK(sameBytes(all.data(), expected.data(), all.size()));
    CHECK(identicalOnAllRanks(all.data(), all.size()));

    auto grad = gradRows<DT>(start[w.rank], start[w.rank + 1], d, seed);
    std::vector<S> back(N * d, S(9));
    REQUIRE(dctDesReduceScatterBackward(plan, ptr(grad), ptr(back), nullptr) == dctSuccess);
    const auto everyGrad = gradRows<DT>(0, N, d, seed);
    std::vector<S> want(N * d, S(0));
    for (size_t g = 0; g < N; g++)
      if (!zeroRow(in.data() + g * d, d)) std::memcpy(&want[g * d], &everyGrad[g * d], d * sizeof(S));
    CHECK(sameBytes(back.data(), want.data(), want.size() * sizeof(S)));
  }
  dctDesPlanDestroy(plan);
}

// DCT-MP's K for a density (kernel-independent: 0.25 * 33 is 8.25 -> 9).
size_t keepOf(double density, size_t d) {
  const double want = std::ceil(density * static_cast<double>(d) - 1e-9);
  return std::min(d, std::max<size_t>(1, static_cast<size_t>(want)));
}

// The mask format DCT-MP picks for K of d: -1 whole rows, 0 bitmap, else
// the index width, whichever of bitmap and index list is smaller.
int formatOf(size_t k, size_t d) {
  if (k >= d) return -1;
  const int width = d <= 256 ? 1 : d <= 65536 ? 2 : 4;
  return (d + 7) / 8 < k * width ? 0 : width;
}

dctConfig_t thinConfig(double density, dctRowSelection_t selection) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = density;
  cfg.rowSelection = selection;
  cfg.thresholdInterval = 2;  // estimated in the first step, reused in the second
  cfg.thresholdMethod = dctThresholdExact;
  cfg.seed = 0;
  return cfg;
}

// Which entries of a non-zero partial row travel: the plain references of
// the DCT-MP selection, on the row widened to its accumulation type (a
// monotone, exact map, so the ranking and the tau test are the kernels').
template <dctDataType_t DT>
std::vector<bool> keptOf(const typename Ty<DT>::S* row, size_t d, size_t k, dctRowSelection_t selection,
                         double tau) {
  std::vector<typename Ty<DT>::Acc> wide(d);
  for (size_t j = 0; j < d; j++) wide[j] = Ty<DT>::load(row[j]);
  return selection == dctRowTopK ? dct::test::referenceTopK(wide.data(), d, k)
                                 : dct::test::referenceThreshold(wide.data(), d, tau);
}

template <dctDataType_t DT>
void checkThinned(size_t d, double density, dctRowSelection_t selection, bool withEmpty) {
  using S = typename Ty<DT>::S;
  using Acc = typename Ty<DT>::Acc;
  World w;
  CAPTURE(DT);
  CAPTURE(d);
  CAPTURE(density);
  CAPTURE(selection);
  CAPTURE(withEmpty);
  const double zeros = 0.5;
  const size_t k = keepOf(density, d);
  const auto rows = splitOf(w.size, withEmpty), start = startsOf(rows);
  const size_t N = start[w.size], mine = rows[w.rank];
  auto ownerOf = [&](size_t g) {
    int q = 0;
    while (g >= start[q + 1]) q++;
    return q;
  };
  const dctConfig_t cfg = thinConfig(density, selection);
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, DT, &cfg, &plan) == dctSuccess);
  for (uint64_t step = 0; step < 2; step++) {
    const uint64_t seed = 91 + step * 7 + d;
    auto in = partials<DT>(w.rank, N, d, seed, zeros);
    std::vector<S> summed(mine * d, S(7));
    REQUIRE(dctDesReduceScatter(plan, ptr(in), ptr(summed), nullptr) == dctSuccess);
    dctAlltoallStats_t st;
    REQUIRE(dctDesPlanGetStats(plan, &st) == dctSuccess);
    CHECK(st.maskFormat == formatOf(k, d));
    if (selection == dctRowTopK) CHECK(st.threshold == 0);
    std::vector<double> taus(w.size);
    MPI_Allgather(&st.threshold, 1, MPI_DOUBLE, taus.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);

    // Reference: every rank's row, thinned unless the owner's own, summed in
    // rank order from +0 in the accumulation type.
    std::vector<S> expected;
    uint64_t kept = 0;
    for (size_t g = 0; g < N; g++) {
      const int owner = ownerOf(g);
      std::vector<Acc> acc(d, Acc(0));
      for (int p = 0; p < w.size; p++) {
        auto row = partialRow<DT>(p, g, d, seed, zeros);
        if (p != owner && !zeroRow(row.data(), d)) {
          const auto keep = keptOf<DT>(row.data(), d, k, selection, taus[p]);
          row = dct::test::maskedRow(row.data(), keep);
          if (p == w.rank) kept += std::count(keep.begin(), keep.end(), true);
        }
        for (size_t j = 0; j < d; j++) acc[j] = acc[j] + Ty<DT>::load(row[j]);
      }
      for (size_t j = 0; j < d; j++) expected.push_back(Ty<DT>::store(acc[j]));
    }
    const auto all = gathered(ptr(summed), summed.size() * sizeof(S));
    REQUIRE(all.size() == expected.size() * sizeof(S));
    CHECK(sameBytes(all.data(), expected.data(), all.size()));
    CHECK(st.keptEntries == kept);

    // Backward: own non-zero rows whole, the others at their kept entries.
    auto grad = gradRows<DT>(start[w.rank], start[w.rank + 1], d, seed);
    std::vector<S> back(N * d, S(9));
    REQUIRE(dctDesReduceScatterBackward(plan, ptr(grad), ptr(back), nullptr) == dctSuccess);
    const auto everyGrad = gradRows<DT>(0, N, d, seed);
    std::vector<S> want(N * d, S(0));
    for (size_t g = 0; g < N; g++) {
      const S* row = in.data() + g * d;
      if (zeroRow(row, d)) continue;
      const auto keep = ownerOf(g) == w.rank ? std::vector<bool>(d, true)
                                             : keptOf<DT>(row, d, k, selection, taus[w.rank]);
      for (size_t j = 0; j < d; j++)
        if (keep[j]) want[g * d + j] = everyGrad[g * d + j];
    }
    CHECK(sameBytes(back.data(), want.data(), want.size() * sizeof(S)));
  }
  dctDesPlanDestroy(plan);
}

template <dctDataType_t DT>
void checkThinnedType() {
  for (size_t d : {3, 33, 300})
    for (double density : {0.05, 0.25})
      for (dctRowSelection_t selection : {dctRowTopK, dctRowThreshold})
        for (bool withEmpty : {false, true}) checkThinned<DT>(d, density, selection, withEmpty);
}

template <dctDataType_t DT>
void checkType() {
  for (size_t d : {1, 3, 7, 33})
    for (bool withEmpty : {false, true})
      for (double zeros : {0.0, 0.6, 1.0}) checkSteps<DT>(d, withEmpty, zeros);
}

}  // namespace

TEST_CASE("the forward is the dense reduce-scatter bit for bit, the backward follows the row flags") {
  checkType<dctFloat32>();
  checkType<dctFloat64>();
  checkType<dctFloat16>();
  checkType<dctBFloat16>();
}

TEST_CASE("density < 1 thins the rows sent to peers to their top-K or tau entries, both ways") {
  checkThinnedType<dctFloat32>();
  checkThinnedType<dctFloat64>();
  checkThinnedType<dctFloat16>();
  checkThinnedType<dctBFloat16>();
}

TEST_CASE("thinned rows: statistics, kept entries only on the wire, bytes below the exact path") {
  World w;
  const size_t d = 64;
  const double zeros = 0.5, density = 0.1;
  const size_t k = keepOf(density, d);  // 7: one-byte indices beat the 8-byte bitmap
  const auto rows = splitOf(w.size, false), start = startsOf(rows);
  const size_t N = start[w.size], mine = rows[w.rank];
  const auto in = partials<dctFloat32>(w.rank, N, d, 4, zeros);
  std::vector<float> summed(mine * d), grad(mine * d, 1.0f), back(N * d);
  auto run = [&](const dctConfig_t* cfg) {
    dctDesPlan_t plan = nullptr;
    REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, cfg, &plan) == dctSuccess);
    REQUIRE(dctDesReduceScatter(plan, in.data(), summed.data(), nullptr) == dctSuccess);
    REQUIRE(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
    dctAlltoallStats_t st;
    REQUIRE(dctDesPlanGetStats(plan, &st) == dctSuccess);
    dctDesPlanDestroy(plan);
    return st;
  };
  const dctAlltoallStats_t exact = run(nullptr);
  const dctConfig_t cfg = thinConfig(density, dctRowTopK);
  const dctAlltoallStats_t st = run(&cfg);
  uint64_t flagged = 0, nonFinite = 0, valueBytes = 0;  // values back, each owner's block padded to 8
  for (int q = 0; q < w.size; q++) {
    if (q == w.rank) continue;
    uint64_t rowsToQ = 0;
    for (size_t g = start[q]; g < start[q + 1]; g++) {
      if (zeroRow(in.data() + g * d, d)) continue;
      rowsToQ++;
      for (size_t j = 0; j < d; j++) nonFinite += !std::isfinite(in[g * d + j]);
    }
    flagged += rowsToQ;
    valueBytes += (rowsToQ * k * 4 + 7) / 8 * 8;
  }
  CHECK(st.maskFormat == 1);
  CHECK(st.keptEntries == flagged * k);  // at most one NaN/Inf per row: exactly K each
  CHECK(st.nonFinite == nonFinite);
  if (N > mine) CHECK(st.density == doctest::Approx(double(flagged * k) / double((N - mine) * d)));
  CHECK(st.threshold == 0);
  CHECK(st.denseBytesSent == exact.denseBytesSent);
  CHECK(st.backwardBytesReceived == valueBytes);  // values only, at the kept entries
  CHECK(st.forwardBytesSent >= flagged * k * 5);        // an index byte and a value per entry
  if (flagged > 0) CHECK(st.forwardBytesSent < exact.forwardBytesSent);
  CHECK(st.backwardBytesSent <= exact.backwardBytesSent);
  uint64_t mineBytes[4] = {st.forwardBytesSent, st.forwardBytesReceived, st.backwardBytesSent,
                           st.backwardBytesReceived},
           sums[4];
  MPI_Allreduce(mineBytes, sums, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sums[0] == sums[1]);
  CHECK(sums[2] == sums[3]);
  // Threshold selection reports the tau it used.
  const dctConfig_t byTau = thinConfig(density, dctRowThreshold);
  const dctAlltoallStats_t tau = run(&byTau);
  CHECK((flagged > 0) == (tau.threshold > 0));
  CHECK(tau.maskFormat == 1);
}

TEST_CASE("only non-zero rows travel: statistics and bytes below dense") {
  World w;
  const size_t d = 16;
  const double zeros = 0.9;
  const auto rows = splitOf(w.size, false), start = startsOf(rows);
  const size_t N = start[w.size], mine = rows[w.rank];
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, nullptr, &plan) == dctSuccess);
  auto in = partials<dctFloat32>(w.rank, N, d, 3, zeros);
  std::vector<float> summed(mine * d), grad(mine * d, 1.0f), back(N * d);
  REQUIRE(dctDesReduceScatter(plan, in.data(), summed.data(), nullptr) == dctSuccess);
  REQUIRE(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
  dctAlltoallStats_t st;
  REQUIRE(dctDesPlanGetStats(plan, &st) == dctSuccess);
  uint64_t kept = 0, nonFinite = 0;
  for (size_t g = 0; g < N; g++) {
    if (g >= start[w.rank] && g < start[w.rank + 1]) continue;  // own rows stay here
    if (zeroRow(in.data() + g * d, d)) continue;
    kept += d;
    for (size_t j = 0; j < d; j++) nonFinite += !std::isfinite(in[g * d + j]);
  }
  CHECK(st.forwardSteps == 1);
  CHECK(st.backwardSteps == 1);
  CHECK(st.keptEntries == kept);
  CHECK(st.nonFinite == nonFinite);
  CHECK(st.maskFormat == -1);
  CHECK(st.denseBytesSent == (N - mine) * d * 4);
  CHECK(st.denseBytesReceived == (w.size - 1) * mine * d * 4);
  // Values of the kept rows plus at most a padded bitmap per peer.
  CHECK(st.forwardBytesSent >= kept * 4);
  CHECK(st.forwardBytesSent <= kept * 4 + (w.size - 1) * (8 + N / 8 + 8));
  CHECK(st.backwardBytesReceived == kept * 4);  // values only, on the forward's rows
  // What leaves every rank arrives at some rank, both ways.
  uint64_t mineBytes[4] = {st.forwardBytesSent, st.forwardBytesReceived, st.backwardBytesSent,
                           st.backwardBytesReceived},
           sums[4];
  MPI_Allreduce(mineBytes, sums, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sums[0] == sums[1]);
  CHECK(sums[2] == sums[3]);
  CHECK(sums[1] == sums[2] + [&] {  // forward = backward + the bitmaps
    uint64_t bitmaps = 0;
    for (int p = 0; p < w.size; p++)
      for (int q = 0; q < w.size; q++) {
        if (p == q) continue;
        bool any = false;
        for (size_t g = start[q]; g < start[q + 1] && !any; g++)
          any = !zeroRow(partialRow<dctFloat32>(p, g, d, 3, zeros).data(), d);
        bitmaps += any ? 8 * ((rows[q] + 63) / 64) : 0;
      }
    return bitmaps;
  }());
  if (w.size > 1) CHECK(st.forwardBytesSent < st.denseBytesSent);
  CHECK(st.totalBytesSent == st.forwardBytesSent + st.backwardBytesSent);
  CHECK(st.totalDenseBytes == st.denseBytesSent + st.denseBytesReceived);
  dctDesPlanDestroy(plan);
}

TEST_CASE("bad input fails on every rank with nothing written") {
  World w;
  const size_t d = 5;
  const auto rows = splitOf(w.size, false), start = startsOf(rows);
  const size_t N = start[w.size], mine = rows[w.rank];
  const bool many = w.size > 1;
  dctDesPlan_t plan = nullptr;
  CHECK(dctDesReduceScatter(nullptr, nullptr, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctDesReduceScatterBackward(nullptr, nullptr, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctDesPlanGetStats(nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctDesPlanCreate(w.comm, rows.data(), 0, dctFloat32, nullptr, &plan) == dctInvalidArgument);
  CHECK(plan == nullptr);
  CHECK(dctDesPlanCreate(w.comm, rows.data(), d, static_cast<dctDataType_t>(9), nullptr, &plan) ==
        dctInvalidArgument);
  // One rank alone wrong: it rejects its arguments, the others fail too.
  dctResult_t res = dctDesPlanCreate(w.comm, w.rank == 0 ? nullptr : rows.data(), d, dctFloat32, nullptr, &plan);
  CHECK(res == (w.rank == 0 ? dctInvalidArgument : dctInvalidUsage));
  res = dctDesPlanCreate(w.comm, rows.data(), w.rank == 0 && many ? d + 1 : d, dctFloat32, nullptr, &plan);
  CHECK(res == (many ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctDesPlanDestroy(plan);
  res = dctDesPlanCreate(w.comm, rows.data(), d, w.rank == 0 && many ? dctFloat64 : dctFloat32, nullptr, &plan);
  CHECK(res == (many ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctDesPlanDestroy(plan);
  std::vector<size_t> wrong = rows;
  if (w.rank == w.size - 1) wrong[0] += 1;
  CHECK(dctDesPlanCreate(w.comm, wrong.data(), d, dctFloat32, nullptr, &plan) == (many ? dctInvalidUsage : dctSuccess));
  if (!many) dctDesPlanDestroy(plan);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  // Thinning one rank alone, or selecting rows differently: every rank fails.
  cfg.density = 0.5;
  res = dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, w.rank == 0 ? &cfg : nullptr, &plan);
  CHECK(res == (many ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctDesPlanDestroy(plan);
  if (many) CHECK(std::string(dctGetLastError(w.comm)).find("density") != std::string::npos);
  cfg.rowSelection = w.rank == 0 ? dctRowThreshold : dctRowTopK;
  res = dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, &cfg, &plan);
  CHECK(res == (many ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctDesPlanDestroy(plan);
  if (many) CHECK(std::string(dctGetLastError(w.comm)).find("rowSelection") != std::string::npos);
  cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = 0;
  CHECK(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, &cfg, &plan) == dctInvalidArgument);
  dctConfig_t junk{};
  CHECK(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, &junk, &plan) == dctInvalidArgument);

  cfg.density = 1.0;
  REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, &cfg, &plan) == dctSuccess);
  const auto in = partials<dctFloat32>(w.rank, N, d, 5, 0.5);
  std::vector<float> summed(mine * d + 1, 7.0f), grad(mine * d, 2.0f), back(N * d, 9.0f);
  const std::vector<float> summedBefore = summed, backBefore = back;
  CHECK(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  CHECK(std::string(dctGetLastError(w.comm)).find("dctDesReduceScatterBackward") != std::string::npos);
  // One rank passes a NULL or misaligned buffer: every rank fails.
  res = dctDesReduceScatter(plan, w.rank == 0 ? nullptr : in.data(), summed.data(), nullptr);
  CHECK(res == (w.rank == 0 ? dctInvalidArgument : dctInvalidUsage));
  void* misaligned = reinterpret_cast<char*>(summed.data()) + (w.rank == w.size - 1 ? 1 : 0);
  res = dctDesReduceScatter(plan, in.data(), misaligned, nullptr);
  CHECK(res == (w.rank == w.size - 1 ? dctInvalidArgument : dctInvalidUsage));
  CHECK(dctDesReduceScatter(plan, in.data(), const_cast<float*>(in.data()), nullptr) == dctInvalidArgument);
  CHECK(summed == summedBefore);
  CHECK(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  CHECK(back == backBefore);
  // Plans that differ across ranks in one call.
  dctDesPlan_t other = nullptr;
  REQUIRE(dctDesPlanCreate(w.comm, rows.data(), d, dctFloat32, nullptr, &other) == dctSuccess);
  res = dctDesReduceScatter(w.rank == 0 ? other : plan, in.data(), summed.data(), nullptr);
  CHECK(res == (many ? dctInvalidUsage : dctSuccess));
  if (!many) CHECK(dctDesReduceScatterBackward(other, grad.data(), back.data(), nullptr) == dctSuccess);
  dctDesPlanDestroy(other);
  // After all that, a forward and one backward work; a second backward does not.
  REQUIRE(dctDesReduceScatter(plan, in.data(), summed.data(), nullptr) == dctSuccess);
  REQUIRE(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
  CHECK(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  dctAlltoallStats_t st;
  REQUIRE(dctDesPlanGetStats(plan, &st) == dctSuccess);
  CHECK(st.forwardSteps == 1);
  CHECK(st.backwardSteps == 1);
  CHECK(dctDesPlanDestroy(plan) == dctSuccess);
  CHECK(dctDesPlanDestroy(nullptr) == dctSuccess);
}
