// DCT-DP sparse allreduce driver: plan, warm-up or compress, exchange.
#include <chrono>

#include "algo/algorithms.h"
#include "transport/comm.h"
#include "core/cost_model.h"
#include "base/debug.h"
#include "kernels/index_packing.h"

namespace dct {
namespace {

// Lays the selection out in `wire` as one contiguous message: the indices
// delta bit-packed (kernels/index_packing.h: ~1.3 bytes each at density 1%
// instead of 4), then the values, padded to 8 bytes so the next rank's
// message in the gathered buffer stays aligned for 64-bit loads (the GPU
// faults on misaligned ones). Returns the message's bytes.
dctResult_t pack(dctCompressor_t c, const Message& msg, size_t& bytes, void* stream) {
  const size_t valueBytes = msg.nnz * dtypeSize(c->dtype), padded = packing::pad8(valueBytes);
  DCTCHECK(c->wire.reserve(packing::maxPackedBytes(msg.nnz, c->indexBytes) + padded));
  char* wire = c->wire.as<char>();
  PackArgs packed{msg.indices, msg.nnz, c->indexBytes, wire};
  DCTCHECK(c->ops->packIndices(c->kernels, &packed, stream));
  DCTCHECK(c->ops->copy(c->kernels, wire + packed.bytes, msg.values, valueBytes, stream));
  if (padded > valueBytes) DCTCHECK(c->ops->zero(c->kernels, wire + packed.bytes + valueBytes, padded - valueBytes, stream));
  bytes = packed.bytes + padded;  // packed.bytes is a multiple of 8
  return dctSuccess;
}

dctResult_t warmupStep(const void* sendbuf, void* recvbuf, dctCompressor_t c, dctComm_t comm,
                       void* stream) {
  DCTCHECK(accumulateDense(c, sendbuf, stream));
  DCTCHECK(comm->transport->allreduce(comm, c->residual.as(), recvbuf, c->count, c->dtype, stream));
  DCTCHECK(clearResidual(c, stream));
  c->stats.nnz = c->count;
  c->stats.nonFinite = 0;
  c->stats.threshold = 0;
  size_t bytes = c->count * dtypeSize(c->dtype);
  finishStep(c, bytes, bytes, dctAlgoDense);
  return dctSuccess;
}

// Every rank's message size, and the slowest rank's time of the previous
// step for auto's tuner (the same numbers on every rank).
dctResult_t gatherMessages(dctCompressor_t c, dctComm_t comm, uint64_t nnz, uint64_t bytes,
                           void* stream) {
  RankMessage mine{nnz, bytes, c->lastStepNs};
  c->lastMessages.resize(comm->size);
  DCTCHECK(comm->transport->allgather(comm, &mine, c->lastMessages.data(), sizeof(mine), stream));
  uint64_t slowest = 0;
  for (const RankMessage& m : c->lastMessages) slowest = m.lastStepNs > slowest ? m.lastStepNs : slowest;
  c->tuner.learn(static_cast<double>(slowest) * 1e-3);
  return dctSuccess;
}

// Dense: the selection written densely straight into recvbuf (one fused
// pass, no compaction, no scatter), then the transport's dense allreduce.
dctResult_t denseStep(const void* sendbuf, void* recvbuf, dctCompressor_t c, dctComm_t comm,
                      void* stream) {
  // Density 1 selects every nonzero: the residual stays zero and the step is
  // exactly a dense allreduce of the gradient, so skip the pass altogether.
  if (c->config.density >= 1.0) {
    DCTCHECK(comm->transport->allreduce(comm, sendbuf, recvbuf, c->count, c->dtype, stream));
    c->stats.nnz = c->count;
    c->stats.nonFinite = 0;
    c->stats.threshold = 0;
    size_t bytes = c->count * dtypeSize(c->dtype);
    if (c->config.algorithm == dctAlgoAuto) DCTCHECK(gatherMessages(c, comm, c->count, bytes, stream));
    finishStep(c, bytes, bytes, dctAlgoDense);
    return dctSuccess;
  }
  Message msg;
  msg.dense = recvbuf;
  DCTCHECK(compressStep(c, sendbuf, msg, stream));
  size_t bytes = c->count * dtypeSize(c->dtype);
  // Auto forecasts the next step from everyone's counts.
  if (c->config.algorithm == dctAlgoAuto) DCTCHECK(gatherMessages(c, comm, msg.nnz, 0, stream));
  DCTCHECK(comm->transport->allreduce(comm, recvbuf, recvbuf, c->count, c->dtype, stream));
  finishStep(c, bytes, bytes, dctAlgoDense);
  return dctSuccess;
}

dctResult_t allgatherStep(const void* sendbuf, void* recvbuf, dctCompressor_t c,
                          dctComm_t comm, void* stream) {
  Message msg;
  msg.storage = &c->selection;
  DCTCHECK(compressStep(c, sendbuf, msg, stream));
  size_t bytes = 0;
  DCTCHECK(pack(c, msg, bytes, stream));
  DCTCHECK(gatherMessages(c, comm, msg.nnz, bytes, stream));
  size_t received = 0;
  DCTCHECK(allreduceAllgather(c, comm, c->lastMessages, recvbuf, received, stream));
  finishStep(c, bytes, received, dctAlgoAllgather);
  return dctSuccess;
}

}  // namespace

dctAlgorithm_t planAlgorithm(dctCompressor_t c, dctComm_t comm) {
  if (inWarmup(c)) return dctAlgoDense;
  // Packed lists have uint32 word offsets: past that size, stay dense.
  if (!packing::fitsOffsets(c->count, c->indexBytes)) return dctAlgoDense;
  auto algo = static_cast<dctAlgorithm_t>(c->config.algorithm);
  if (algo != dctAlgoAuto) return algo;
  // Forecast this step's counts: last step's (identical on every rank), or
  // k per rank before the first exchange.
  std::vector<uint64_t> forecast(comm->size, targetNnz(c));
  if (c->lastMessages.size() == forecast.size())
    for (int r = 0; r < comm->size; r++) forecast[r] = c->lastMessages[r].nnz;
  CostInputs in{comm->size, c->count, dtypeSize(c->dtype), static_cast<size_t>(c->indexBytes),
                forecast.data()};
  const CostParams params = costParamsFromEnv();
  if (comm->size == 1) return chooseAlgorithm(params, in);
  return c->tuner.plan(allgatherCostUs(params, in), denseCostUs(params, in), c->stats.step);
}

dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, dctRedOp_t op,
                            dctAlgorithm_t plan, dctCompressor_t c, dctComm_t comm,
                            void* stream) {
  const auto start = std::chrono::steady_clock::now();
  if (inWarmup(c)) DCTCHECK(warmupStep(sendbuf, recvbuf, c, comm, stream));
  else if (plan == dctAlgoDense) DCTCHECK(denseStep(sendbuf, recvbuf, c, comm, stream));
  else DCTCHECK(allgatherStep(sendbuf, recvbuf, c, comm, stream));
  DCT_TRACE("step %llu: nnz %llu tau %g algo %d", (unsigned long long)c->stats.step,
            (unsigned long long)c->stats.nnz, c->tau, static_cast<int>(plan));
  if (op == dctAvg && comm->size > 1)
    DCTCHECK(c->ops->scale(c->kernels, recvbuf, c->count, c->dtype, 1.0 / comm->size, stream));
  // Device work is stream-ordered: wait for it so the time is the step's.
  if (c->config.algorithm == dctAlgoAuto && c->ops->device) DCTCHECK(c->ops->synchronize(c->kernels, stream));
  c->lastStepNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  c->tuner.endStep();
  return dctSuccess;
}

