// The cost model: sparse wins when sparse, dense wins when dense, and the
// switch point sits near the byte break-even.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/cost_model.h"
#include "core/owner_target.h"

using namespace dct;

namespace {

// The model's parameters under this process's DCT_* cost variables (a comm
// reads them once, at creation; these tests set them per case).
CostParams envParams(const LinkTiming& measured = {}, int ranks = 0) {
  return costParams(costOverridesFromEnv(), measured, ranks);
}
CostParams sparseEnvParams(const CostParams& fitted, bool covered, int ranks) {
  return sparseCostParams(costOverridesFromEnv(), fitted, covered, ranks);
}
const CostParams kSlowLink{5.0, 0.125, 2.0, 4.0};

dctAlgorithm_t choose(int ranks, size_t count, double density, const CostParams& p = kSlowLink) {
  std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count));
  CostInputs in{ranks, count, 4, 4, nnz.data()};
  return chooseAlgorithm(p, in);
}

// Whether allgather costs less than dense (the two-way break-even).
bool allgatherBeatsDense(int ranks, size_t count, double density) {
  std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count));
  CostInputs in{ranks, count, 4, 4, nnz.data()};
  return allgatherCostUs(kSlowLink, in) < denseCostUs(kSlowLink, in);
}
}  // namespace

TEST_CASE("allgather at low density, dense at high density") {
  for (int p : {2, 3, 4, 8}) {
    CAPTURE(p);
    CHECK(choose(p, 1 << 24, 0.001) == dctAlgoAllgather);
    CHECK(choose(p, 1 << 24, 0.01) == dctAlgoAllgather);
    CHECK(choose(p, 1 << 24, 0.9) == dctAlgoDense);
    CHECK(choose(p, 1 << 24, 1.0) == dctAlgoDense);
  }
}

TEST_CASE("costs grow with the bytes they move") {
  std::vector<uint64_t> small(4, 1000), large(4, 100000);
  CostParams p{5.0, 0.125, 2.0, 4.0};
  CostInputs a{4, 1 << 20, 4, 4, small.data()}, b{4, 1 << 20, 4, 4, large.data()};
  CHECK(allgatherCostUs(p, a) < allgatherCostUs(p, b));
  CHECK(denseCostUs(p, a) == denseCostUs(p, b));
  CostInputs c{4, 1 << 22, 4, 4, small.data()};
  CHECK(denseCostUs(p, a) < denseCostUs(p, c));
}

TEST_CASE("packed indices move the break-even up") {
  // Four ranks: ~4.5 bytes per packed entry break even with the ring's
  // 2(P-1)/P * 4 bytes per element near density 0.3, not 8-byte COO's 0.2.
  CHECK(allgatherBeatsDense(4, 1 << 24, 0.2));
  CHECK(!allgatherBeatsDense(4, 1 << 24, 0.45));
}

TEST_CASE("one rank never pays for a dense exchange") {
  std::vector<uint64_t> nnz(1, 1 << 20);
  CostInputs in{1, 1 << 20, 4, 4, nnz.data()};
  CHECK(chooseAlgorithm(envParams(), in) == dctAlgoAllgather);
}

TEST_CASE("the union estimate: disjoint at low density, saturating at high") {
  std::vector<uint64_t> nnz(4, 1000);
  CostInputs in{4, 1 << 20, 4, 4, nnz.data()};
  CHECK(unionEstimate(in) == doctest::Approx(4000).epsilon(0.01));  // ~ the sum when sparse
  std::vector<uint64_t> half(4, 1 << 19);
  CostInputs dense{4, 1 << 20, 4, 4, half.data()};
  CHECK(unionEstimate(dense) == doctest::Approx((1 << 20) * (1 - 1.0 / 16)));  // 1 - (1/2)^4
  std::vector<uint64_t> all(4, 1 << 20);
  CostInputs full{4, 1 << 20, 4, 4, all.data()};
  CHECK(unionEstimate(full) == 1 << 20);
}

