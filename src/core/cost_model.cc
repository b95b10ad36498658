#include "core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/owner_target.h"

namespace dct {

namespace {
double orDefault(double set, double fallback) { return set > 0 ? set : fallback; }
}  // namespace

CostParams costParams(const CostOverrides& set, const LinkTiming& measured, int ranks) {
  CostParams p{5.0, 1.25, orDefault(set.scatterGBps, 2.0), orDefault(set.reduceGBps, 4.0)};
  if (measured.measured() && ranks > 1) {
    // denseCostUs = 2(P-1) alpha + bytes * (wire + reduce per byte), solved
    // for the two probe sizes.
    const double P = ranks, small = static_cast<double>(measured.smallBytes);
    const double perByte = (measured.largeUs - measured.smallUs) / (static_cast<double>(measured.largeBytes) - small);
    const double reducePerByte = (P - 1) / P / (p.reduceGBps * 1e3);
    // A reduction faster than modelled must not make the link look infinite.
    const double wirePerByte = std::max(perByte - reducePerByte, 0.25 * perByte);
    p.linkGBps = 2 * (P - 1) / P / wirePerByte * 1e-3;
    const double latencyUs = measured.smallUs - small * (wirePerByte + reducePerByte);
    p.alphaUs = std::max(0.01, latencyUs / (2 * (P - 1)));
  }
  p.selectGBps = orDefault(set.selectGBps, p.selectGBps);
  p.alphaUs = orDefault(set.alphaUs, p.alphaUs);
  p.linkGBps = orDefault(set.linkGBps, p.linkGBps);
  return p;
}

CostParams sparseCostParams(const CostOverrides& set, const CostParams& fitted, bool covered, int ranks) {
  if (covered) return fitted;
  CostParams p = costParams(set, LinkTiming{}, ranks);
  p.linkGBps = std::min(p.linkGBps, fitted.linkGBps);
  return p;
}

// Packed index bytes of nnz entries spread over count (index_packing.h): a
// group's width is that of its largest gap, about mean gap * ln(128) for
// scattered positions, so log2(count / nnz) + 2.3 bits per index, plus each
// group's header (base, word offset, width).
double packedIndexBytes(double nnz, double count, size_t indexBytes) {
  if (nnz <= 0) return 0;
  double bits = std::min(std::log2(std::max(1.0, count / nnz)) + 2.3, 8.0 * indexBytes);
  return nnz * (bits / 8 + (indexBytes + 5.0) / 128);
}

namespace {

// Bytes of one reduced value: the accumulation type's, else the wire's.
double sumBytesOf(const CostInputs& in) { return static_cast<double>(in.sumBytes ? in.sumBytes : in.valueBytes); }

// A cost as its latency-and-link part plus its local part (the tuner scales
// the first by what the links measure).
double withWire(double wire, double local, double* wireUs) {
  if (wireUs) *wireUs = wire;
  return wire + local;
}

// The union of `messages` messages' `entries` as COO (mergePackedCoo): an
// entry walked costs a few scatter-adds of its index and value, more once
// the messages no longer step together (kernel_perf, one thread, 1% of 1M
// and of 16M: union-2 5.6 and 6.6-8.8 ns an entry, union-4 9-12 and
// 11-14.5; the default scatter rate is 4 ns for 8 bytes).
double unionUs(const CostParams& p, const CostInputs& in, double entries, int messages) {
  const double ratio = messages <= 3 ? 1.75 : 3.0;
  return entries * ratio * static_cast<double>(in.valueBytes + in.indexBytes) / (p.scatterGBps * 1e3);
}

double totalEntries(const CostInputs& in) {
  double total = 0;
  for (int r = 0; r < in.ranks; r++) total += static_cast<double>(in.nnz[r]);
  return total;
}

}  // namespace

// Ring allgatherv: P-1 latencies, each rank receives every other message;
// then every rank scatter-adds all P messages (or walks their union, for
// the COO alone).
double allgatherCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  double total = 0, smallest = -1;
  for (int r = 0; r < in.ranks; r++) {
    double nnz = static_cast<double>(in.nnz[r]);
    double bytes = nnz * in.valueBytes + packedIndexBytes(nnz, static_cast<double>(in.count), in.indexBytes);
    total += bytes;
    if (smallest < 0 || bytes < smallest) smallest = bytes;
  }
  double wire = (total - smallest) / (p.linkGBps * 1e3);
  double local = in.unions && in.cooAlone ? unionUs(p, in, totalEntries(in), in.ranks) : total / (p.scatterGBps * 1e3);
  return withWire((in.ranks - 1) * p.alphaUs + wire, local, wireUs);
}