dctResult_t allreduceAllgather(dctCompressor_t c, dctComm_t comm,
                               const std::vector<RankMessage>& messages, void* recvbuf,
                               size_t& bytesReceived, void* stream) {
  const size_t valueBytes = dtypeSize(c->dtype);
  std::vector<size_t> bytes(comm->size), offsets(comm->size);
  size_t total = 0;
  for (int r = 0; r < comm->size; r++) {
    offsets[r] = total;
    bytes[r] = messages[r].bytes;
    total += bytes[r];
  }
  DCTCHECK(c->gathered.reserve(total));
  char* all = c->gathered.as<char>();
  DCTCHECK(comm->transport->allgatherv(comm, c->wire.as(), bytes[comm->rank], all, bytes.data(),
                                       offsets.data(), stream));
  DCTCHECK(c->ops->zero(c->kernels, recvbuf, c->count * valueBytes, stream));
  // Rank order, same on every rank: bit-identical sums everywhere.
  for (int r = 0; r < comm->size; r++) {
    const size_t nnz = messages[r].nnz, packed = bytes[r] - packing::pad8(nnz * valueBytes);
    char* base = all + offsets[r];
    ScatterArgs add{recvbuf, c->count, c->dtype, c->indexBytes, base, base + packed, nnz, true, packed};
    dctResult_t res = c->ops->scatterAddPacked(c->kernels, &add, stream);
    if (res != dctSuccess)
      return fail(comm, res, "dctSparseAllreduce: malformed message from rank %d (%llu entries, %zu bytes)",
                  r, static_cast<unsigned long long>(nnz), bytes[r]);
  }
  bytesReceived = total - bytes[comm->rank];
  return dctSuccess;
}

}  // namespace dct