TEST_CASE("split: cheaper than allgather once the selections overlap, cheaper than dense below saturation") {
  const CostParams p{5.0, 1.25, 2.0, 4.0};  // the defaults
  // 64 ranks at 1% of 16M: allgather moves 63 messages to every rank, split
  // ~(1 + union/k) of one; the union is ~half the tensor, still sparse.
  CHECK(choose(64, 1 << 24, 0.01, p) == dctAlgoSplit);
  // Few ranks, very sparse: the union is the sum, split only adds its phase 1.
  CHECK(choose(4, 1 << 24, 0.0001, p) == dctAlgoAllgather);
  // Everything selected everywhere: dense ranges plus the pieces, more than dense.
  CHECK(choose(8, 1 << 24, 1.0, p) == dctAlgoDense);
}

TEST_CASE("split's cost follows its bytes") {
  const CostParams p{5.0, 1.25, 2.0, 4.0};
  std::vector<uint64_t> sparse(16, 1000), overlapping(16, 1 << 20);
  CostInputs a{16, 1 << 24, 4, 4, sparse.data()}, b{16, 1 << 24, 4, 4, overlapping.data()};
  CHECK(splitCostUs(p, a) < splitCostUs(p, b));
  // Once the ranges travel dense, more entries per rank only grow phase 1.
  std::vector<uint64_t> saturated(16, 1 << 23), full(16, 1 << 24);
  CostInputs c{16, 1 << 24, 4, 4, saturated.data()}, d{16, 1 << 24, 4, 4, full.data()};
  const double phase2 = 15.0 / 16 * (1 << 24) * 4 / 1.25e3;  // dense ranges on the wire, us
  CHECK(splitCostUs(p, c) > phase2);
  CHECK(splitCostUs(p, d) > splitCostUs(p, c));
  // A wider reduced type (fp32 sums of fp16 values) costs more in phase 2.
  CostInputs wide = b;
  wide.valueBytes = 2;
  wide.sumBytes = 4;
  CostInputs narrow = b;
  narrow.valueBytes = 2;
  CHECK(splitCostUs(p, wide) > splitCostUs(p, narrow));
}

// The link probe's two timings (link_probe.h) fitted to the dense model.
TEST_CASE("a measured link: the dense model reproduces both probe times, env knobs still win") {
  for (int ranks : {2, 3, 4, 64}) {
    CAPTURE(ranks);
    LinkTiming probe;
    probe.smallBytes = 1024;
    probe.largeBytes = 1 << 20;
    probe.smallUs = 30.0;
    probe.largeUs = 2000.0;
    const CostParams p = envParams(probe, ranks);
    std::vector<uint64_t> nnz(ranks, 0);
    CostInputs small{ranks, probe.smallBytes / 4, 4, 4, nnz.data()}, large{ranks, probe.largeBytes / 4, 4, 4, nnz.data()};
    CHECK(denseCostUs(p, small) == doctest::Approx(probe.smallUs));
    CHECK(denseCostUs(p, large) == doctest::Approx(probe.largeUs));
    CHECK(p.alphaUs < probe.smallUs / (2 * (ranks - 1)));  // the small size's bytes take their part
  }
  LinkTiming fast;  // a reduction faster than modelled: the link stays finite
  fast.smallBytes = 1024;
  fast.largeBytes = 1 << 20;
  fast.smallUs = 1.0;
  fast.largeUs = 100.0;
  const CostParams p = envParams(fast, 2);
  CHECK(p.linkGBps == doctest::Approx((fast.largeBytes - fast.smallBytes) / (0.25 * 99.0) * 1e-3));
  CHECK(p.alphaUs > 0);
  // Unmeasured, or one rank: the defaults.
  CHECK(envParams(LinkTiming{}, 4).linkGBps == 1.25);
  CHECK(envParams(fast, 1).alphaUs == 5.0);
  // A set knob overrides the measurement.
  setenv("DCT_LINK_GBPS", "0.125", 1);
  setenv("DCT_ALPHA_US", "40", 1);
  const CostParams forced = envParams(fast, 2);
  unsetenv("DCT_LINK_GBPS");
  unsetenv("DCT_ALPHA_US");
  CHECK(forced.linkGBps == 0.125);
  CHECK(forced.alphaUs == 40.0);
}

