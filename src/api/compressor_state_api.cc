// dctCompressorSaveState / dctCompressorLoadState: argument checks; the
// work is core/compressor_state.cc.
#include "api/guard.h"
#include "base/debug.h"
#include "core/compressor.h"
#include "core/compressor_state.h"

using namespace dct;

namespace {

// The state string is host memory (a device pointer would be read as one).
dctResult_t checkHostState(dctCompressor_t c, const void* state, const char* fn) {
  if (twinFor(state).device) return fail(c->comm, dctInvalidArgument, "%s: state is device memory; give host memory", fn);
  return dctSuccess;
}

}  // namespace

extern "C" dctResult_t dctCompressorSaveState(dctCompressor_t c, void* state, size_t* bytes, void* stream) {
  const char* fn = "dctCompressorSaveState";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  return guarded(c->comm, fn, [&] {
    if (bytes == nullptr) return fail(c->comm, dctInvalidArgument, "%s: bytes is NULL", fn);
    // A queued step's state first: the size depends on it (a global top-k
    // owner residual is saved only when nonzero).
    DCTCHECK(settleStream(c));
    size_t need = 0;
    DCTCHECK(savedStateBytes(c, &need));
    if (state == nullptr) {
      *bytes = need;
      return dctSuccess;
    }
    if (*bytes < need)
      return fail(c->comm, dctInvalidArgument, "%s: the buffer holds %zu bytes, the state needs %zu", fn, *bytes, need);
    DCTCHECK(checkHostState(c, state, fn));
    DCTCHECK(saveState(c, static_cast<unsigned char*>(state), need, stream, fn));
    *bytes = need;
    return dctSuccess;
  });
}

extern "C" dctResult_t dctCompressorLoadState(dctCompressor_t c, const void* state, size_t bytes, void* stream) {
  const char* fn = "dctCompressorLoadState";
  if (!validCompressor(c)) return fail(nullptr, dctInvalidArgument, "%s: invalid compressor", fn);
  return guarded(c->comm, fn, [&] {
    if (state == nullptr) return fail(c->comm, dctInvalidArgument, "%s: state is NULL", fn);
    DCTCHECK(checkHostState(c, state, fn));
    DCTCHECK(settleStream(c));
    DCTCHECK(loadState(c, static_cast<const unsigned char*>(state), bytes, stream, fn));
    c->stream.live = false;  // the next fixed-capacity step publishes the loaded state
    return dctSuccess;
  });
}