// Ring allreduce: 2(P-1) latencies and 2(P-1)/P of the dense bytes on the
// wire, (P-1)/P of them reduced locally.
double denseCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  double P = in.ranks;
  double bytes = static_cast<double>(in.count) * in.valueBytes;
  double wire = 2.0 * (P - 1) / P * bytes / (p.linkGBps * 1e3);
  double reduce = (P - 1) / P * bytes / (p.reduceGBps * 1e3);
  return withWire(2.0 * (P - 1) * p.alphaUs + wire, reduce, wireUs);
}

namespace {

// The chance that rank r's message misses a given position (uniform positions).
double missChance(const CostInputs& in, int r) {
  const double n = static_cast<double>(in.count);
  return n > 0 ? 1 - std::min(1.0, static_cast<double>(in.nnz[r]) / n) : 1.0;
}

}  // namespace

double unionEstimate(const CostInputs& in) {
  if (in.count == 0) return 0;
  double missed = 1;  // chance that no rank selected a given position
  for (int r = 0; r < in.ranks; r++) missed *= missChance(in, r);
  return static_cast<double>(in.count) * (1 - missed);
}

namespace {

double log2Ceil(double P) { return std::ceil(std::log2(std::max(P, 2.0))); }

int coreRanks(int ranks) {
  int p2 = 1;
  while (p2 * 2 <= ranks) p2 *= 2;
  return p2;
}

struct Phase {
  double latency = 0, wire = 0, local = 0;
};

// Pairwise: each rank sends (P-1)/P of its message to the ranges' owners
// (P-1 latencies; the busiest rank bounds the alltoallv) and each owner
// merges ~1/P of all messages into its range, dense or, this sparse, as
// their union (split_forms.cc). Before it, the piece sizes
// (16 bytes per peer by MPI_Alltoall, Bruck's log2 P rounds of P/2 blocks
// for such small ones) and their vote: log2 P latencies each.
Phase pairwiseScatter(const CostParams& p, const CostInputs& in) {
  const double P = in.ranks, n = static_cast<double>(in.count), link = p.linkGBps * 1e3;
  double busiest = 0, total = 0;
  for (int r = 0; r < in.ranks; r++) {
    const double nnz = static_cast<double>(in.nnz[r]);
    const double bytes = nnz * in.valueBytes + packedIndexBytes(nnz, n, in.indexBytes);
    busiest = std::max(busiest, bytes);
    total += bytes;
  }
  Phase f;
  f.latency = (P - 1) * p.alphaUs + 2 * log2Ceil(P) * p.alphaUs;
  f.wire = busiest * (P - 1) / P / link + 8 * P * log2Ceil(P) / link;
  const double owned = totalEntries(in) / P;
  if (in.unions && owned <= n / P / kSplitUnionFill) f.local = unionUs(p, in, owned, in.ranks);
  else f.local = total / P / (p.scatterGBps * 1e3) + n / P * sumBytesOf(in) / (p.reduceGBps * 1e3);
  return f;
}

// Recursive halving (split_halving.h): a fold where P is no power of two
// (the extra ranks' whole messages in, their ranges' sums out), then
// log2 p2 rounds. In round i a rank sends the half of its window the peer
// keeps: n / 2^(i+1) positions holding the union of 2^i ranks' entries
// (uniform positions: each misses a position with prod(1 - nnz_r / n)),
// raw COO in the accumulation type (index + value per entry, a header per
// range), dense where that is smaller; the slowest pair bounds the round,
// and both halves go through the host merge.
Phase halvingScatter(const CostParams& p, const CostInputs& in) {
  const int P = in.ranks, p2 = coreRanks(P);
  const double n = static_cast<double>(in.count), sb = sumBytesOf(in), entry = sb + in.indexBytes;
  const double link = p.linkGBps * 1e3, merge = p.scatterGBps * 1e3;
  // A partial over `length` positions missing each with `missed`, across `ranges` ranges.
  auto message = [&](double length, double missed, double ranges) {
    return std::min(length * (1 - missed) * entry, length * sb) + 8 * ranges;
  };
  std::vector<double> missed(p2);
  Phase f;
  double first = 0, folded = 0;
  for (int j = 0; j < P; j++) first = std::max(first, message(n, missChance(in, j), P));
  f.local += first / merge;  // the selection laid out as the first partial
  for (int j = 0; j < p2; j++) {
    missed[j] = missChance(in, j);
    if (j + p2 < P) {
      folded = std::max(folded, message(n, missChance(in, j + p2), P));
      missed[j] *= missChance(in, j + p2);
    }
  }
  if (P > p2) f.latency += p.alphaUs, f.wire += folded / link, f.local += 2 * folded / merge;
  std::vector<double> next(p2);
  for (int d = p2 / 2; d >= 1; d /= 2) {
    const double length = n * d / p2, ranges = static_cast<double>(P) * d / p2;
    double largest = 0;
    for (int j = 0; j < p2; j++) {
      largest = std::max(largest, message(length, missed[j], ranges));
      next[j] = missed[j] * missed[j ^ d];
    }
    missed.swap(next);
    f.latency += p.alphaUs;
    f.wire += largest / link;
    f.local += 2 * largest / merge;
  }
  const double range = message(n / P, missed[0], 1);
  if (P > p2) f.latency += p.alphaUs, f.wire += range / link;
  f.local += range / merge;  // the range written into the target
  return f;
}

Phase scatterPhase(const CostParams& p, const CostInputs& in, SplitExchange exchange) {
  return exchange == SplitExchange::Halving ? halvingScatter(p, in) : pairwiseScatter(p, in);
}

// Phase 2 of both plans: the range sizes' allgather and its vote (log2 P
// latencies each), then the allgatherv of the ranges. Open MPI 4.1's tuned
// allgatherv runs Bruck's log2 P rounds for small blocks (under 4 KiB a
// rank: at 1024 ranks and more, and most small-block cases below) and a
// ring or neighbour exchange (P-1 or P/2 latencies) for large ones: priced
// as log2 P rounds under 4 KiB a rank, else P-1. The bytes are the ring's
// either way, (P-1) blocks each.
double gatherLatencyUs(const CostParams& p, double P, double formBytes) {
  const double rounds = formBytes < 4096 ? log2Ceil(P) : P - 1;
  return (rounds + 2 * log2Ceil(P)) * p.alphaUs;
}

double splitTotal(const Phase& scatter, double latency2, double wire2, double local2, double* wireUs) {
  return withWire(scatter.latency + latency2 + scatter.wire + wire2, scatter.local + local2, wireUs);
}

}  // namespace

