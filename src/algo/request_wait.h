// Polling a nonblocking collective's request (Transport::test), shared by
// the pipelined allreduce and the pipelined all-to-all.
#pragma once

#include <thread>

#include "dct/dct.h"
#include "transport/comm.h"

namespace dct {

// One test() of `request`; `done` as test() sets it. Not done while the
// caller only waits (it tests again at once): yield first, so that a rank
// sharing its core (more ranks than cores) lets the others get on with
// their chunks instead of losing half the core to a spin.
inline dctResult_t testRequest(dctComm_t comm, void* request, bool waiting, int& done) {
  done = 0;
  const dctResult_t res = comm->transport->test(comm, request, &done);
  if (!done && waiting) std::this_thread::yield();
  return res;
}

}  // namespace dct
