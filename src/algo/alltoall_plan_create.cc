// dctAlltoallPlanCreate's collective part: the ranks agree on the row
// format and check every split against every other before any rank builds
// its plan (core/alltoall_plan.h), so a mismatch fails every rank alike.
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/alltoall_call.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/alltoall_plan.h"
#include "transport/comm.h"

namespace dct {
namespace {

struct AlltoallPlanHeader {
  uint64_t rowLength = 0;     // must match
  uint64_t keptPerRow = 0;    // must match: K of config.density
  int32_t datatype = 0;       // must match
  int32_t rowSelection = 0;   // must match
  int32_t localError = 0;     // dctResult_t of this rank's own checks
  int32_t wireType = 0;       // must match: config.wireType, resolved
};

dctResult_t checkPeer(dctComm_t comm, const AlltoallPlanHeader& mine, const AlltoallPlanHeader& h, int r,
                      const char* fn) {
  if (h.rowLength != mine.rowLength)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on rowLength (rank %d: %llu, this rank %d: %llu)", fn, r,
                (unsigned long long)h.rowLength, comm->rank, (unsigned long long)mine.rowLength);
  if (h.datatype != mine.datatype || h.wireType != mine.wireType)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on %s (rank %d differs from this rank %d)", fn,
                h.datatype != mine.datatype ? "datatype" : "config.wireType (DCT_WIRE_TYPE)", r, comm->rank);
  if (h.keptPerRow != mine.keptPerRow || h.rowSelection != mine.rowSelection)
    return fail(comm, dctInvalidUsage,
                "%s: ranks disagree on the selection (rank %d keeps %llu per row with rowSelection %d, this rank "
                "%llu with %d)",
                fn, r, (unsigned long long)h.keptPerRow, h.rowSelection, (unsigned long long)mine.keptPerRow,
                mine.rowSelection);
  return dctSuccess;
}

// Every rank's split against every other's: rank p's sendRows[q] must be
// rank q's recvRows[p]. The same verdict on every rank (same data).
dctResult_t checkSplits(dctComm_t comm, const std::vector<uint64_t>& all, const char* fn) {
  const int P = comm->size;
  for (int p = 0; p < P; p++)
    for (int q = 0; q < P; q++) {
      const uint64_t sent = all[size_t(p) * 2 * P + q], expected = all[size_t(q) * 2 * P + P + p];
      if (sent != expected)
        return fail(comm, dctInvalidUsage, "%s: rank %d sends %llu rows to rank %d, which expects %llu", fn, p,
                    (unsigned long long)sent, q, (unsigned long long)expected);
    }
  return dctSuccess;
}

}  // namespace

dctResult_t createAlltoallPlan(dctComm_t comm, const size_t* sendRows, const size_t* recvRows, size_t rowLength,
                               const dctDataType_t& dtype, const dctConfig_t& resolved, dctResult_t localError,
                               dctAlltoallPlan_t* out) {
  const char* fn = "dctAlltoallPlanCreate";
  const int P = comm->size;
  std::unique_ptr<dctAlltoallPlan> p(new (std::nothrow) dctAlltoallPlan());
  if (localError == dctSuccess && p == nullptr) localError = fail(comm, dctOutOfMemory, "%s: out of memory", fn);
  const uint64_t id = comm->plansCreated++;
  AlltoallPlanHeader mine;
  mine.localError = localError;
  mine.rowLength = rowLength;
  std::memcpy(&mine.datatype, &dtype, sizeof(mine.datatype));
  if (localError == dctSuccess) {
    mine.keptPerRow = rowKeep(resolved.density, rowLength);
    mine.rowSelection = resolved.rowSelection;
    mine.wireType = wireTypeFor(resolved.wireType, dtype);
  }
  std::vector<AlltoallPlanHeader> all;
  std::vector<uint64_t> splits, gathered;
  DCTCHECK(agree(comm, mine, all, nullptr, fn, [&] {  // room for every rank's split
    splits.assign(size_t(2) * P, 0);
    gathered.assign(size_t(2) * P * P, 0);
    return dctSuccess;
  }));

  for (int q = 0; q < P; q++) {
    splits[q] = sendRows[q];
    splits[P + q] = recvRows[q];
  }
  dctResult_t res = comm->transport->allgather(comm, splits.data(), gathered.data(), splits.size() * 8, nullptr);
  if (res == dctSuccess) res = checkSplits(comm, gathered, fn);
  // The plan is built before the last vote: it exists on every rank or on none.
  if (res == dctSuccess) res = caught(comm, fn, [&] {
    buildAlltoallPlan(*p, PlanPlace{comm, comm->rank, P, id}, sendRows, recvRows, rowLength, dtype, resolved);
    p->chunks = forwardChunks(*p, gathered);
    return dctSuccess;
  });
  DCTCHECK(vote(comm, res, nullptr, fn, "split check"));
  *out = p.release();
  return dctSuccess;
}

}  // namespace dct
