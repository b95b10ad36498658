// A transport is a struct of function pointers (MPI now, NCCL later). All
// sizes are in bytes except allreduce's element count; all calls are
// collective over the comm and stream-ordered where the backend has streams.
#pragma once

#include <cstddef>

#include "dct/dct.h"

namespace dct {

struct Transport {
  const char* name;
  dctResult_t (*allgather)(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank,
                           void* stream);
  dctResult_t (*allgatherv)(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                            const size_t* recvBytes, const size_t* recvOffsets, void* stream);
  dctResult_t (*allreduce)(dctComm_t comm, const void* send, void* recv, size_t count,
                           dctDataType_t datatype, void* stream);  // sum
  void (*destroy)(dctComm_t comm);
};

}  // namespace dct
