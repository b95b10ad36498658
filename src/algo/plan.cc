// Planning: the configured algorithm, or auto's forecast. Pure: reads the
// committed state only.
#include <algorithm>

#include "algo/algorithms.h"
#include "base/dtype.h"
#include "core/cost_model.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {

Plan planAlgorithm(dctCompressor_t c, dctComm_t comm) {
  Plan p;
  if (inWarmup(c)) return p;
  // Packed lists have uint32 word offsets: past that size, stay dense.
  if (!packing::fitsOffsets(c->count, c->indexBytes)) return p;
  p.algorithm = static_cast<dctAlgorithm_t>(c->config.algorithm);
  if (p.algorithm != dctAlgoAuto) return p;
  // Forecast this step's counts: last sparse step's (identical on every
  // rank), or k per rank (before the first exchange, and after a dense step,
  // which sends everything).
  std::vector<uint64_t> forecast(comm->size, targetNnz(c));
  const bool sparse = c->stats.algorithm == dctAlgoAllgather || c->stats.algorithm == dctAlgoSplit;
  if (c->lastMessages.size() == forecast.size() && sparse)
    for (int r = 0; r < comm->size; r++) forecast[r] = c->lastMessages[r].nnz;
  CostInputs in{comm->size, c->count, dtypeSize(c->wireType), static_cast<size_t>(c->indexBytes),
                forecast.data(), dtypeSize(c->accType)};
  // The link probe's fit where it measured tensors this large; beyond, the
  // defaults and the link scale learned from the steps (sparseCostParams).
  const size_t bytes = c->count * dtypeSize(c->wireType);
  const bool covered = comm->link.covers(bytes);
  const CostParams fitted = costParams(comm->settings.cost, comm->link, comm->size);
  const CostParams params = sparseCostParams(comm->settings.cost, fitted, covered, comm->size);
  if (comm->size == 1) {
    p.algorithm = chooseAlgorithm(params, in);
    return p;
  }
  // Links the comm measured at creation need no scale learned from the
  // sparse steps (whose time outside their own work is mostly waiting for
  // the slowest rank, not the wire): their wire part is left at 0.
  AutoTuner::Modelled allgather, dense, split;
  const bool guessed = !covered;
  // Sparse steps pass over the whole tensor first. Without that pass the
  // model priced allgather at 13-20 us a step at 1 MiB (its share of a
  // 150-250 us step), so the measured scale (time / model) swung with the
  // forecast counts and auto flipped between plans on noise.
  const double pass = compressPassUs(params, in);
  allgather.us = pass + allgatherCostUs(params, in, guessed ? &allgather.wireUs : nullptr);
  // Past the probe's sizes dense is still the very operation it timed: its
  // fit, extrapolated, at the pace measured (no wire part for the link
  // scale). The scale learned from sparse steps on shared memory is mostly
  // waiting for compute: at 16 MiB and 5% on 4 ranks it priced dense at 56
  // ms, never measured it, and split ran at 23 ms against dense's 15. The
  // best rank's best probe is optimistic past the caches, which errs
  // towards measuring dense once.
  if (guessed && comm->link.measured()) dense.us = denseCostUs(fitted, in);
  else dense.us = denseCostUs(params, in, guessed ? &dense.wireUs : nullptr);
  split.us = pass + splitCostUs(params, in, guessed ? &split.wireUs : nullptr);
  // At two ranks split never undercuts the cheaper of the other two (its
  // wire is at least allgather's, its work and control more: the cost
  // model's tests check it), so only noise could pick it: a slow early
  // allgather streak at 64 MiB and 1% had split run at 22-23 ms a step
  // against allgather's 13-16 until the step-100 re-measurement.
  split.available = comm->size > 2;
  p.decision = c->tuner.plan(allgather, dense, split, c->stats.step);
  p.algorithm = p.decision.algorithm();
  return p;
}

dctAlgorithm_t planExactCounts(dctComm_t comm, const CostInputs& in) {
  if (comm->size == 1) return dctAlgoAllgather;  // no wire: the own message only
  const bool covered = comm->link.covers(in.count * in.valueBytes);
  const CostParams fitted = costParams(comm->settings.cost, comm->link, comm->size);
  const CostParams params = sparseCostParams(comm->settings.cost, fitted, covered, comm->size);
  const double allgather = allgatherCostUs(params, in);
  const double split = comm->size > 2 ? splitCostUs(params, in) : allgather;
  // Dense past the probe's sizes: its fit extrapolated (planAlgorithm says why).
  const double dense = !covered && comm->link.measured() ? denseCostUs(fitted, in) : denseCostUs(params, in);
  // With no tuner to learn how far each plan runs from its model, a sparse
  // plan must model well under dense: on 1 Gbit/s links at 4 ranks the
  // sparse plans took 1.4-1.8x their wire bound, the ring allreduce 1.1x,
  // and split modelled at 0.77x dense (50% density) ran 1.2x slower
  // (bench/results/2026-11-26-coo).
  if (std::min(allgather, split) > kSparseInputMargin * dense) return dctAlgoDense;
  return split < allgather ? dctAlgoSplit : dctAlgoAllgather;
}

}  // namespace dct
