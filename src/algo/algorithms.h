// Collective algorithms. Arguments have been checked and agreed on by every
// rank (api/ + algo/agree) before any of these runs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/compressor.h"
#include "dct/dct.h"

namespace dct {

// DCT-DP sparse allreduce: compress, pick an algorithm, exchange, reduce.
dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, dctRedOp_t op,
                            dctCompressor_t c, dctComm_t comm, void* stream);

// The exchanges, given this rank's packed message in c->wire.
dctResult_t allreduceAllgather(dctCompressor_t c, dctComm_t comm, const Message& msg,
                               const std::vector<uint64_t>& nnz, void* recvbuf,
                               size_t& bytesReceived, void* stream);
dctResult_t allreduceDense(dctCompressor_t c, dctComm_t comm, const Message& msg,
                           void* recvbuf, void* stream);

// Sparse allgather of explicit COO into caller buffers; nnz per rank known.
dctResult_t sparseAllgather(dctComm_t comm, const void* values, const uint32_t* indices,
                            size_t valueBytes, const std::vector<uint64_t>& nnz,
                            void* recvValues, uint32_t* recvIndices, void* stream);

}  // namespace dct
