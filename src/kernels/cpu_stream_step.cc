// CPU twin of the fixed-capacity step's ops (stream_args.h), built from the
// twin's own select, threshold, scatter-add and convert, so the two paths
// select and sum the same bits. The state is host memory and every op
// completes before it returns.
#include <algorithm>
#include <cstring>

#include "base/debug.h"
#include "kernels/cpu_context.h"
#include "kernels/sampling.h"

namespace dct {
namespace {

StreamState& stateOf(const StreamStepArgs* a) { return *a->state; }
bool halted(const StreamStepArgs* a) { return *a->failed != 0; }

char* slotAt(const void* slots, size_t bytes, int r) {
  return static_cast<char*>(const_cast<void*>(slots)) + static_cast<size_t>(r) * bytes;
}

template <typename I>
bool ascendingBelow(const void* indices, size_t nnz, size_t n) {
  const I* idx = static_cast<const I*>(indices);
  for (size_t j = 0; j < nnz; j++)
    if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1])) return false;
  return true;
}

// A peer's slot: its digest must be this rank's, its count within the
// capacity, its indices strictly ascending below n.
int32_t slotVerdict(const StreamStepArgs* a, const char* slot) {
  SlotHeader h;
  std::memcpy(&h, slot, sizeof h);
  if (h.digest != a->digest) return dctInvalidUsage;
  if (h.nnz > a->capacity) return dctInternalError;
  const char* indices = slot + slotIndexOffset();
  const bool ok = a->indexBytes == 8 ? ascendingBelow<uint64_t>(indices, h.nnz, a->n)
                                     : ascendingBelow<uint32_t>(indices, h.nnz, a->n);
  return ok ? dctSuccess : dctInternalError;
}

}  // namespace

dctResult_t cpuStreamEstimate(KernelContext* ctx, const StreamStepArgs* a, void*) {
  if (halted(a)) return dctSuccess;
  StreamState& s = stateOf(a);
  s.estimated = streamEstimateDue(s, a->interval) ? 1 : 0;
  s.draftTau = s.tau;
  if (!s.estimated) return dctSuccess;
  ThresholdArgs t{a->residuals[s.committed], a->n, a->accType, a->density, dctThresholdSampled,
                  stepSeed(a->seed, s.step)};
  t.addend = a->grad;
  t.addendType = a->gradType;
  return cpuThreshold(ctx, &t, &s.draftTau, nullptr);
}

dctResult_t cpuStreamSelect(KernelContext* ctx, const StreamStepArgs* a, void*) {
  if (halted(a)) return dctSuccess;
  StreamState& s = stateOf(a);
  char* slot = static_cast<char*>(a->slot);
  SelectArgs sel{a->grad,        a->residuals[1 - s.committed],
                 a->n,           a->accType,
                 a->indexBytes,  s.draftTau,
                 a->capacity,    slot + slotIndexOffset(),
                 slot + slotValueOffset(a->capacity, a->indexBytes)};
  sel.residualIn = a->residuals[s.committed];
  sel.gradType = a->gradType;
  sel.valueType = a->wireType;
  sel.valueLimit = a->valueLimit;
  sel.stream = a->n * dtypeSize(a->accType) >= kStreamBytes;
  DCTCHECK(cpuSelectCompact(ctx, &sel, nullptr));
  const SlotHeader h{a->digest, sel.nnz, sel.nonFinite, 0};
  std::memcpy(slot, &h, sizeof h);
  s.selected = sel.selected;
  s.written = sel.nnz;
  s.writtenNonFinite = sel.nonFinite;
  s.draftDrift = streamDrifted(static_cast<double>(sel.selected), static_cast<double>(a->k), s.estimated != 0,
                               s.draftTau <= a->tauFloor)
                     ? 1
                     : 0;
  return dctSuccess;
}

dctResult_t cpuStreamMerge(KernelContext* ctx, const StreamStepArgs* a, void*) {
  StreamState& s = stateOf(a);
  if (halted(a)) {  // this rank drops the step: its vote says so, and every rank drops it
    s.vote = *a->failed;
    return dctSuccess;
  }
  int32_t verdict = dctSuccess;
  for (int r = 0; r < a->ranks; r++) verdict = std::max(verdict, slotVerdict(a, slotAt(a->slots, a->slotBytes, r)));
  s.vote = verdict;
  if (verdict != dctSuccess) return dctSuccess;
  const KernelOps& ops = cpuKernelOps();
  DCTCHECK(ops.zero(ctx, a->target, a->n * dtypeSize(a->accType), nullptr));
  for (int r = 0; r < a->ranks; r++) {
    const char* slot = slotAt(a->slots, a->slotBytes, r);
    SlotHeader h;
    std::memcpy(&h, slot, sizeof h);
    ScatterArgs sc{a->target, a->n, a->accType, a->indexBytes, slot + slotIndexOffset(),
                   slot + slotValueOffset(a->capacity, a->indexBytes), h.nnz, true};
    sc.valueType = a->wireType;
    DCTCHECK(cpuScatterAdd(ctx, &sc, nullptr));
  }
  if (a->target == a->result && a->factor != 1.0)
    DCTCHECK(ops.scale(ctx, a->target, a->n, a->accType, a->factor, nullptr));
  return dctSuccess;
}

// Halted or not: a step whose merge did not run must still vote a failure.
dctResult_t cpuStreamPost(KernelContext*, const StreamStepArgs* a, int32_t code, void*) {
  StreamState& s = stateOf(a);
  s.vote = std::max(s.vote, code);
  return dctSuccess;
}

dctResult_t cpuStreamCommit(KernelContext*, const StreamStepArgs* a, void*) {
  StreamState& s = stateOf(a);
  s.lastOk = 0;
  // The vote alone decides: every rank holds the same one (a rank halted
  // before it voted its error), so every rank commits or drops alike.
  if (s.vote != dctSuccess) {
    if (a->sticky && !halted(a)) *a->failed = s.vote;  // the first failure stays
    return dctSuccess;
  }
  if (a->onebit) onebitAdvance(s);
  else streamAdvance(s, a->errorFeedback);
  return dctSuccess;
}

dctResult_t cpuStreamFinish(KernelContext* ctx, const StreamStepArgs* a, void*) {
  const StreamState& s = stateOf(a);
  if (!s.lastOk || a->target == a->result) return dctSuccess;
  return cpuKernelOps().convert(ctx, a->result, a->resultType, a->target, a->accType, a->n, a->factor, nullptr);
}

}  // namespace dct
