// Collective algorithms. Arguments have been checked and agreed on by every
// rank (api/ + algo/agree) before any of these runs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/compressor.h"
#include "dct/dct.h"

namespace dct {

// The algorithm this step will use: the configured one, or auto's choice
// from last step's global counts (k per rank before the first step). Every
// rank computes the same plan; the agreement header double-checks it.
dctAlgorithm_t planAlgorithm(dctCompressor_t c, dctComm_t comm);

// DCT-DP sparse allreduce: compress (COO, or densely for the dense plan),
// exchange, reduce.
dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, dctRedOp_t op,
                            dctAlgorithm_t plan, dctCompressor_t c, dctComm_t comm,
                            void* stream);

// Allgather exchange of this rank's packed message in c->wire, then the
// rank-order scatter-add of all messages into recvbuf.
dctResult_t allreduceAllgather(dctCompressor_t c, dctComm_t comm,
                               const std::vector<RankMessage>& messages, void* recvbuf,
                               size_t& bytesReceived, void* stream);

// Sparse allgather of explicit COO into caller buffers; nnz per rank known.
dctResult_t sparseAllgather(dctComm_t comm, const void* values, const uint32_t* indices,
                            size_t valueBytes, const std::vector<uint64_t>& nnz,
                            void* recvValues, uint32_t* recvIndices, void* stream);

}  // namespace dct
