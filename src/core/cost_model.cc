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

}  // namespace

// Ring allgatherv: P-1 latencies, each rank receives every other message;
// then every rank scatter-adds all P messages.
double allgatherCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  double total = 0, smallest = -1;
  for (int r = 0; r < in.ranks; r++) {
    double nnz = static_cast<double>(in.nnz[r]);
    double bytes = nnz * in.valueBytes + packedIndexBytes(nnz, static_cast<double>(in.count), in.indexBytes);
    total += bytes;
    if (smallest < 0 || bytes < smallest) smallest = bytes;
  }
  double wire = (total - smallest) / (p.linkGBps * 1e3);
  double scatter = total / (p.scatterGBps * 1e3);
  return withWire((in.ranks - 1) * p.alphaUs + wire, scatter, wireUs);
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

double unionEstimate(const CostInputs& in) {
  if (in.count == 0) return 0;
  const double n = static_cast<double>(in.count);
  double missed = 1;  // chance that no rank selected a given position
  for (int r = 0; r < in.ranks; r++) missed *= 1 - std::min(1.0, static_cast<double>(in.nnz[r]) / n);
  return n * (1 - missed);
}

namespace {

// Phase 1 of split and global top-k: each rank sends (P-1)/P of its message
// to the ranges' owners (the busiest rank bounds the alltoallv) and each
// owner merges ~1/P of all messages into its range. Latency not included.
struct RangeScatter {
  double wire, local;
};
RangeScatter rangeScatter(const CostParams& p, const CostInputs& in) {
  const double P = in.ranks, n = static_cast<double>(in.count);
  double busiest = 0, total = 0;
  for (int r = 0; r < in.ranks; r++) {
    const double nnz = static_cast<double>(in.nnz[r]);
    const double bytes = nnz * in.valueBytes + packedIndexBytes(nnz, n, in.indexBytes);
    busiest = std::max(busiest, bytes);
    total += bytes;
  }
  const double range = n / P;
  return {busiest * (P - 1) / P / (p.linkGBps * 1e3),
          total / P / (p.scatterGBps * 1e3) + range * sumBytesOf(in) / (p.reduceGBps * 1e3)};
}

double log2Ceil(double P) { return std::ceil(std::log2(std::max(P, 2.0))); }

// Control beyond the other plans', split and global top-k alike: the piece
// sizes (16 bytes per peer by MPI_Alltoall, Bruck's log2 P rounds of P/2
// blocks for such small ones), the range sizes' allgather and two votes:
// log2 P latencies each.
double splitControlUs(const CostParams& p, double P) {
  return 8 * P * log2Ceil(P) / (p.linkGBps * 1e3) + 4 * log2Ceil(P) * p.alphaUs;
}

}  // namespace

// Split (split_allreduce.cc). Phase 1: rangeScatter. Phase 2: each owner
// selects its range's nonzeros and ring-allgathers the range in the cheaper
// of sparse and dense form; every rank writes all P of them. Control:
// splitControlUs.
double splitCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  const double P = in.ranks, n = static_cast<double>(in.count);
  const double sumBytes = sumBytesOf(in);
  const RangeScatter phase1 = rangeScatter(p, in);
  const double range = n / P, reduced = unionEstimate(in) / P;
  const double form = std::min(range * sumBytes, reduced * sumBytes + packedIndexBytes(reduced, range, in.indexBytes));
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  const double wire2 = (P - 1) * form / link, local2 = P * form / scatter;
  return withWire(2 * (P - 1) * p.alphaUs + phase1.wire + wire2 + splitControlUs(p, P), phase1.local + local2, wireUs);
}

// Global top-k (split with owner-side selection, Ok-Topk/gTop-k style).
// Phase 1: rangeScatter. Then each owner adds its residual to its summed
// range and keeps its ~m k/P largest, k the ranks' mean selection and m
// kOwnerTargetScale (one pass over the range at the compressor's rate), and
// ring-allgathers them in the smaller form: ~m k entries on the wire in
// all, whatever P and the ranks' overlap, every rank writing all P of them.
// Control: splitControlUs.
double globalTopkCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  const double P = in.ranks, n = static_cast<double>(in.count);
  const double sumBytes = sumBytesOf(in);
  const RangeScatter phase1 = rangeScatter(p, in);
  double k = 0;  // the ranks' mean selection, delivered in all
  for (int r = 0; r < in.ranks; r++) k += static_cast<double>(in.nnz[r]) / P;
  const double range = n / P, kept = std::min(kOwnerTargetScale * k / P, range);
  const double form = std::min(range * sumBytes, kept * sumBytes + packedIndexBytes(kept, range, in.indexBytes));
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  const double pass = range * sumBytes / (p.selectGBps * 1e3);
  const double wire2 = (P - 1) * form / link, local2 = P * form / scatter;
  return withWire(2 * (P - 1) * p.alphaUs + phase1.wire + wire2 + splitControlUs(p, P), phase1.local + pass + local2,
                  wireUs);
}

double recursiveDoublingCostUs(const CostParams& p, const CostInputs& in, double* wireUs) {
  const int P = in.ranks;
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const double n = static_cast<double>(in.count), sb = sumBytesOf(in), entry = sb + in.indexBytes;
  const double link = p.linkGBps * 1e3, scatter = p.scatterGBps * 1e3;
  auto message = [&](double missed) {  // a partial sum's bytes from its chance to miss a position
    const double entries = n * (1 - missed);
    return std::min(entries * entry, n * sb);
  };
  auto missOf = [&](int r) { return n > 0 ? 1 - std::min(1.0, static_cast<double>(in.nnz[r]) / n) : 1.0; };
  std::vector<double> missed(p2);  // per core block: the chance it misses a position
  double latency = 0, wire = 0, local = 0, folded = 0;
  for (int j = 0; j < p2; j++) {
    missed[j] = missOf(j);
    if (j + p2 < P) {
      folded = std::max(folded, message(missOf(j + p2)));
      missed[j] *= missOf(j + p2);
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

dctAlgorithm_t chooseAlgorithm(const CostParams& p, const CostInputs& in) {
  if (in.ranks == 1) return dctAlgoAllgather;  // no wire: scatter own message only
  const double allgather = allgatherCostUs(p, in), split = splitCostUs(p, in), dense = denseCostUs(p, in);
  if (allgather <= split && allgather <= dense) return dctAlgoAllgather;
  return split <= dense ? dctAlgoSplit : dctAlgoDense;
}

}  // namespace dct
