// The split algorithm (split_allreduce.h has the phases and their votes).
#include "algo/split_allreduce.h"

#include <cstdint>

#include "algo/agree.h"
#include "algo/global_topk.h"
#include "algo/packed_message.h"
#include "algo/split_forms.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr const char* kFn = kSplitFn;

// Every rank's (bytes, nnz) of its piece for this rank. Host transports
// exchange just those (16 bytes per peer: O(P) per rank, not O(P^2)); NCCL,
// which moves device memory only, gathers the whole P x P table through its
// host staging.
dctResult_t pieceSizes(dctComm_t comm, const SplitPieces& pieces, RankArrays& a, void* stream) {
  const Transport* t = comm->transport;
  const int P = comm->size, me = comm->rank;
  std::vector<uint64_t>& theirs = a.theirs;
  theirs.assign(2 * size_t(P), 0);
  if (t->alltoall) return t->alltoall(comm, pieces.sizes.data(), theirs.data(), 2 * sizeof(uint64_t), stream);
  if (t->hostBuffers) {
    std::vector<size_t>&bytes = a.formBytes, &offsets = a.formOffsets;  // free until the ranges' layout
    bytes.assign(P, 2 * sizeof(uint64_t));
    offsets.assign(P, 0);
    for (int q = 0; q < P; q++) offsets[q] = q * 2 * sizeof(uint64_t);
    return t->alltoallv(comm, pieces.sizes.data(), bytes.data(), offsets.data(), theirs.data(), bytes.data(),
                        offsets.data(), size_t(P) * P * 2 * sizeof(uint64_t), stream);
  }
  std::vector<uint64_t>& all = a.table;
  all.assign(2 * size_t(P) * P, 0);
  const dctResult_t res = t->allgather(comm, pieces.sizes.data(), all.data(), 2 * P * sizeof(uint64_t), stream);
  for (int r = 0; r < P; r++) {
    theirs[2 * r] = all[2 * (size_t(r) * P + me)];
    theirs[2 * r + 1] = all[2 * (size_t(r) * P + me) + 1];
  }
  return res;
}

// Writes range q from its gathered form: a copy, or zeros + its entries.
// `check`: validate a packed form only, write nothing; `checked`: it was.
dctResult_t writeRange(const Split& s, int q, const char* block, uint64_t bytes, uint64_t nnz, bool check = false,
                       bool checked = false) {
  dctCompressor_t c = s.c;
  if (nnz == kSplitDenseForm) return check ? dctSuccess : c->ops->copy(c->kernels, s.range(q), block, bytes, s.stream);
  PackedMessage m = packedView(block, bytes, nnz, s.sumBytes);
  MergeArgs merge{s.range(q), s.length(q), c->accType, c->accType, c->indexBytes, &m, 1};
  merge.checkOnly = check;
  merge.checked = checked;
  if (dctResult_t res = c->ops->mergePacked(c->kernels, &merge, s.stream); res != dctSuccess)
    return merge.malformed < 0 ? res : fail(s.comm, res, "%s: malformed range from rank %d", kFn, q);
  return dctSuccess;
}

// Reserves `bytes` of c->gathered for a data op moving up to `extent` bytes.
dctResult_t reserveGathered(const Split& s, size_t bytes, size_t extent) {
  DCTCHECK(s.c->gathered.reserve(bytes));
  return s.comm->transport->prepare(s.comm, s.c->gathered.as(), extent > bytes ? extent : bytes, s.stream);
}

