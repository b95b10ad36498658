// Planning: the configured algorithm, DCT_TUNE's, or auto's. Pure: reads the
// committed state only, so a failed step plans the same again.
#include <algorithm>

#include "algo/algorithms.h"
#include "algo/split_halving.h"
#include "base/checked_size.h"
#include "base/dtype.h"
#include "core/cost_model.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

// The model's parameters for a tensor of `bytes`: the link probe's fit where
// it timed tensors this large, else the defaults with the fit as a cap.
struct Model {
  bool covered;  // the probe timed tensors this large
  CostParams fitted, params;
};
Model modelFor(dctComm_t comm, size_t bytes) {
  Model m;
  m.covered = comm->link.covers(bytes);
  m.fitted = costParams(comm->settings.cost, comm->link, comm->size);
  m.params = sparseCostParams(comm->settings.cost, m.fitted, m.covered, comm->size);
  return m;
}

// A tensor's bytes for the rules; past SIZE_MAX, the largest size.
uint64_t tensorBytes(size_t count, size_t valueBytes) {
  size_t bytes = 0;
  return checkedMul(count, valueBytes, bytes) ? bytes : UINT64_MAX;
}

// Dense past the probe's sizes is the operation the probe timed: its fit, extrapolated.
double denseUs(dctComm_t comm, const Model& m, const CostInputs& in, double* wireUs) {
  if (!m.covered && comm->link.measured()) return denseCostUs(m.fitted, in);
  return denseCostUs(m.params, in, wireUs);
}

// This step's counts: the last sparse step's (identical on every rank),
// else k per rank (the first step, and after a dense step).
std::vector<uint64_t> forecastCounts(dctCompressor_t c, dctComm_t comm) {
  std::vector<uint64_t> forecast(comm->size, targetNnz(c));
  const bool sparse = c->stats.algorithm == dctAlgoAllgather || c->stats.algorithm == dctAlgoSplit ||
                      c->stats.algorithm == dctAlgoGlobalTopk;
  if (c->lastMessages.size() == forecast.size() && sparse)
    for (int r = 0; r < comm->size; r++) forecast[r] = c->lastMessages[r].nnz;
  return forecast;
}

bool splits(dctAlgorithm_t a) { return a == dctAlgoSplit || a == dctAlgoGlobalTopk; }

CostInputs inputsFor(dctCompressor_t c, dctComm_t comm, const std::vector<uint64_t>& forecast) {
  CostInputs in{comm->size, c->count, dtypeSize(c->wireType), static_cast<size_t>(c->indexBytes), forecast.data(),
                dtypeSize(c->accType)};
  in.unions = c->ops->mergePackedCoo != nullptr;
  return in;
}

// The split plans' exchange: DCT_SPLIT_EXCHANGE where set, else the model's
// cheaper; halving only where it can run (every rank alike: the transport
// and the kernels are the comm's and the compressor's, agreed at creation).
bool halvingExchange(dctComm_t comm, dctCompressor_t c, const CostParams& params, const CostInputs& in) {
  if (!splitHalvingAvailable(c, comm)) return false;
  if (comm->settings.splitExchange != kSplitExchangeAuto) return comm->settings.splitExchange == kSplitExchangeHalving;
  return cheaperSplitExchange(params, in) == SplitExchange::Halving;
}

// A configured or tuned plan with its split exchange, priced on this
// step's forecast.
Plan withExchange(Plan p, dctCompressor_t c, dctComm_t comm) {
  if (!splits(p.algorithm)) return p;
  const std::vector<uint64_t> forecast = forecastCounts(c, comm);
  const Model m = modelFor(comm, c->count * dtypeSize(c->wireType));
  p.halving = halvingExchange(comm, c, m.params, inputsFor(c, comm, forecast));
  return p;
}

}  // namespace