TEST_CASE("the compressor's pass costs every sparse step the tensor's bytes at the select rate, whatever the density") {
  std::vector<uint64_t> few(4, 10), many(4, 100000);
  CostParams p{5.0, 1.25, 2.0, 4.0};
  CHECK(p.selectGBps == 8.0);
  CostInputs a{4, 1 << 20, 4, 4, few.data()}, b{4, 1 << 20, 4, 4, many.data()};
  CHECK(compressPassUs(p, a) == doctest::Approx((1 << 20) * 4 / 8e3));
  CHECK(compressPassUs(p, a) == compressPassUs(p, b));
  CostInputs half{4, 1 << 20, 2, 4, few.data(), 4};  // half on the wire, fp32 residual
  CHECK(compressPassUs(p, half) == compressPassUs(p, a));
  setenv("DCT_SELECT_GBPS", "2.5", 1);
  CHECK(envParams().selectGBps == 2.5);
  unsetenv("DCT_SELECT_GBPS");
}

TEST_CASE("pipeline chunks: the compressor's pass counts; a slower pass asks for more, dearer latencies for fewer") {
  const size_t n = size_t(1) << 24;  // 64 MiB fp32 at 1%, 4 ranks, on the defaults
  std::vector<uint64_t> nnz(4, n / 100);
  CostInputs in{4, n, 4, 4, nnz.data(), 4};
  CostParams p{5.0, 1.25, 2.0, 4.0};
  const double chunks = pipelineChunks(p, in);
  CHECK(chunks == doctest::Approx(std::sqrt((compressPassUs(p, in) + allgatherCostUs(p, in)) / (4 * 5.0))));
  CHECK(chunks > 1.5 * std::sqrt(allgatherCostUs(p, in) / (4 * 5.0)));  // the pass is most of the step here
  // 20-30 chunks: 0.56-0.84M elements each, where the 1 Gbit/s row ran fastest
  // (bench/results/2026-11-30-issue51-final)
  CHECK(chunks > 20);
  CHECK(chunks < 30);
  CostParams slowPass = p, fastPass = p;
  slowPass.selectGBps = 2;
  fastPass.selectGBps = 80;
  CHECK(pipelineChunks(slowPass, in) > chunks);
  CHECK(pipelineChunks(fastPass, in) < chunks);
  CostParams costlyLatency = p;
  costlyLatency.alphaUs = 50;
  CHECK(pipelineChunks(costlyLatency, in) < chunks);
}

TEST_CASE("auto chunk sizes: whole multiples of 4096, at least 2^18, at most 64 chunks, near count / chunks") {
  CostParams p{5.0, 1.25, 2.0, 4.0};
  for (size_t n : {size_t(1000003), size_t(4194301), size_t(16777213), size_t(1) << 24, size_t(268435459)})
    for (int ranks : {2, 3, 4, 8}) {
      CAPTURE(n);
      CAPTURE(ranks);
      std::vector<uint64_t> nnz(ranks, n / 100);
      CostInputs in{ranks, n, 4, 4, nnz.data(), 4};
      const size_t elems = autoChunkElems(p, in);
      CHECK(elems % 4096 == 0);
      CHECK(elems >= (size_t(1) << 18));
      CHECK((n + elems - 1) / elems <= 64);
      const double chunks = std::min(pipelineChunks(p, in), 64.0);
      if (static_cast<double>(n) / chunks > (1 << 18))
        CHECK(static_cast<double>(elems) == doctest::Approx(static_cast<double>(n) / chunks).epsilon(0.02));
    }
}