// The second phase from this rank's range form (when res is dctSuccess):
// every rank learns every form, gathers them, and writes or checks them.
dctResult_t shareRanges(const Split& s, dctResult_t res, const void* form, const uint64_t (&mine)[2], PhaseTimer& clock,
                        size_t& sent, size_t& received, SplitRanges ranges) {
  dctCompressor_t c = s.c;
  dctComm_t comm = s.comm;
  const int P = s.P, me = s.me;
  const Transport* t = comm->transport;
  RankArrays& a = c->rankArrays;
  void* stream = s.stream;
  clock.lap(dctPhaseReduce);

  // Range forms: every rank's, then room for all of them, 8-byte aligned.
  std::vector<uint64_t>& forms = a.forms;
  forms.assign(2 * size_t(P), 0);
  const dctResult_t shared = t->allgather(comm, mine, forms.data(), sizeof(mine), stream);
  if (res == dctSuccess) res = shared;
  std::vector<size_t>&formBytes = a.formBytes, &formOffsets = a.formOffsets;
  formBytes.assign(P, 0);
  formOffsets.assign(P, 0);
  size_t formTotal = 0;
  for (int q = 0; q < P && res == dctSuccess; q++) {
    const uint64_t bytes = forms[2 * q], nnz = forms[2 * q + 1];
    const bool ok = nnz == kSplitDenseForm ? bytes == s.length(q) * s.sumBytes : plausibleMessage(bytes, nnz, s.length(q), s.sumBytes, c->indexBytes);
    if (!ok) res = fail(comm, dctInternalError, "%s: rank %d announced a malformed range", kFn, q);
    formBytes[q] = bytes;
    formOffsets[q] = formTotal;
    formTotal += packing::pad8(bytes);
  }
  if (res == dctSuccess) res = reserveGathered(s, formTotal, mine[0]);
  DCTCHECK(vote(comm, res, stream, kFn, "range sizes"));
  clock.lap(dctPhaseAgree);

  char* gathered = c->gathered.as<char>();
  DCTCHECK(t->allgatherv(comm, form, mine[0], gathered, formBytes.data(), formOffsets.data(), stream));
  clock.lap(dctPhaseExchange);
  sent += mine[0];
  for (int q = 0; q < P; q++) received += q == me ? 0 : formBytes[q];
  for (int q = 0; q < P && ranges != SplitRanges::kLeave; q++) {
    if (s.length(q) == 0 || (q == me && mine[1] == kSplitDenseForm)) continue;  // a dense own range is in place
    DCTCHECK(writeRange(s, q, gathered + formOffsets[q], formBytes[q], forms[2 * q + 1], ranges == SplitRanges::kCheck));
  }
  return dctSuccess;
}

}  // namespace

dctResult_t splitPack(dctCompressor_t c, dctComm_t comm, const Message& msg, SplitPieces& pieces, void* stream) {
  const int ranks = comm->size;
  // The exchange's tables, before the agreement: nothing allocates after it.
  const Transport* t = comm->transport;
  DCTCHECK(c->rankArrays.reserve(ranks, t->alltoall == nullptr && !t->hostBuffers));
  std::vector<uint64_t> keys(ranks + 1), at(ranks + 1);
  for (int q = 0; q <= ranks; q++) keys[q] = splitRangeBegin(c->count, ranks, q);
  BoundsArgs cut{msg.indices, msg.nnz, c->indexBytes, keys.data(), keys.size(), at.data()};
  DCTCHECK(c->ops->lowerBounds(c->kernels, &cut, stream));
  const size_t valueBytes = dtypeSize(c->wireType);
  size_t room = 0;
  for (int q = 0; q < ranks; q++)
    room += packedMessageRoom(at[q + 1] - at[q], c->indexBytes, valueBytes);
  DCTCHECK(c->wire.reserve(room));
  pieces.sizes.assign(2 * ranks, 0);
  pieces.offsets.assign(ranks, 0);
  pieces.bytes = 0;
  for (int q = 0; q < ranks; q++) {
    const size_t nnz = at[q + 1] - at[q];
    size_t bytes = 0;
    DCTCHECK(packMessage(c, static_cast<const char*>(msg.indices) + at[q] * c->indexBytes,
                       static_cast<const char*>(msg.values) + at[q] * valueBytes, nnz, valueBytes, keys[q],
                       c->wire.as<char>() + pieces.bytes, bytes, stream));
    pieces.offsets[q] = pieces.bytes;
    pieces.sizes[2 * q] = bytes;
    pieces.sizes[2 * q + 1] = nnz;
    pieces.bytes += bytes;
  }
  return dctSuccess;
}

