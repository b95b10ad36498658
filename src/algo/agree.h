// Collective argument agreement. Each collective first allgathers a small
// header; if any rank saw a bad argument, or the ranks disagree on what they
// were asked to do, every rank returns an error instead of some ranks
// waiting forever in a mismatched exchange.
#pragma once

#include <cstdint>
#include <vector>

#include "dct/dct.h"

namespace dct {

struct CallHeader {
  uint64_t count = 0;     // must match
  uint64_t nnz = 0;       // per rank (allgather)
  uint64_t capacity = 0;  // per rank (allgather receive capacity)
  int32_t datatype = 0;   // must match
  int32_t op = 0;         // must match
  int32_t algorithm = 0;  // must match
  int32_t mode = 0;       // must match (warm-up vs sparse, query vs fetch)
  int32_t localError = 0; // dctResult_t of this rank's own argument checks
  int32_t pad = 0;
};

// On success `all` holds every rank's header. On failure returns
// `localError` on the rank that had one and dctInvalidUsage elsewhere, with
// a message naming the first offending rank. The exchange runs on the
// call's stream (NCCL: no legacy-default-stream sync).
dctResult_t agree(dctComm_t comm, const CallHeader& mine, std::vector<CallHeader>& all, void* stream,
                  const char* fn);

}  // namespace dct
