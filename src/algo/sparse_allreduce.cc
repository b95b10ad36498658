// DCT-DP sparse allreduce driver: warm-up or compress, choose, exchange.
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

}  // namespace

dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, dctRedOp_t op,
                            dctCompressor_t c, dctComm_t comm, void* stream) {
  if (inWarmup(c)) {
    DCTCHECK(warmupStep(sendbuf, recvbuf, c, comm, stream));
  } else {
    Message msg;
    msg.storage = &c->selection;
    DCTCHECK(compressStep(c, sendbuf, msg, stream));
    DCTCHECK(pack(c, msg, stream));
    const size_t valueBytes = dtypeSize(c->dtype);
    const size_t ownBytes = messageBytes(msg.nnz, c->indexBytes, valueBytes);
    auto algo = static_cast<dctAlgorithm_t>(c->config.algorithm);
    std::vector<uint64_t> nnz(comm->size);
    if (algo != dctAlgoDense) {
      uint64_t mine = msg.nnz;
      DCTCHECK(comm->transport->allgather(comm, &mine, nnz.data(), sizeof(mine), stream));
    }
    if (algo == dctAlgoAuto) {
      CostInputs in{comm->size, c->count, valueBytes, static_cast<size_t>(c->indexBytes), nnz.data()};
      algo = chooseAlgorithm(costParamsFromEnv(), in);
    }
    size_t received = c->count * valueBytes;
    if (algo == dctAlgoAllgather) {
      DCTCHECK(allreduceAllgather(c, comm, msg, nnz, recvbuf, received, stream));
      finishStep(c, ownBytes, received, algo);
    } else {
      DCTCHECK(allreduceDense(c, comm, msg, recvbuf, stream));
      finishStep(c, received, received, algo);
    }
    DCT_TRACE("step %llu: nnz %zu tau %g algo %d", (unsigned long long)c->stats.step, msg.nnz,
              c->tau, static_cast<int>(algo));
  }
  if (op == dctAvg && comm->size > 1)
    DCTCHECK(c->ops->scale(c->kernels, recvbuf, c->count, c->dtype, 1.0 / comm->size, stream));
  return dctSuccess;
}

dctResult_t allreduceAllgather(dctCompressor_t c, dctComm_t comm, const Message& msg,
                               const std::vector<uint64_t>& nnz, void* recvbuf,
                               size_t& bytesReceived, void* stream) {
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
  (void)msg;
  return dctSuccess;
}

dctResult_t allreduceDense(dctCompressor_t c, dctComm_t comm, const Message& msg,
                           void* recvbuf, void* stream) {
  DCTCHECK(c->ops->zero(c->kernels, recvbuf, c->count * dtypeSize(c->dtype), stream));
  ScatterArgs add{recvbuf, c->count, c->dtype, c->indexBytes, msg.indices, msg.values, msg.nnz, true};
  DCTCHECK(c->ops->scatterAdd(c->kernels, &add, stream));
  return comm->transport->allreduce(comm, recvbuf, recvbuf, c->count, c->dtype, stream);
}

}  // namespace dct
