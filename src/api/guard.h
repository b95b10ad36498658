// Exceptions never cross the C boundary: the guards that turn them into
// dctResult_t, for an entry point's body and for local work inside a
// collective.
#pragma once

#include <exception>
#include <new>

#include "base/debug.h"
#include "dct/dct.h"

namespace dct {

// Runs local work that may throw (allocations, checks) as an error code, in
// place: a collective's rank must go on to take part in what follows (its
// agreement, the votes) rather than unwind out of the transaction and leave
// the others waiting. Use it for local work before and between collectives.
template <typename Body>
dctResult_t caught(dctComm_t comm, const char* fn, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(comm, dctOutOfMemory, "%s: out of host memory", fn);
  } catch (const std::exception& e) {
    return fail(comm, dctInternalError, "%s: unexpected exception: %s", fn, e.what());
  } catch (...) {
    return fail(comm, dctInternalError, "%s: unexpected exception", fn);
  }
}

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