double splitScatterUs(const CostParams& p, const CostInputs& in, SplitExchange exchange, double* wireUs) {
  const Phase f = scatterPhase(p, in, exchange);
  return withWire(f.latency + f.wire, f.local, wireUs);
}

SplitExchange cheaperSplitExchange(const CostParams& p, const CostInputs& in) {
  if (in.ranks < 2) return SplitExchange::Pairwise;
  return splitScatterUs(p, in, SplitExchange::Halving) < splitScatterUs(p, in, SplitExchange::Pairwise)
             ? SplitExchange::Halving
             : SplitExchange::Pairwise;
}

// Split (split_allreduce.cc). Phase 1: the exchange's scatter. Phase 2:
// each owner selects its range's nonzeros and allgathers the range in the
// cheaper of sparse and dense form; every rank writes all P of them.
double splitCostUs(const CostParams& p, const CostInputs& in, double* wireUs, SplitExchange exchange) {
  const double P = in.ranks, n = static_cast<double>(in.count);
  const double sumBytes = sumBytesOf(in);
  const Phase phase1 = scatterPhase(p, in, exchange);
  const double range = n / P, reduced = unionEstimate(in) / P;
  const double form = std::min(range * sumBytes, reduced * sumBytes + packedIndexBytes(reduced, range, in.indexBytes));
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  const double wire2 = (P - 1) * form / link, local2 = P * form / scatter;
  return splitTotal(phase1, gatherLatencyUs(p, P, form), wire2, local2, wireUs);
}

