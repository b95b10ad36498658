#include "algo/agree.h"

#include "transport/comm.h"
#include "base/debug.h"

namespace dct {

dctResult_t agree(dctComm_t comm, const CallHeader& mine, std::vector<CallHeader>& all, void* stream,
                  const char* fn) {
  all.assign(comm->size, CallHeader{});
  DCTCHECK(comm->transport->allgather(comm, &mine, all.data(), sizeof(CallHeader), stream));
  if (mine.localError != dctSuccess) return static_cast<dctResult_t>(mine.localError);
  for (int r = 0; r < comm->size; r++) {
    const CallHeader& h = all[r];
    if (h.localError != dctSuccess)
      return fail(comm, dctInvalidUsage, "%s: rank %d rejected its arguments (%s)", fn, r,
                  dctGetErrorString(static_cast<dctResult_t>(h.localError)));
    const char* what = h.count != mine.count         ? "count"
                       : h.datatype != mine.datatype   ? "datatype"
                       : h.op != mine.op               ? "op"
                       : h.algorithm != mine.algorithm ? "algorithm"
                       : h.mode != mine.mode           ? "phase (warm-up/query)"
                                                       : nullptr;
    if (what)
      return fail(comm, dctInvalidUsage,
                  "%s: ranks disagree on %s (rank %d: count %llu, this rank %d: count %llu)", fn,
                  what, r, (unsigned long long)h.count, comm->rank,
                  (unsigned long long)mine.count);
  }
  return dctSuccess;
}

}  // namespace dct
