// Setting up the 1-bit state's buffers in the compressor's twin: the step
// (algo/onebit_allreduce.cc) and a loaded state (compressor_state.cc).
#include "core/compressor.h"
#include "core/onebit_state.h"

#include "base/debug.h"
#include "base/dtype.h"

namespace dct {
namespace {

dctResult_t allocate(dctCompressor_t c, void* stream) {
  OnebitState& st = c->onebit;
  const OnebitChunks chunks(c->count, c->ranks);
  const size_t scaleBytes = dtypeSize(c->accType);
  const OnebitArena arena(chunks, scaleBytes);
  const size_t errorBytes = c->count * scaleBytes, serverBytes = chunks.length(c->rank) * scaleBytes;
  st.arena.bind(c->ops, c->kernels);
  for (TwinBuffer& b : st.serverErrors) b.bind(c->ops, c->kernels);
  DCTCHECK(st.arena.reserve(arena.bytes));
  // Zeroed once: sign words past a chunk's end are never written, and go
  // on the wire as zeros.
  DCTCHECK(c->ops->zero(c->kernels, st.arena.as(), arena.bytes, stream));
  DCTCHECK(st.serverErrors[0].reserve(serverBytes));
  DCTCHECK(st.serverErrors[1].reserve(serverBytes));
  DCTCHECK(c->ops->zero(c->kernels, st.serverErrors[0].as(), serverBytes, stream));
  st.serverCommitted = 0;
  st.serverPending = false;
  // The worker error is the residual, allocated and zeroed by bindOps.
  if (c->residuals[0].capacity() < errorBytes || c->residuals[1].capacity() < errorBytes) return dctInternalError;
  st.ops = c->ops;
  st.kernels = c->kernels;
  return dctSuccess;
}

}  // namespace

dctResult_t onebitSetUp(dctCompressor_t c, void* stream) {
  OnebitState& st = c->onebit;
  if (st.readyFor(c->ops, c->kernels)) return dctSuccess;
  st.release();
  dctResult_t res = allocate(c, stream);
  if (res != dctSuccess) st.release();  // a later step starts over
  return res;
}

}  // namespace dct
