// DCT-DP sparse allreduce driver: plan, warm-up or compress, exchange.
#include "algo/algorithms.h"
#include "core/comm.h"
#include "core/cost_model.h"
#include "core/debug.h"

namespace dct {
namespace {

size_t messageBytes(size_t nnz, int indexBytes, size_t valueBytes) {
  return alignedIndexBytes(nnz, indexBytes) + nnz * valueBytes;
}

// Copies the selection into `wire` as one contiguous run of bytes: indices
// (padded to 8 bytes), then values. One message, one exchange.
dctResult_t pack(dctCompressor_t c, Message& msg, void* stream) {
  const size_t idxBytes = alignedIndexBytes(msg.nnz, c->indexBytes);
  const size_t valBytes = msg.nnz * dtypeSize(c->dtype);
  DCTCHECK(c->wire.reserve(idxBytes + valBytes));
  char* wire = c->wire.as<char>();
  DCTCHECK(c->ops->copy(c->kernels, wire, msg.indices, msg.nnz * c->indexBytes, stream));
  DCTCHECK(c->ops->copy(c->kernels, wire + idxBytes, msg.values, valBytes, stream));
  msg.indices = wire;
  msg.values = wire + idxBytes;
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

dctResult_t gatherCounts(dctCompressor_t c, dctComm_t comm, uint64_t mine, void* stream) {
  c->lastCounts.resize(comm->size);
  return comm->transport->allgather(comm, &mine, c->lastCounts.data(), sizeof(mine), stream);
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
    if (c->config.algorithm == dctAlgoAuto) DCTCHECK(gatherCounts(c, comm, c->count, stream));
    size_t bytes = c->count * dtypeSize(c->dtype);
    finishStep(c, bytes, bytes, dctAlgoDense);
    return dctSuccess;
  }
  Message msg;
  msg.dense = recvbuf;
  DCTCHECK(compressStep(c, sendbuf, msg, stream));
  // Auto forecasts the next step from everyone's counts.
  if (c->config.algorithm == dctAlgoAuto) DCTCHECK(gatherCounts(c, comm, msg.nnz, stream));
  DCTCHECK(comm->transport->allreduce(comm, recvbuf, recvbuf, c->count, c->dtype, stream));
  size_t bytes = c->count * dtypeSize(c->dtype);
  finishStep(c, bytes, bytes, dctAlgoDense);
  return dctSuccess;
}

dctResult_t allgatherStep(const void* sendbuf, void* recvbuf, dctCompressor_t c,
                          dctComm_t comm, void* stream) {
  Message msg;
  msg.storage = &c->selection;
  DCTCHECK(compressStep(c, sendbuf, msg, stream));
  DCTCHECK(pack(c, msg, stream));
  DCTCHECK(gatherCounts(c, comm, msg.nnz, stream));
  size_t received = 0;
  DCTCHECK(allreduceAllgather(c, comm, c->lastCounts, recvbuf, received, stream));
  finishStep(c, messageBytes(msg.nnz, c->indexBytes, dtypeSize(c->dtype)), received,
             dctAlgoAllgather);
  return dctSuccess;
}

}  // namespace

dctAlgorithm_t planAlgorithm(dctCompressor_t c, dctComm_t comm) {
  if (inWarmup(c)) return dctAlgoDense;
  auto algo = static_cast<dctAlgorithm_t>(c->config.algorithm);
  if (algo != dctAlgoAuto) return algo;
  // Forecast this step's counts: last step's (identical on every rank), or
  // k per rank before the first exchange.
  std::vector<uint64_t> forecast = c->lastCounts;
  if (forecast.size() != static_cast<size_t>(comm->size)) forecast.assign(comm->size, targetNnz(c));
  CostInputs in{comm->size, c->count, dtypeSize(c->dtype), static_cast<size_t>(c->indexBytes),
                forecast.data()};
  return chooseAlgorithm(costParamsFromEnv(), in);
}

dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, dctRedOp_t op,
                            dctAlgorithm_t plan, dctCompressor_t c, dctComm_t comm,
                            void* stream) {
  if (inWarmup(c)) DCTCHECK(warmupStep(sendbuf, recvbuf, c, comm, stream));
  else if (plan == dctAlgoDense) DCTCHECK(denseStep(sendbuf, recvbuf, c, comm, stream));
  else DCTCHECK(allgatherStep(sendbuf, recvbuf, c, comm, stream));
  DCT_TRACE("step %llu: nnz %llu tau %g algo %d", (unsigned long long)c->stats.step,
            (unsigned long long)c->stats.nnz, c->tau, static_cast<int>(plan));
  if (op == dctAvg && comm->size > 1)
    DCTCHECK(c->ops->scale(c->kernels, recvbuf, c->count, c->dtype, 1.0 / comm->size, stream));
  return dctSuccess;
}

dctResult_t allreduceAllgather(dctCompressor_t c, dctComm_t comm, const std::vector<uint64_t>& nnz,
                               void* recvbuf, size_t& bytesReceived, void* stream) {
  const size_t valueBytes = dtypeSize(c->dtype);
  std::vector<size_t> bytes(comm->size), offsets(comm->size);
  size_t total = 0;
  for (int r = 0; r < comm->size; r++) {
    offsets[r] = total;
    bytes[r] = messageBytes(nnz[r], c->indexBytes, valueBytes);
    total += bytes[r];
  }
  DCTCHECK(c->gathered.reserve(total));
  char* all = c->gathered.as<char>();
  DCTCHECK(comm->transport->allgatherv(comm, c->wire.as(), bytes[comm->rank], all, bytes.data(),
                                       offsets.data(), stream));
  DCTCHECK(c->ops->zero(c->kernels, recvbuf, c->count * valueBytes, stream));
  // Rank order, same on every rank: bit-identical sums everywhere.
  for (int r = 0; r < comm->size; r++) {
    char* base = all + offsets[r];
    ScatterArgs add{recvbuf, c->count, c->dtype, c->indexBytes, base,
                    base + alignedIndexBytes(nnz[r], c->indexBytes), nnz[r], true};
    DCTCHECK(c->ops->scatterAdd(c->kernels, &add, stream));
  }
  bytesReceived = total - bytes[comm->rank];
  return dctSuccess;
}

}  // namespace dct
