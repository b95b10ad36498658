// The fixed-capacity step (algo/stream_step.cc) as stream-ordered ops: every
// value a step reads or changes lives in the twin's memory (StreamState),
// every message has a size fixed when the compressor is made, so a step is
// a fixed sequence of ops and collectives with the same arguments every
// time: nothing waits for the host, and a CUDA graph replays it.
//
//   streamEstimate  tau for this step (sampled, when the schedule says so)
//   streamSelect    acc = grad + residual; the first `capacity` entries with
//                   !(|acc| < tau) into this rank's slot, the rest (and the
//                   rounding) into the spare residual; the drift verdict
//   (allgather of every rank's slot, fixed size)
//   streamMerge     every slot checked (digest, nnz, indices), then summed
//                   in rank order into target; the verdict into vote
//   (allreduce max of vote)
//   streamCommit    vote == 0: the draft becomes the state (the spare
//                   residual the committed one, tau, schedule, counters);
//                   else the step is dropped (and on a device the comm's
//                   sticky error is set: asynchronous errors)
//   streamFinish    a committed step's result into recvbuf (convert, scale)
//
// Global top-k with fixed pieces (algo/stream_global_topk.cc) runs the same
// ops in two modes: streamSelect with `pieces` = P cuts the selection by the
// P equal ranges (streamRangeBegin) into P slots of `capacity` entries each,
// indices relative to their range, the overflow of each kept in the spare
// residual; streamMerge with `ranged` writes slot r at range r's place,
// checking its indices against range r's length, and raises the vote
// instead of setting it (a merge earlier in the step voted already). The
// owner's estimate and select are streamEstimate and streamSelect on a
// second StreamState (its range sum as the gradient, its owner residuals).
//
// Every op first reads *failed (the comm's sticky asynchronous error) and
// does nothing when it is set, so steps queued after a failure change
// nothing either; but a rank that finds it set votes it (streamMerge), and
// streamCommit decides on the vote alone (it always clears lastOk, which is
// all streamFinish reads): the flag may be set by another stream's step at
// a different point of this step on each rank, and the vote is the one
// decision every rank shares. Both twins compute the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "dct/dct.h"

