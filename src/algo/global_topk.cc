#include "algo/global_topk.h"

#include <algorithm>
#include <cmath>

#include "base/debug.h"
#include "base/dtype.h"
#include "core/drain.h"
#include "core/owner_target.h"
#include "kernels/sampling.h"

namespace dct {
namespace {

// What a starved owner step (drain.h) aims at: k (the range's), as a
// worker's first. With nothing summed into the range (no worker sent an
// entry there: the owner residual is all there is) right after an owner
// estimate (whose tau, fresh, selects nothing now), kDrainGrowth times what
// that step delivered, up to the whole range. A worker drains at its k a
// step (its ramp capped at 64 entries), but an owner's residual holds up to
// the whole range when the workers' inflow stops (each of P workers sent
// about k entries into it a step; the owner delivered k): at k a step it
// took another 1/density steps. A range with inflow is never ramped: in
// ordinary steps owners of k = 1 starve often, and ramping them too
// delivered 2.1-2.6x the tensor's k (1000 entries at 1%, 8 ranks). The
// last step's count is stats.ownerKept and its estimate step
// lastEstimateStep, both saved with the state: a restored run aims alike.
size_t drainAim(dctCompressor_t c, size_t k, size_t length, uint64_t inflow) {
  const OwnerState& o = c->owner;
  if (inflow > 0 || !o.haveTau || o.lastEstimateStep + 1 != c->stats.step) return k;
  const double aim = kDrainGrowth * static_cast<double>(c->stats.ownerKept);
  if (aim >= static_cast<double>(length)) return length;
  return std::max(k, static_cast<size_t>(aim));
}

// tau on acc = committed residual + range, aimed at `density` (of length).
// Bisect passes over acc several times: it gets acc materialised in the
// spare (which the select rewrites).
dctResult_t estimate(dctCompressor_t c, const void* range, size_t length, dctThresholdMethod_t method,
                     double density, double& tau, void* stream) {
  OwnerState& o = c->owner;
  ThresholdArgs args{o.residual(), length, c->accType, density, method, stepSeed(c->config.seed, c->stats.step)};
  if (method == dctThresholdBisect) {
    DCTCHECK(c->ops->add(c->kernels, o.spare(), o.residual(), range, length, c->accType, c->accType, stream));
    args.data = o.spare();
  } else {
    args.addend = range;
    args.addendType = c->accType;
  }
  return c->ops->threshold(c->kernels, &args, &tau, stream);
}

// Room in c->selection for `capacity` entries, and one select into it.
dctResult_t selectInto(dctCompressor_t c, const void* range, size_t length, double tau, size_t capacity,
                       SelectArgs& sel, void* stream) {
  const size_t sumBytes = dtypeSize(c->accType), indexBytes = alignedIndexBytes(capacity, c->indexBytes);
  DCTCHECK(c->selection.reserve(indexBytes + capacity * sumBytes));
  sel = SelectArgs{};
  sel.grad = range;
  sel.residualIn = c->owner.residual();
  sel.residual = c->owner.spare();
  sel.n = length;
  sel.dtype = c->accType;
  sel.indexBytes = c->indexBytes;
  sel.tau = tau;
  sel.capacity = capacity;
  sel.outIndices = c->selection.as();
  sel.outValues = c->selection.as<char>() + indexBytes;
  return c->ops->selectCompact(c->kernels, &sel, stream);
}

}  // namespace

dctResult_t foldOwnerResidual(dctCompressor_t c, size_t begin, size_t length, void* stream) {
  OwnerState& o = c->owner;
  if (o.zero || (o.begin == begin && o.length == length)) return dctSuccess;
  void* worker = static_cast<char*>(c->residual()) + o.begin * dtypeSize(c->accType);
  DCTCHECK(c->ops->add(c->kernels, worker, worker, o.residual(), o.length, c->accType, c->accType, stream));
  c->residualZero = false;
  o.zero = true;
  o.length = 0;
  return dctSuccess;
}

dctResult_t ownerSelect(dctCompressor_t c, const void* range, size_t begin, size_t length, uint64_t inflow,
                        SelectArgs& sel, OwnerDraft& d, void* stream) {
  OwnerState& o = c->owner;
  d = OwnerDraft{};
  d.active = true;
  d.begin = begin;
  d.length = length;
  d.tau = o.tau;
  sel = SelectArgs{};
  if (length == 0) return dctSuccess;
  const size_t bytes = length * dtypeSize(c->accType);
  DCTCHECK(o.residuals[0].reserve(bytes));
  DCTCHECK(o.residuals[1].reserve(bytes));
  if (o.zero) DCTCHECK(c->ops->zero(c->kernels, o.residual(), bytes, stream));  // reads as zeros
  const size_t k = ownerRangeTarget(c->config.density, length);
  const double minTau = tauFloor(c);
  const auto method = static_cast<dctThresholdMethod_t>(c->config.thresholdMethod);
  const bool due = !o.haveTau || c->stats.step - o.lastEstimateStep >= uint64_t(c->config.thresholdInterval);
  const bool sparse = ownerDensity(c->config.density) < 1.0;
  if (!sparse) {
    d.tau = minTau;  // every nonzero entry
  } else if (due) {
    DCTCHECK(estimate(c, range, length, method, c->config.density, d.tau, stream));
    d.estimated = true;
  }
  size_t aim = k;  // the entries this step's tau is meant to deliver
  auto room = [&] { return std::min(length, 2 * aim + 64); };
  auto aimDensity = [&] { return static_cast<double>(aim) / static_cast<double>(length); };
  DCTCHECK(selectInto(c, range, length, d.tau, room(), sel, stream));
  if (sparse && !d.estimated && starvedSelection(sel.selected, d.tau, minTau)) {
    aim = drainAim(c, k, length, inflow);
    DCTCHECK(estimate(c, range, length, method, aimDensity(), d.tau, stream));
    d.estimated = true;
    DCTCHECK(selectInto(c, range, length, d.tau, room(), sel, stream));
  }
  // A sampled estimate misses on a sum that is mostly zeros (the pieces
  // cover ~P k of the range's entries at first), and asking it again gives
  // the same answer: past the band the owner takes the exact aim-th largest.
  if (sparse && outsideDriftBand(static_cast<double>(sel.selected), static_cast<double>(aim), d.tau <= minTau)) {
    DCTCHECK(estimate(c, range, length, dctThresholdExact, aimDensity(), d.tau, stream));
    d.estimated = true;
    DCTCHECK(selectInto(c, range, length, d.tau, room(), sel, stream));
  }
  if (sel.selected > sel.nnz) DCTCHECK(selectInto(c, range, length, d.tau, sel.selected, sel, stream));
  d.kept = sel.nnz;
  if (c->config.ownerReturn) return dctSuccess;  // returned: the owner keeps nothing (mass 0)
  return c->ops->absSum(c->kernels, o.spare(), length, c->accType, &d.mass, stream);
}

bool returnsUndelivered(dctCompressor_t c, const Message& msg) {
  return c->config.ownerReturn && c->config.errorFeedback && msg.nnz > 0 && !msg.dense;
}

dctResult_t keepSent(dctCompressor_t c, const Message& msg, void* stream) {
  if (!returnsUndelivered(c, msg)) return dctSuccess;
  const size_t at = alignedIndexBytes(msg.nnz, c->indexBytes), values = msg.nnz * dtypeSize(c->wireType);
  DCTCHECK(c->sent.reserve(at + values));
  DCTCHECK(c->ops->copy(c->kernels, c->sent.as(), msg.indices, msg.nnz * c->indexBytes, stream));
  return c->ops->copy(c->kernels, c->sent.as<char>() + at, msg.values, values, stream);
}

dctResult_t returnUndelivered(dctCompressor_t c, const Message& msg, const void* result, dctDataType_t resultType,
                              void* stream) {
  ScatterArgs a{c->spareResidual(), c->count, c->accType, c->indexBytes, c->sent.as(),
                c->sent.as<char>() + alignedIndexBytes(msg.nnz, c->indexBytes), msg.nnz, true};
  a.valueType = c->wireType;
  a.unlessNonzero = result;
  a.unlessBytes = dtypeSize(resultType);
  return c->ops->scatterAdd(c->kernels, &a, stream);
}

void commitOwner(dctCompressor_t c, const OwnerDraft& d) {
  OwnerState& o = c->owner;
  dctStats_t& s = c->stats;
  s.ownerKept = d.kept;
  s.ownerThreshold = d.active && d.length ? d.tau : 0;
  s.ownerResidualMass = 0;
  if (!d.active) return;
  if (d.estimated) {
    o.tau = d.tau;
    o.haveTau = true;
    o.lastEstimateStep = s.step;
  }
  o.begin = d.begin;
  o.length = d.length;
  const bool keep = c->config.errorFeedback != 0 && d.length > 0 && !c->config.ownerReturn;
  if (keep) o.committed = 1 - o.committed;
  o.zero = !keep || d.mass == 0;
  s.ownerResidualMass = keep ? d.mass : 0;
}

}  // namespace dct
