// Exceptions never cross the C boundary: the guards that turn them into
// dctResult_t, for an entry point's body and for local work inside a
// collective.
#pragma once

#include "base/caught.h"
#include "base/debug.h"
#include "dct/dct.h"

namespace dct {

// Runs an entry point's body; no exception ever crosses the C boundary.
// Whatever failed underneath (a kernel, CUDA, a transport) reaches the
// comm's last error, with a generic message if nothing recorded one. This
// is the last resort only: an exception that reaches it has unwound out of
// any collective the body was in, so the work inside a collective's
// transaction must not throw (kernels: kernels/no_throw.h; local work:
// caught(); buffers: base/buffer.h).
template <typename Body>
dctResult_t guarded(dctComm_t comm, const char* fn, Body&& body) noexcept {
  const unsigned long long before = threadFailureCount();
  const dctResult_t res = caught(comm, fn, body);
  if (res == dctSuccess) return res;
  if (threadFailureCount() == before) return fail(comm, res, "%s: %s", fn, dctGetErrorString(res));
  if (comm != nullptr) setCommLastError(comm, threadLastErrorMessage());
  return res;
}

}  // namespace dct