// Past the probe's sizes: the defaults, the link never faster than the fit.
TEST_CASE("sparse plans' parameters: the fit where the probe reached, else defaults capped by the fitted link") {
  LinkTiming slow;  // 4 ranks on 1 Gbit/s links (probe measured 203 us and 13.05 ms)
  slow.smallBytes = 1024;
  slow.largeBytes = 1 << 20;
  slow.smallUs = 203.0;
  slow.largeUs = 13051.0;
  const CostParams fit = envParams(slow, 4), defaults = envParams(LinkTiming{}, 4);
  REQUIRE(fit.linkGBps < defaults.linkGBps);
  const CostParams within = sparseEnvParams(fit, slow.covers(slow.largeBytes), 4);
  CHECK(within.linkGBps == fit.linkGBps);
  CHECK(within.alphaUs == fit.alphaUs);
  const CostParams beyond = sparseEnvParams(fit, slow.covers(16 << 20), 4);
  CHECK(beyond.linkGBps == fit.linkGBps);   // the slower link
  CHECK(beyond.alphaUs == defaults.alphaUs);
  LinkTiming fast = slow;  // shared memory: the fit is faster than the default link
  fast.smallUs = 3.0;
  fast.largeUs = 100.0;
  REQUIRE(envParams(fast, 4).linkGBps > defaults.linkGBps);
  CHECK(sparseEnvParams(envParams(fast, 4), fast.covers(16 << 20), 4).linkGBps == defaults.linkGBps);
  CHECK(sparseEnvParams(defaults, LinkTiming{}.covers(16 << 20), 4).linkGBps == defaults.linkGBps);
  setenv("DCT_LINK_GBPS", "5", 1);  // a set knob still wins
  const CostParams forced = sparseEnvParams(envParams(slow, 4), slow.covers(16 << 20), 4);
  unsetenv("DCT_LINK_GBPS");
  CHECK(forced.linkGBps == 5.0);
}

// Two ranks: split sends each rank's piece for the other's range (half its
// message) and then the reduced range (half the union, at least half the
// larger message), so its wire never undercuts allgather's (the larger
// message), and dense beats both once the union is dense; its local work
// and control only add. Auto therefore leaves it out at two ranks.
TEST_CASE("at two ranks split never beats the cheaper of allgather and dense") {
  const CostParams fastLink{5.0, 1.25, 2.0, 4.0}, probed{34.0, 0.129, 2.0, 4.0};  // probed: 1 Gbit/s
  for (const CostParams& p : {fastLink, kSlowLink, probed})
    for (size_t count : {size_t(1) << 14, size_t(1) << 20, size_t(1) << 26})
      for (double d0 : {0.0001, 0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0})
        for (double ratio : {0.1, 0.5, 1.0}) {
          CAPTURE(count);
          CAPTURE(d0);
          CAPTURE(ratio);
          std::vector<uint64_t> nnz{static_cast<uint64_t>(d0 * count), static_cast<uint64_t>(d0 * ratio * count)};
          for (size_t valueBytes : {size_t(2), size_t(4)}) {
            CostInputs in{2, count, valueBytes, 4, nnz.data(), 4};
            CHECK(splitCostUs(p, in) >= std::min(allgatherCostUs(p, in), denseCostUs(p, in)));
          }
        }
}

namespace {
struct Costs {
  double us, wire;
};
Costs globalTopk(const CostParams& p, int ranks, size_t count, double density) {
  std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count));
  CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
  Costs c{};
  c.us = globalTopkCostUs(p, in, &c.wire);
  return c;
}
Costs split(const CostParams& p, int ranks, size_t count, double density) {
  std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count));
  CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
  Costs c{};
  c.us = splitCostUs(p, in, &c.wire);
  return c;
}
double dense(const CostParams& p, int ranks, size_t count) {
  std::vector<uint64_t> nnz(ranks, 0);
  CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
  return denseCostUs(p, in);
}
}  // namespace

