// What the plan-based collectives (the DCT-MP all-to-all, the DES
// reduce-scatter) share beyond their calls' header (plan_call_header.h):
// one alltoallv's per-peer blocks (sizes and where each starts in a
// contiguous buffer), and the exchange of a plan's wire buffers.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/agree.h"
#include "algo/plan_call_header.h"
#include "base/debug.h"
#include "transport/comm.h"

namespace dct {

// A kernel's failure on peer q's block of `bytes`: out of memory is said as
// such, anything else makes it a malformed block.
inline dctResult_t blockFailed(dctComm_t comm, dctResult_t res, const char* fn, int q, size_t bytes) {
  if (res == dctOutOfMemory) return fail(comm, res, "%s: out of host memory on the block from rank %d", fn, q);
  return fail(comm, dctInternalError, "%s: malformed block from rank %d (%zu bytes)", fn, q, bytes);
}

struct Blocks {
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  // Room for P blocks (throws): a reservation step's, so that place() and
  // resizing to P never allocate after the agreement.
  void reserve(size_t P) {
    bytes.reserve(P);
    offsets.reserve(P);
  }
  void place() {
    offsets.resize(bytes.size());
    total = 0;
    for (size_t q = 0; q < bytes.size(); q++) {
      offsets[q] = total;
      total += bytes[q];
    }
  }
};

// Room in the plan's wire buffers for what goes out and what arrives, and
// the transport's staging for both.
template <typename Plan>
dctResult_t reserveBlocks(Plan p, const Blocks& out, const Blocks& in, void* stream) {
  DCTCHECK(p->wireOut.reserve(out.total));
  DCTCHECK(p->wireIn.reserve(in.total));
  const size_t most = out.total > in.total ? out.total : in.total;
  return p->comm->transport->prepare(p->comm, p->wireIn.as(), most, stream);
}

// The alltoallv of the blocks; allBytes: what every rank sends together.
template <typename Plan>
dctResult_t exchangeBlocks(Plan p, const Blocks& out, const Blocks& in, size_t allBytes, void* stream) {
  return p->comm->transport->alltoallv(p->comm, p->wireOut.as(), out.bytes.data(), out.offsets.data(),
                                       p->wireIn.as(), in.bytes.data(), in.offsets.data(), allBytes, stream);
}

}  // namespace dct