// Global top-k (split with owner-side selection, Ok-Topk/gTop-k style).
// Phase 1: the exchange's scatter. Then each owner adds its residual to its
// summed range and keeps its ~m k/P largest, k the ranks' mean selection and
// m kOwnerTargetScale (one pass over the range at the compressor's rate),
// and allgathers them in the smaller form: ~m k entries on the wire in all,
// whatever P and the ranks' overlap, every rank writing all P of them.
double globalTopkCostUs(const CostParams& p, const CostInputs& in, double* wireUs, SplitExchange exchange) {
  const double P = in.ranks, n = static_cast<double>(in.count);
  const double sumBytes = sumBytesOf(in);
  const Phase phase1 = scatterPhase(p, in, exchange);
  double k = 0;  // the ranks' mean selection, delivered in all
  for (int r = 0; r < in.ranks; r++) k += static_cast<double>(in.nnz[r]) / P;
  const double range = n / P, kept = std::min(kOwnerTargetScale * k / P, range);
  const double form = std::min(range * sumBytes, kept * sumBytes + packedIndexBytes(kept, range, in.indexBytes));
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  const double pass = range * sumBytes / (p.selectGBps * 1e3);
  const double wire2 = (P - 1) * form / link, local2 = P * form / scatter;
  return splitTotal(phase1, gatherLatencyUs(p, P, form), wire2, pass + local2, wireUs);
}

double recursiveDoublingCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  const int P = in.ranks, p2 = coreRanks(P);
  const double n = static_cast<double>(in.count), sb = sumBytesOf(in), entry = sb + in.indexBytes;
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  auto message = [&](double missed) {  // a partial sum's bytes from its chance to miss a position
    const double entries = n * (1 - missed);
    return std::min(entries * entry, n * sb);
  };
  std::vector<double> missed(p2);  // per core block: the chance it misses a position
  double latency = 0, wire = 0, local = 0, folded = 0;
  for (int j = 0; j < p2; j++) {
    missed[j] = missChance(in, j);
    if (j + p2 < P) {
      folded = std::max(folded, message(missChance(in, j + p2)));
      missed[j] *= missChance(in, j + p2);
    }
  }
  if (P > p2) latency += p.alphaUs, wire += folded / link, local += 2 * folded / scatter;
  for (int len = 1; len < p2; len *= 2) {
    double largest = 0;
    for (int j = 0; j < p2; j += len) largest = std::max(largest, message(missed[j]));
    latency += p.alphaUs;
    wire += largest / link;
    local += 2 * largest / scatter;  // both halves through the merge
    for (int j = 0; j < p2; j += 2 * len) missed[j] *= missed[j + len];
  }
  const double result = message(missed[0]);
  if (P > p2) latency += p.alphaUs, wire += result / link;
  local += result / scatter;  // the sum written out
  return withWire(latency + wire, local, wireUs);
}

double compressPassUs(const CostParams& p, const CostInputs& in) {
  return static_cast<double>(in.count) * sumBytesOf(in) / (p.selectGBps * 1e3);
}

double pipelineChunks(const CostParams& p, const CostInputs& in) {
  return std::sqrt((compressPassUs(p, in) + allgatherCostUs(p, in)) / (in.ranks * p.alphaUs));
}

size_t autoChunkElems(const CostParams& p, const CostInputs& in) {
  constexpr size_t kMinElems = size_t(1) << 18, kAlignElems = 4096;
  constexpr double kMaxChunks = 64;
  const double chunks = std::clamp(pipelineChunks(p, in), 1.0, kMaxChunks);
  const size_t even = static_cast<size_t>(std::ceil(static_cast<double>(in.count) / chunks));
  return std::max(kMinElems, (even + kAlignElems - 1) / kAlignElems * kAlignElems);
}

dctAlgorithm_t chooseAlgorithm(const CostParams& p, const CostInputs& in) {
  if (in.ranks == 1) return dctAlgoAllgather;  // no wire: scatter own message only
  const double allgather = allgatherCostUs(p, in), split = splitCostUs(p, in), dense = denseCostUs(p, in);
  if (allgather <= split && allgather <= dense) return dctAlgoAllgather;
  return split <= dense ? dctAlgoSplit : dctAlgoDense;
}

}  // namespace dct
