// Global top-k in the fixed-capacity mode (config.algorithm globaltopk and
// capacityFactor c): the split of algo/global_topk.cc with every message's
// size fixed when the compressor is made, so a step is the same ops and
// collectives every time, queued on a device's stream like the allgather
// of slots (stream_step.cc):
//
//   worker   tau (sampled, on schedule); acc = grad + residual cut by the P
//            equal ranges into P pieces of pieceCapacity entries each; what
//            a range selects past its piece stays in the worker residual
//   alltoall the pieces (fixed size): owner q gets every rank's piece q
//   owner    every piece checked and summed in rank order from +0 (the
//            range's sum); acc = sum + owner residual; tau_owner (sampled,
//            aimed at owner_target.h's share, on the owner's own schedule);
//            the first ownerCapacity entries !(|acc| < tau_owner) into the
//            owner's slot in the accumulation type, the rest (overflow and
//            unselected) into the spare owner residual
//   allgather the owners' slots (fixed size); each written at its range
//   vote, commit (worker residual, owner residual, both schedules), finish
//
// Traffic per rank: (P - 1) pieces of ~c k / P out and in, one owner slot
// out and P - 1 in (~4 c k / P each: owners aim at 4k in all), where the
// slots of the allgather plan bring in (P - 1) c k. The owner departs from
// the variable global top-k where the slot forbids a second pass: a count
// past the drift band is re-estimated (sampled) on the next step, not
// exactly in the same one; the slot bounds a runaway meanwhile.
#include <cstdint>
#include <limits>

#include "algo/global_topk.h"
#include "algo/stream_call.h"
#include "algo/stream_step.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "core/owner_target.h"
#include "transport/comm.h"

