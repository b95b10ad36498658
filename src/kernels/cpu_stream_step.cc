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
// capacity, its indices strictly ascending below n (its range's length).
int32_t slotVerdict(const StreamStepArgs* a, const char* slot, size_t n) {
  SlotHeader h;
  std::memcpy(&h, slot, sizeof h);
  if (h.digest != a->digest) return dctInvalidUsage;
  if (h.nnz > a->capacity) return dctInternalError;
  const char* indices = slot + slotIndexOffset();
  const bool ok = a->indexBytes == 8 ? ascendingBelow<uint64_t>(indices, h.nnz, n)
                                     : ascendingBelow<uint32_t>(indices, h.nnz, n);
  return ok ? dctSuccess : dctInternalError;
}

// Where slot r's entries go: range r (ranged) or the whole target.
size_t slotBegin(const StreamStepArgs* a, int r) { return a->ranged ? streamRangeBegin(a->n, a->ranks, r) : 0; }
size_t slotLength(const StreamStepArgs* a, int r) {
  return a->ranged ? streamRangeBegin(a->n, a->ranks, r + 1) - slotBegin(a, r) : a->n;
}

// One select of [begin, begin + length) into `slot` (indices relative to
// begin); the counts added to the step's.
dctResult_t selectSlot(KernelContext* ctx, const StreamStepArgs* a, size_t begin, size_t length, char* slot) {
  StreamState& s = stateOf(a);
  const size_t acc = dtypeSize(a->accType);
  char* out = static_cast<char*>(a->residuals[1 - s.committed]) + begin * acc;
  const char* in = static_cast<const char*>(a->residuals[s.committed]) + begin * acc;
  const void* grad = a->grad ? static_cast<const char*>(a->grad) + begin * dtypeSize(a->gradType) : nullptr;
  SelectArgs sel{grad,          out,
                 length,        a->accType,
                 a->indexBytes, s.draftTau,
                 a->capacity,   slot + slotIndexOffset(),
                 slot + slotValueOffset(a->capacity, a->indexBytes)};
  sel.residualIn = in;
  sel.gradType = a->gradType;
  sel.valueType = a->wireType;
  sel.valueLimit = a->valueLimit;
  sel.stream = a->n * acc >= kStreamBytes;
  DCTCHECK(cpuSelectCompact(ctx, &sel, nullptr));
  const SlotHeader h{a->digest, sel.nnz, sel.nonFinite, 0};
  std::memcpy(slot, &h, sizeof h);
  s.selected += sel.selected;
  s.written += sel.nnz;
  s.writtenNonFinite += sel.nonFinite;
  return dctSuccess;
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
  s.selected = s.written = s.writtenNonFinite = 0;
  char* slot = static_cast<char*>(a->slot);
  const int pieces = a->pieces == 0 ? 1 : a->pieces;  // 0: one slot over the whole tensor
  for (int q = 0; q < pieces; q++) {
    const size_t begin = streamRangeBegin(a->n, pieces, q);
    DCTCHECK(selectSlot(ctx, a, begin, streamRangeBegin(a->n, pieces, q + 1) - begin,
                        slot + static_cast<size_t>(q) * a->slotBytes));
  }
  s.draftDrift = streamDrifted(static_cast<double>(s.selected), static_cast<double>(a->k), s.estimated != 0,
                               s.draftTau <= a->tauFloor)
                     ? 1
                     : 0;
  return dctSuccess;
}

dctResult_t cpuStreamMerge(KernelContext* ctx, const StreamStepArgs* a, void*) {
  StreamState& s = stateOf(a);
  const int32_t before = a->ranged ? s.vote : 0;
  if (halted(a)) {  // this rank drops the step: its vote says so, and every rank drops it
    s.vote = std::max(before, *a->failed);
    return dctSuccess;
  }
  int32_t verdict = dctSuccess;
  for (int r = 0; r < a->ranks; r++)
    verdict = std::max(verdict, slotVerdict(a, slotAt(a->slots, a->slotBytes, r), slotLength(a, r)));
  s.vote = std::max(before, verdict);
  if (verdict != dctSuccess) return dctSuccess;
  const KernelOps& ops = cpuKernelOps();
  const size_t acc = dtypeSize(a->accType);
  DCTCHECK(ops.zero(ctx, a->target, a->n * acc, nullptr));
  for (int r = 0; r < a->ranks; r++) {
    const char* slot = slotAt(a->slots, a->slotBytes, r);
    SlotHeader h;
    std::memcpy(&h, slot, sizeof h);
    ScatterArgs sc{static_cast<char*>(a->target) + slotBegin(a, r) * acc,
                   slotLength(a, r),
                   a->accType,
                   a->indexBytes,
                   slot + slotIndexOffset(),
                   slot + slotValueOffset(a->capacity, a->indexBytes),
                   h.nnz,
                   true};
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
  if (a->owner) streamAdvance(*a->owner, a->errorFeedback);
  return dctSuccess;
}

dctResult_t cpuStreamFinish(KernelContext* ctx, const StreamStepArgs* a, void*) {
  const StreamState& s = stateOf(a);
  if (!s.lastOk || a->target == a->result) return dctSuccess;
  return cpuKernelOps().convert(ctx, a->result, a->resultType, a->target, a->accType, a->n, a->factor, nullptr);
}

}  // namespace dct