TEST_CASE("global top-k: its bytes per rank stay ~k whatever P, split's grow toward dense") {
  const CostParams noLatency{0.0, 1.25, 2.0, 4.0};
  const size_t n = size_t(1) << 24;
  for (double density : {0.001, 0.01}) {
    CAPTURE(density);
    const Costs g64 = globalTopk(noLatency, 64, n, density), g1024 = globalTopk(noLatency, 1024, n, density);
    // A message of ~k entries and the owners' ~4k (kOwnerTargetScale; value
    // and packed index under 7 bytes), and the piece sizes: Bruck's log2 P
    // rounds of P/2 16-byte blocks.
    const double sizes1024 = 8.0 * 1024 * 10 / 1.25e3, sizes64 = 8.0 * 64 * 6 / 1.25e3;
    CHECK(g1024.wire - sizes1024 < 1.2 * (g64.wire - sizes64));
    CHECK(g1024.wire - sizes1024 > 0.8 * (g64.wire - sizes64));
    CHECK(g1024.wire < (1 + kOwnerTargetScale) * density * n * 7 / 1.25e3 + sizes1024);
    const Costs s64 = split(noLatency, 64, n, density), s1024 = split(noLatency, 1024, n, density);
    CHECK(s1024.wire > 1.5 * s64.wire);
    CHECK(s1024.wire > 5 * g1024.wire);
  }
  // At 1%, 1024 ranks: the union is the whole tensor and split's phase 2 dense.
  const double ringHalf = 1023.0 / 1024 * n * 4 / 1.25e3;
  CHECK(split(noLatency, 1024, n, 0.01).wire > ringHalf);
}

TEST_CASE("global top-k: latency as the transports progress it") {
  // Link and local work free: phase 1's alltoallv takes P-1 latencies;
  // phase 2's allgatherv P-1 as a ring for blocks of 4 KiB a rank and more
  // (split's ranges here, and global top-k's at 2 and 3 ranks), Bruck's
  // log2 P below (global top-k's ~k/P entries from 64 ranks on); the sizes'
  // alltoall (Bruck), the range sizes and two votes log2 P each.
  const CostParams latencyOnly{7.0, 1e12, 1e12, 1e12, 1e12};
  for (int ranks : {2, 3, 64, 1000, 1024}) {
    CAPTURE(ranks);
    const double logP = std::ceil(std::log2(ranks));
    const double gather = ranks >= 64 ? logP : ranks - 1;
    CHECK(globalTopk(latencyOnly, ranks, 1 << 20, 0.01).us == doctest::Approx((ranks - 1 + gather + 4 * logP) * 7.0));
    CHECK(split(latencyOnly, ranks, 1 << 20, 0.01).us == doctest::Approx((2 * (ranks - 1) + 4 * logP) * 7.0));
  }
}

TEST_CASE("global top-k: edge cases are finite and non-negative") {
  const CostParams p{5.0, 1.25, 2.0, 4.0};
  for (int ranks : {1, 2, 3})
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1) << 20})
      for (double density : {0.0, 0.5, 1.0}) {
        CAPTURE(ranks);
        CAPTURE(count);
        CAPTURE(density);
        const Costs c = globalTopk(p, ranks, count, density);
        CHECK(std::isfinite(c.us));
        CHECK(std::isfinite(c.wire));
        CHECK(c.wire >= 0);
        CHECK(c.us >= c.wire);
      }
  // Uneven selections: the busiest rank bounds phase 1, the mean sets phase 2.
  std::vector<uint64_t> uneven{0, 1 << 16};
  CostInputs in{2, 1 << 20, 4, 4, uneven.data(), 4};
  double wire = -1;
  CHECK(globalTopkCostUs(p, in, &wire) > 0);
  CHECK(wire > 0);
}