namespace dct {

// What a step reads and changes, in the twin's memory.
struct StreamState {
  // Committed.
  uint64_t step;              // steps committed (the sample seed and the schedule)
  double tau;                 // 0: none yet
  uint64_t lastEstimateStep;  // step of the last estimate
  int32_t driftPending;       // the last count left the drift band: estimate first
  int32_t committed;          // residuals[committed] holds the residual
  uint64_t estimates;         // tau estimates so far
  uint64_t nnz;               // entries this rank sent in the last step
  uint64_t nonFinite;         // of which NaN/Inf
  uint64_t overflow;          // selected entries past the capacity, last step (kept)
  // This step's draft (streamEstimate, streamSelect).
  double draftTau;
  int32_t estimated;          // draftTau is a fresh estimate
  int32_t draftDrift;
  uint64_t selected;          // entries meeting draftTau
  uint64_t written;           // of which in the slot (<= capacity)
  uint64_t writtenNonFinite;
  // The step's verdict: streamMerge writes it, the host may raise it
  // (streamPost), the transport takes its max over ranks in place.
  int32_t vote;
  int32_t lastOk;             // streamCommit: this step committed
  // The 1-bit allreduce's queued step (onebit_step_args.h): draftTau holds
  // the worker's scale, tau the last committed one; committed indexes the
  // worker error (the residuals), serverCommitted the server error. Both
  // hold the x of their last compression (keepX), sent with these scales.
  int32_t serverCommitted;
  int32_t pending;
  int32_t serverPending;
  int32_t draftNonFinite;     // some server scale of this step is NaN: output NaN, keep the errors
  double pendingScale;
  double serverPendingScale;
  double draftServerScale;
};

// A slot: this header, then `capacity` indices (indexBytes each), then
// `capacity` values of the wire type, each part padded to 8 bytes. Entries
// past nnz hold earlier steps' bytes, travel, and are never read.
struct SlotHeader {
  uint64_t digest;  // the call's arguments and settings (every rank's must match)
  uint64_t nnz;     // entries used
  uint64_t nonFinite;
  uint64_t reserved;
};

DCT_HOST_DEVICE size_t slotPad8(size_t bytes) { return (bytes + 7) & ~size_t(7); }
DCT_HOST_DEVICE size_t slotIndexOffset() { return sizeof(SlotHeader); }
DCT_HOST_DEVICE size_t slotValueOffset(size_t capacity, int indexBytes) {
  return sizeof(SlotHeader) + slotPad8(capacity * static_cast<size_t>(indexBytes));
}
DCT_HOST_DEVICE size_t slotBytes(size_t capacity, int indexBytes, size_t valueBytes) {
  return slotValueOffset(capacity, indexBytes) + slotPad8(capacity * valueBytes);
}

struct StreamStepArgs {
  StreamState* state;
  int32_t* failed;  // the comm's sticky error (0: none), device-visible
  bool sticky;      // a failed vote sets *failed (device twins: errors are asynchronous)
  // The tensor and its residuals.
  const void* grad;
  dctDataType_t gradType;
  void* residuals[2];
  size_t n;
  dctDataType_t accType;  // residuals, target
  int errorFeedback;      // 0: the residual stays zero and is never swapped
  // The schedule (the compressor's resolved config).
  double density;
  uint64_t interval;  // L
  long long seed;
  size_t k;           // targetNnz
  double tauFloor;    // the accumulation type's smallest positive value
  // The slots.
  size_t capacity;  // entries per slot
  int indexBytes;
  dctDataType_t wireType;
  double valueLimit;  // 0: the wire type's largest finite
  size_t slotBytes;
  uint64_t digest;
  void* slot;         // this rank's
  const void* slots;  // every rank's, in rank order (streamMerge)
  int ranks;
  // The sum and the result.
  void* target;  // accType, n elements (may be result when types match)
  void* result;  // dtype
  dctDataType_t resultType;
  double factor;  // dctAvg: 1 / ranks
  bool onebit;    // streamCommit commits a 1-bit step (onebitAdvance); only state, failed, sticky are read
  // Global top-k's fixed pieces (see the top).
  int pieces;   // streamSelect: 0, one slot; else `ranks` slots, one per range, `slotBytes` apart
  bool ranged;  // streamMerge: slot r holds range r (relative indices); the verdict raises the vote
  StreamState* owner;  // streamCommit: also commits this state (the owner's) on the same vote; may be null
};

// Range q of P over [0, n): [streamRangeBegin(n, P, q), streamRangeBegin(n,
// P, q + 1)), split_allreduce.h's splitRangeBegin (floor(q n / P)) without
// 128-bit arithmetic: n = a P + b gives q a + floor(q b / P), q b < P^2.
DCT_HOST_DEVICE size_t streamRangeBegin(size_t n, int ranks, int q) {
  const size_t p = static_cast<size_t>(ranks), r = static_cast<size_t>(q);
  return (n / p) * r + ((n % p) * r) / p;
}

// --- the schedule, the drift verdict and the commit, shared by both twins ---

// A step every rank voted for: its draft becomes the state (the spare
// residual the committed one, where error feedback keeps one).
DCT_HOST_DEVICE void streamAdvance(StreamState& s, int errorFeedback) {
  if (errorFeedback) s.committed = 1 - s.committed;
  s.tau = s.draftTau;
  if (s.estimated) {
    s.lastEstimateStep = s.step;
    s.estimates++;
  }
  s.driftPending = s.draftDrift;
  s.nnz = s.written;
  s.nonFinite = s.writtenNonFinite;
  s.overflow = s.selected - s.written;
  s.step++;
  s.lastOk = 1;
}

// A 1-bit step every rank voted for: counted; its errors (and the scales
// their kept x left with) swap in unless a server scale was NaN (the
// output is NaN then, and the errors stay).
DCT_HOST_DEVICE void onebitAdvance(StreamState& s) {
  s.tau = s.draftTau;
  s.nonFinite = s.draftTau != s.draftTau ? 1 : 0;
  if (!s.draftNonFinite) {
    s.committed = 1 - s.committed;
    s.serverCommitted = 1 - s.serverCommitted;
    s.pending = 1;
    s.pendingScale = s.draftTau;
    s.serverPending = 1;
    s.serverPendingScale = s.draftServerScale;
  }
  s.step++;
  s.lastOk = 1;
}

// Estimate before selecting: no tau yet, drift last step, or L steps since.
DCT_HOST_DEVICE bool streamEstimateDue(const StreamState& s, uint64_t interval) {
  return !(s.tau > 0) || s.driftPending != 0 || s.step - s.lastEstimateStep >= interval;
}

// The drift band of core/compressor.cc (outsideDriftBand) for target k:
// [k / 1.25, 1.25 k], widened to 3 sqrt(k) either way for small k; a low
// count does not count when tau is at its floor. A stale tau that selects
// nothing (starved) drifts too. A fresh estimate never drifts: a count it
// cannot bring into the band is a tie, and estimating again every step
// would not split it.
DCT_HOST_DEVICE double streamSqrt(double x) {
  // Newton on a double, the same bits on both twins (no libm difference).
  if (!(x > 0)) return 0;
  double r = x > 1 ? x : 1;
  for (int i = 0; i < 64; i++) {
    const double next = 0.5 * (r + x / r);
    if (next >= r) break;
    r = next;
  }
  return r;
}
DCT_HOST_DEVICE bool streamDrifted(double selected, double k, bool fresh, bool tauAtFloor) {
  if (fresh) return false;
  const double noise = 3 * streamSqrt(k);
  const double low = k / 1.25 < k - noise ? k / 1.25 : k - noise;
  const double high = k * 1.25 > k + noise ? k * 1.25 : k + noise;
  if (selected == 0 && !tauAtFloor) return true;  // starved
  return (selected < low && !tauAtFloor) || selected > high;
}

}  // namespace dct