dctResult_t splitExchange(dctCompressor_t c, dctComm_t comm, const SplitPieces& pieces, size_t allRanksBytes,
                          void* target, void* stream, PhaseTimer& clock, size_t& sent, size_t& received,
                          OwnerDraft* owner, SplitRanges ranges) {
  const Split s{c, comm, target, stream, comm->size, comm->rank, dtypeSize(c->accType), dtypeSize(c->wireType)};
  const int P = s.P, me = s.me;
  const Transport* t = comm->transport;
  // Reserved by splitPack, before the agreement: nothing allocates here.
  RankArrays& a = c->rankArrays;
  dctResult_t res = pieceSizes(comm, pieces, a, stream);
  const std::vector<uint64_t>& theirs = a.theirs;
  std::vector<size_t>&sendBytes = a.sizes, &recvBytes = a.recvBytes, &recvOffsets = a.recvOffsets;
  sendBytes.assign(P, 0);
  recvBytes.assign(P, 0);
  recvOffsets.assign(P, 0);
  size_t recvTotal = 0;
  uint64_t bound = 0;  // entries summed into this rank's range
  for (int r = 0; r < P && res == dctSuccess; r++) {
    sendBytes[r] = pieces.sizes[2 * r];
    recvBytes[r] = theirs[2 * r];
    recvOffsets[r] = recvTotal;
    recvTotal += recvBytes[r];
    bound += theirs[2 * r + 1];
    if (!plausibleMessage(recvBytes[r], theirs[2 * r + 1], s.length(me), s.wireBytes, c->indexBytes))
      res = fail(comm, dctInternalError, "%s: rank %d announced a malformed piece", kFn, r);
  }
  if (res == dctSuccess) res = reserveGathered(s, recvTotal, pieces.bytes);
  DCTCHECK(vote(comm, res, stream, kFn, "piece sizes"));
  clock.lap(dctPhaseAgree);

  res = t->alltoallv(comm, c->wire.as(), sendBytes.data(), pieces.offsets.data(), c->gathered.as(), recvBytes.data(),
                     recvOffsets.data(), allRanksBytes, stream);
  clock.lap(dctPhaseExchange);
  sent = pieces.bytes - sendBytes[me];
  received = recvTotal - recvBytes[me];
  const char* gathered = c->gathered.as<char>();
  if (!unionsRange(s, bound, owner)) {
    if (res == dctSuccess) res = mergeRange(s, pieceViews(s, gathered, theirs, recvOffsets));
    return splitRanges(c, comm, res, bound, target, stream, clock, sent, received, owner, ranges);
  }
  const void* form = nullptr;
  uint64_t mine[2] = {0, 0};
  if (res == dctSuccess) res = unionForm(s, pieceViews(s, gathered, theirs, recvOffsets), bound, form, mine[0], mine[1]);
  return shareRanges(s, res, form, mine, clock, sent, received, ranges);
}

dctResult_t splitRanges(dctCompressor_t c, dctComm_t comm, dctResult_t res, uint64_t inflow, void* target,
                        void* stream, PhaseTimer& clock, size_t& sent, size_t& received, OwnerDraft* owner,
                        SplitRanges ranges) {
  const Split s{c, comm, target, stream, comm->size, comm->rank, dtypeSize(c->accType), dtypeSize(c->wireType)};
  const void* form = nullptr;
  uint64_t mine[2] = {0, 0};  // this rank's range form: bytes, nnz (kSplitDenseForm: dense)
  if (res == dctSuccess)
    res = owner ? ownerForm(s, inflow, *owner, form, mine[0], mine[1]) : reduceForm(s, inflow, form, mine[0], mine[1]);
  return shareRanges(s, res, form, mine, clock, sent, received, ranges);
}

dctResult_t splitWriteRanges(dctCompressor_t c, dctComm_t comm, const void* sum, void* target, void* stream) {
  const Split s{c, comm, target, stream, comm->size, comm->rank, dtypeSize(c->accType), dtypeSize(c->wireType)};
  const RankArrays& a = c->rankArrays;
  const char* gathered = c->gathered.as<char>();
  for (int q = 0; q < s.P; q++) {
    const uint64_t nnz = a.forms[2 * q + 1];
    if (s.length(q) == 0) continue;
    if (q == s.me && nnz == kSplitDenseForm)
      DCTCHECK(c->ops->copy(c->kernels, s.range(q), static_cast<const char*>(sum) + s.begin(q) * s.sumBytes,
                            a.formBytes[q], stream));
    else DCTCHECK(writeRange(s, q, gathered + a.formOffsets[q], a.formBytes[q], nnz, false, true));
  }
  return dctSuccess;
}

}  // namespace dct
