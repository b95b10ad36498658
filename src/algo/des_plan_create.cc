// dctDesPlanCreate's collective part: the ranks agree on the row format
// and the split before any rank builds its plan (core/des_plan.h), so a
// mismatch fails every rank alike.
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "base/debug.h"
#include "core/des_plan.h"
#include "transport/comm.h"

namespace dct {
namespace {

struct DesPlanHeader {
  uint64_t rowLength = 0;    // must match
  double density = 0;        // must match: 1 is the exact plan
  int32_t datatype = 0;      // must match
  int32_t rowSelection = 0;  // must match: a thinned plan's config.rowSelection, -1 exact
  int32_t localError = 0;    // dctResult_t of this rank's own checks
  int32_t pad = 0;
};

dctResult_t checkPeer(dctComm_t comm, const DesPlanHeader& mine, const DesPlanHeader& h, int r, const char* fn) {
  if (h.rowLength != mine.rowLength)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on rowLength (rank %d: %llu, this rank %d: %llu)", fn, r,
                (unsigned long long)h.rowLength, comm->rank, (unsigned long long)mine.rowLength);
  const char* what = h.datatype != mine.datatype ? "datatype"
                     : std::memcmp(&h.density, &mine.density, sizeof(double)) != 0 ? "config.density (DCT_DENSITY)"
                                                                                     : nullptr;
  if (what)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on %s (rank %d differs from this rank %d)", fn, what, r,
                comm->rank);
  if (h.rowSelection != mine.rowSelection)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on config.rowSelection (rank %d: %d, this rank %d: %d)",
                fn, r, h.rowSelection, comm->rank, mine.rowSelection);
  return dctSuccess;
}

// Every rank's split against this rank's; the same verdict everywhere.
dctResult_t checkSplits(dctComm_t comm, const std::vector<uint64_t>& mine, const std::vector<uint64_t>& all,
                        const char* fn) {
  const int P = comm->size;
  for (int r = 0; r < P; r++)
    for (int q = 0; q < P; q++)
      if (all[size_t(r) * P + q] != mine[q])
        return fail(comm, dctInvalidUsage, "%s: ranks disagree on rowsPerRank[%d] (rank %d: %llu, this rank %d: %llu)",
                    fn, q, r, (unsigned long long)all[size_t(r) * P + q], comm->rank, (unsigned long long)mine[q]);
  return dctSuccess;
}

}  // namespace

dctResult_t createDesPlan(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength, const dctDataType_t& dtype,
                          const dctConfig_t& resolved, dctResult_t localError, dctDesPlan_t* out) {
  const char* fn = "dctDesPlanCreate";
  const int P = comm->size;
  std::unique_ptr<dctDesPlan> p(new (std::nothrow) dctDesPlan());
  if (localError == dctSuccess && p == nullptr) localError = fail(comm, dctOutOfMemory, "%s: out of memory", fn);
  const uint64_t id = comm->plansCreated++;
  DesPlanHeader mine;
  mine.localError = localError;
  mine.rowLength = rowLength;
  std::memcpy(&mine.datatype, &dtype, sizeof(mine.datatype));
  if (localError == dctSuccess) {  // dtype is a valid enum only then
    mine.density = resolved.density;
    mine.rowSelection = rowFormat(resolved.density, rowLength, dtype).maskFormat >= 0 ? resolved.rowSelection : -1;
  }
  std::vector<DesPlanHeader> all;
  std::vector<uint64_t> split, gathered;
  DCTCHECK(agree(comm, mine, all, nullptr, fn, [&] {  // room for every rank's split
    split.assign(rowsPerRank, rowsPerRank + P);
    gathered.assign(size_t(P) * P, 0);
    return dctSuccess;
  }));

  dctResult_t res = comm->transport->allgather(comm, split.data(), gathered.data(), split.size() * 8, nullptr);
  if (res == dctSuccess) res = checkSplits(comm, split, gathered, fn);
  // The plan is built before the last vote: it exists on every rank or on none.
  if (res == dctSuccess) res = caught(comm, fn, [&] {
    buildDesPlan(*p, PlanPlace{comm, comm->rank, P, id}, rowsPerRank, rowLength, dtype, resolved);
    return dctSuccess;
  });
  DCTCHECK(vote(comm, res, nullptr, fn, "split check"));
  *out = p.release();
  return dctSuccess;
}

}  // namespace dct