namespace dct {
namespace {

// Every rank's piece q to rank q, fixed blocks: the transport's alltoall
// (host blocks only: MPI's does not stage), else its alltoallv with equal
// blocks (NCCL's, or MPI's staging device memory).
dctResult_t exchangePieces(const StreamCall& k, const void* send, void* recv, size_t bytes) {
  const Transport* t = k.comm->transport;
  if (t->alltoall && !k.c->ops->device) return t->alltoall(k.comm, send, recv, bytes, k.stream);
  const size_t P = static_cast<size_t>(k.comm->size);
  std::vector<size_t>& sizes = k.c->stream.blockBytes;
  std::vector<size_t>& offsets = k.c->stream.blockOffsets;
  return t->alltoallv(k.comm, send, sizes.data(), offsets.data(), recv, sizes.data(), offsets.data(), P * P * bytes,
                      k.stream);
}

// The owner's arguments: its StreamState, its range's sum as the gradient,
// its residuals, its slot (values in the accumulation type, as the
// variable plan's ranges travel).
StreamStepArgs ownerArgs(dctCompressor_t c, const StreamStepArgs& a) {
  const StreamSetup& st = c->stream;
  const double density = ownerDensity(c->config.density);
  StreamStepArgs o = a;
  o.state = st.ownerState.as<StreamState>();
  o.sticky = false;  // the worker's commit sets the sticky error
  o.grad = st.rangeSum.as();
  o.gradType = c->accType;
  o.residuals[0] = c->owner.residuals[0].as();
  o.residuals[1] = c->owner.residuals[1].as();
  o.n = st.ownerLength;
  o.density = density;
  // Every nonzero when the share is the whole range: tau stays at the floor.
  if (density >= 1) o.interval = std::numeric_limits<uint64_t>::max();
  o.k = ownerRangeTarget(c->config.density, st.ownerLength);
  o.capacity = st.ownerCapacity;
  o.wireType = c->accType;
  o.valueLimit = 0;
  o.slotBytes = st.ownerSlotBytes;
  o.slot = st.ownerSlot.as();
  return o;
}

}  // namespace

dctResult_t reserveGlobalTopk(dctCompressor_t c, dctComm_t comm, void* stream) {
  StreamSetup& st = c->stream;
  const int P = comm->size;
  const size_t acc = dtypeSize(c->accType);
  st.ownerBegin = streamRangeBegin(c->count, P, comm->rank);
  st.ownerLength = streamRangeBegin(c->count, P, comm->rank + 1) - st.ownerBegin;
  st.pieceCapacity = pieceCapacity(c, P);
  st.capacity = st.pieceCapacity;
  st.slotBytes = slotBytes(st.pieceCapacity, c->indexBytes, dtypeSize(c->wireType));
  st.ownerCapacity = ownerSlotCapacity(c, P);
  st.ownerSlotBytes = slotBytes(st.ownerCapacity, c->indexBytes, acc);
  size_t pieces = 0, owners = 0;
  if (!checkedMul(st.slotBytes, static_cast<size_t>(P), pieces) ||
      !checkedMul(st.ownerSlotBytes, static_cast<size_t>(P), owners))
    return fail(comm, dctInvalidArgument, "dctSparseAllreduce: %d pieces of %zu bytes or owner slots of %zu do not fit",
                P, st.slotBytes, st.ownerSlotBytes);
  st.sentBytes = st.slotBytes * static_cast<uint64_t>(P - 1) + st.ownerSlotBytes;
  st.receivedBytes = (st.slotBytes + st.ownerSlotBytes) * static_cast<uint64_t>(P - 1);
  st.algorithm = dctAlgoGlobalTopk;
  st.blockBytes.assign(static_cast<size_t>(P), st.slotBytes);
  st.blockOffsets.resize(static_cast<size_t>(P));
  for (int q = 0; q < P; q++) st.blockOffsets[static_cast<size_t>(q)] = static_cast<size_t>(q) * st.slotBytes;
  DCTCHECK(c->wire.reserve(pieces));
  DCTCHECK(st.received.reserve(pieces));
  DCTCHECK(st.rangeSum.reserve(st.ownerLength * acc));
  DCTCHECK(st.ownerSlot.reserve(st.ownerSlotBytes));
  DCTCHECK(c->gathered.reserve(owners));
  DCTCHECK(c->ops->zero(c->kernels, c->wire.as(), pieces, stream));
  DCTCHECK(c->ops->zero(c->kernels, st.ownerSlot.as(), st.ownerSlotBytes, stream));
  if (c->ops->device) DCTCHECK(comm->asyncError.mapForDevice());
  DCTCHECK(comm->transport->prepare(comm, c->wire.as(), pieces, stream));
  return comm->transport->prepare(comm, c->gathered.as(), owners > pieces ? owners : pieces, stream);
}

dctResult_t foldForStream(dctCompressor_t c, void* stream) {
  if (!fixedGlobalTopk(c)) return dctSuccess;
  return foldOwnerResidual(c, c->stream.ownerBegin, c->stream.ownerLength, stream);
}

dctResult_t queueGlobalTopk(const StreamCall& k, const StreamStepArgs& a, dctResult_t local) {
  dctCompressor_t c = k.c;
  StreamSetup& st = c->stream;
  const KernelOps& ops = *c->ops;
  auto keep = [&](dctResult_t r) {
    if (local == dctSuccess) local = r;
  };
  // The worker: P pieces into c->wire.
  StreamStepArgs worker = a;
  worker.pieces = k.comm->size;
  // The owner: every rank's piece of its range, summed into rangeSum.
  StreamStepArgs pieces = a;
  pieces.n = st.ownerLength;
  pieces.slots = st.received.as();
  pieces.target = st.rangeSum.as();
  pieces.result = nullptr;
  pieces.factor = 1.0;
  const StreamStepArgs owner = ownerArgs(c, a);
  // Every owner's slot at its range, then the commit of both states.
  StreamStepArgs ranges = owner;
  ranges.state = a.state;
  ranges.sticky = a.sticky;
  ranges.n = a.n;
  ranges.slots = c->gathered.as();
  ranges.ranged = true;
  ranges.target = a.target;
  ranges.result = a.result;
  ranges.factor = a.factor;
  ranges.residuals[0] = a.residuals[0];
  ranges.residuals[1] = a.residuals[1];
  ranges.errorFeedback = a.errorFeedback;
  ranges.owner = owner.state;

  keep(ops.streamBegin(c->kernels, k.stream));
  if (local == dctSuccess) keep(ops.streamEstimate(c->kernels, &worker, k.stream));
  if (local == dctSuccess) keep(ops.streamSelect(c->kernels, &worker, k.stream));
  keep(exchangePieces(k, c->wire.as(), st.received.as(), st.slotBytes));
  if (local == dctSuccess) keep(ops.streamMerge(c->kernels, &pieces, k.stream));
  if (local == dctSuccess) keep(ops.streamEstimate(c->kernels, &owner, k.stream));
  if (local == dctSuccess) keep(ops.streamSelect(c->kernels, &owner, k.stream));
  keep(k.comm->transport->allgather(k.comm, owner.slot, c->gathered.as(), st.ownerSlotBytes, k.stream));
  if (local == dctSuccess) keep(ops.streamMerge(c->kernels, &ranges, k.stream));
  if (local != dctSuccess) (void)ops.streamPost(c->kernels, &ranges, local, k.stream);
  keep(voteOnTwin(c, k.comm, ranges, k.stream));
  keep(ops.streamCommit(c->kernels, &ranges, k.stream));
  keep(ops.streamFinish(c->kernels, &ranges, k.stream));
  keep(ops.streamEnd(c->kernels, k.stream));
  st.lastStream = k.stream;
  return local;
}

}  // namespace dct