TEST_CASE("global top-k: cheaper than split once the union is large, far cheaper than dense at scale") {
  const CostParams defaults{5.0, 1.25, 2.0, 4.0}, fast{5.0, 12.5, 2.0, 4.0}, slowStart{30.0, 1.25, 2.0, 4.0};
  const size_t n = size_t(1) << 24;
  for (const CostParams& p : {defaults, fast, slowStart}) {
    CAPTURE(p.alphaUs);
    CAPTURE(p.linkGBps);
    CHECK(globalTopk(p, 256, n, 0.01).us < split(p, 256, n, 0.01).us);
    CHECK(globalTopk(p, 1024, n, 0.01).us < split(p, 1024, n, 0.01).us);
    CHECK(globalTopk(p, 1024, n, 0.01).us < dense(p, 1024, n));
  }
  // 64 MiB, 1024 ranks, 1% on the default link, pairwise exchange: 8x
  // cheaper than dense at least (12.3x), its 2(P-1) latencies the largest part.
  const Costs g = globalTopk(defaults, 1024, n, 0.01);
  CHECK(8 * g.us < dense(defaults, 1024, n));
  CHECK(2 * 1023 * defaults.alphaUs > 0.5 * g.us);
}

TEST_CASE("host unions: a sparse split range costs its entries, not its length") {
  const CostParams p{5.0, 1.25, 2.0, 4.0};
  // 4 ranks at 1% of 16M: each owner's pieces hold ~4% of its range.
  std::vector<uint64_t> nnz(4, (1 << 24) / 100);
  CostInputs dense{4, 1 << 24, 4, 4, nnz.data(), 4};
  CostInputs unions = dense;
  unions.unions = true;
  const double range = (1 << 24) / 4.0;
  // The dense range's reduction alone: its bytes at the reduce rate.
  CHECK(splitScatterUs(p, dense, SplitExchange::Pairwise) > range * 4 / (4.0 * 1e3));
  CHECK(splitScatterUs(p, unions, SplitExchange::Pairwise) < splitScatterUs(p, dense, SplitExchange::Pairwise));
  CHECK(splitCostUs(p, unions) < splitCostUs(p, dense));
  // Past 1/kSplitUnionFill of the range the owner merges dense again.
  std::vector<uint64_t> full(4, (1 << 24) / 4);  // pieces: a quarter of each range per rank
  CostInputs fullDense{4, 1 << 24, 4, 4, full.data(), 4};
  CostInputs fullUnions = fullDense;
  fullUnions.unions = true;
  CHECK(splitScatterUs(p, fullUnions, SplitExchange::Pairwise) == splitScatterUs(p, fullDense, SplitExchange::Pairwise));
  // Halving is priced as before (it merges raw COO, not packed pieces).
  CHECK(splitScatterUs(p, unions, SplitExchange::Halving) == splitScatterUs(p, dense, SplitExchange::Halving));
}

TEST_CASE("the COO alone: allgather walks every message's union, costlier than its scatter") {
  const CostParams p{5.0, 1.25, 2.0, 4.0};
  std::vector<uint64_t> nnz(4, 10486);  // 1% of 1M
  CostInputs in{4, 1 << 20, 4, 4, nnz.data(), 4};
  in.unions = true;
  CostInputs coo = in;
  coo.cooAlone = true;
  double wire = 0, cooWire = 0;
  const double scatter = allgatherCostUs(p, in, &wire), walked = allgatherCostUs(p, coo, &cooWire);
  CHECK(wire == cooWire);  // the same messages on the wire
  CHECK(walked > scatter);
  // 4 x 10486 entries walked at three scatter-adds of 8 bytes each at 2 GB/s.
  CHECK(walked - cooWire == doctest::Approx(4 * 10486 * 3.0 * 8 / 2e3));
  // Without the host's unions (a device twin) the COO changes nothing here.
  CostInputs device = coo;
  device.unions = false;
  CHECK(allgatherCostUs(p, device) == scatter);
  // On these counts split's sparse ranges make it the cheaper plan for the COO alone.
  CHECK(splitCostUs(p, coo) < allgatherCostUs(p, coo));
  CHECK(splitCostUs(p, in) > allgatherCostUs(p, in));
}
