// dctSparseAllreduce in the fixed-capacity mode (stream_step.cc).
#pragma once

#include "dct/dct.h"

namespace dct {

// One fixed-capacity step of c (fixedCapacity(c), past its warm-up), whose
// buffers were checked locally (localError; a count that is not the
// compressor's fails the step on every rank). On
// a host twin the same transaction as sparseAllreduce; on a device it is
// queued on `stream` and its outcome arrives asynchronously
// (dctCommGetAsyncError).
dctResult_t streamStep(const void* sendbuf, void* recvbuf, size_t count, const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm,
                       void* stream, dctResult_t localError, const char* fn);

}  // namespace dct