// The algorithm: the config's, a DCT_TUNE rule's, or auto's; for the split
// plans, their exchange.
Plan planAlgorithm(dctCompressor_t c, dctComm_t comm) {
  Plan p;
  if (inWarmup(c)) return p;
  // Packed lists have uint32 word offsets: past that size, stay dense.
  if (!packing::fitsOffsets(c->count, c->indexBytes)) return p;
  p.algorithm = static_cast<dctAlgorithm_t>(c->config.algorithm);
  if (p.algorithm != dctAlgoAuto) return withExchange(p, c, comm);
  // A rule picks among the plans this call allows: global top-k changes the
  // result, so only where the config opts in; else the model decides.
  const int tuned = comm->settings.tune.algorithmFor(tensorBytes(c->count, dtypeSize(c->dtype)), c->config.density);
  // Recursive doubling serves dctSparseInputAllreduce only: a rule naming
  // it leaves this call to the model.
  if (tuned > dctAlgoAuto && tuned != dctAlgoRecursiveDoubling &&
      (tuned != dctAlgoGlobalTopk || c->config.autoGlobalTopk != 0)) {
    p.algorithm = static_cast<dctAlgorithm_t>(tuned);
    return withExchange(p, c, comm);
  }
  const std::vector<uint64_t> forecast = forecastCounts(c, comm);
  const CostInputs in = inputsFor(c, comm, forecast);
  const Model m = modelFor(comm, c->count * dtypeSize(c->wireType));
  if (comm->size == 1) {
    p.algorithm = chooseAlgorithm(m.params, in);
    p.halving = splits(p.algorithm) && halvingExchange(comm, c, m.params, in);
    return p;
  }
  // The wire part the tuner may rescale: only where the links are a guess.
  AutoTuner::Modelled allgather, dense, split, global;
  double* wire[4] = {nullptr, nullptr, nullptr, nullptr};
  if (!m.covered) {
    wire[0] = &allgather.wireUs;
    wire[1] = &dense.wireUs;
    wire[2] = &split.wireUs;
    wire[3] = &global.wireUs;
  }
  // The sparse plans include the compression pass over the whole tensor.
  const double pass = compressPassUs(m.params, in);
  allgather.us = pass + allgatherCostUs(m.params, in, wire[0]);
  dense.us = denseUs(comm, m, in, wire[1]);
  // The split plans priced with the exchange they would run.
  const SplitExchange exchange = halvingExchange(comm, c, m.params, in) ? SplitExchange::Halving : SplitExchange::Pairwise;
  split.us = pass + splitCostUs(m.params, in, wire[2], exchange);
  // At two ranks split never undercuts the cheaper of the others (the cost
  // model's tests check it): only noise could pick it.
  split.available = comm->size > 2;
  // Global top-k changes the result: a candidate only where the config
  // allows it. Its model counts the ranks' mean selection as delivered.
  global.available = c->config.autoGlobalTopk != 0;
  if (global.available) global.us = pass + globalTopkCostUs(m.params, in, wire[3], exchange);
  p.decision = c->tuner.plan(allgather, dense, split, c->stats.step, global);
  p.algorithm = p.decision.algorithm();
  p.halving = splits(p.algorithm) && exchange == SplitExchange::Halving;
  return p;
}

dctAlgorithm_t tunedExactCounts(dctComm_t comm, const CostInputs& in) {
  if (comm->size == 1) return dctAlgoAuto;
  uint64_t total = 0;
  for (int r = 0; r < in.ranks; r++) total += in.nnz[r];
  const double density = in.count ? static_cast<double>(total) / (static_cast<double>(in.count) * in.ranks) : 0;
  // Lossless: a rule naming global top-k is left to the model.
  const int tuned = comm->settings.tune.algorithmFor(tensorBytes(in.count, in.valueBytes), density);
  return tuned > dctAlgoAuto && tuned != dctAlgoGlobalTopk ? static_cast<dctAlgorithm_t>(tuned) : dctAlgoAuto;
}

dctAlgorithm_t planExactCounts(dctComm_t comm, const CostInputs& in) {
  if (comm->size == 1) return dctAlgoAllgather;  // no wire: the own message only
  if (const dctAlgorithm_t tuned = tunedExactCounts(comm, in); tuned != dctAlgoAuto) return tuned;
  const Model m = modelFor(comm, in.count * in.valueBytes);
  const double allgather = allgatherCostUs(m.params, in);
  const double split = comm->size > 2 ? splitCostUs(m.params, in) : allgather;
  const double pairs = recursiveDoublingCostUs(m.params, in);
  // The COO alone from the dense plan's sum: a select pass over it.
  const double dense = denseUs(comm, m, in, nullptr) + (in.cooAlone ? compressPassUs(m.params, in) : 0);
  // No tuner corrects this model: a sparse plan must model well under dense.
  if (std::min({allgather, split, pairs}) > kSparseInputMargin * dense) return dctAlgoDense;
  if (pairs < std::min(allgather, split)) return dctAlgoRecursiveDoubling;
  return split < allgather ? dctAlgoSplit : dctAlgoAllgather;
}

}  // namespace dct
