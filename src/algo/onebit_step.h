// The 1-bit allreduce's queued step (onebit_step.cc) and what it shares
// with the synchronous one (onebit_allreduce.cc).
#pragma once

#include <cstddef>

#include "dct/dct.h"
#include "kernels/onebit_kernels.h"

namespace dct {

// c's 1-bit steps queue on its stream: a device twin (or the CPU twin with
// StreamSetup::asyncForTesting) past its warm-up, its first 1-bit step
// (synchronous: it agrees the header and sets up the buffers) done.
bool onebitQueues(dctCompressor_t c);

// After the first synchronous 1-bit step of a twin that queues: what the
// queued steps count, and that they may start.
void onebitAgreed(dctCompressor_t c, size_t sent, size_t received);

// The worker slots' alltoallv sizes and offsets into c->rankArrays (reserved
// for comm->size ranks): whole slots, so that each carries its digest
// (onebit_kernels.h: kOnebitDigestBytes); returns what all ranks send
// together.
size_t onebitExchangeSizes(dctCompressor_t c, dctComm_t comm, size_t slotBytes);

// One queued step (onebit_step_args.h). A rank whose own checks failed
// (localError) still queues the collectives with its compressor's sizes
// and votes its error; the outcome arrives through the comm's sticky
// error (dctCommGetAsyncError), as the fixed-capacity step's does.
dctResult_t onebitQueuedStep(const void* sendbuf, void* recvbuf, size_t count, const dctRedOp_t& op, dctCompressor_t c,
                             dctComm_t comm, void* stream, dctResult_t localError, const char* fn);

}  // namespace dct
