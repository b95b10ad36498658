// Local work that may throw (allocations, checks) as an error code, for the
// entry points' guards (api/guard.h) and the collectives' reservation steps
// (algo/agree.h).
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

}  // namespace dct
