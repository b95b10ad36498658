// DCT-DP sparse allreduce as a transaction over every rank:
//
//   local work   plan, compress into the spare residual, pack, reserve
//   agreement    header allgather (args, counts, sizes, timing), reserve the
//                gather buffer for the agreed sizes, vote; a small allgather
//                plan's messages ride in the header allgather's slots
//                (gather_slot.h): when every header says so, no vote here
//                and no allgatherv, only the exchange vote
//   exchange     allgatherv + rank-order merge, or dense allreduce, into
//                the step's target (recvbuf; a staging buffer when in place,
//                so sendbuf survives a failed step, or when the sum is built
//                in another type than the tensor's); the result into
//                recvbuf (staged results converted and averaged), vote
//   commit       residual swap, tau, stats, auto's bookkeeping
//
// Auto's measure of a step is the slowest rank's time without its waiting:
// its local work, then everything from the moment every rank had arrived
// (its header gather returned). Time spent waiting for late ranks (under
// DDP, their backward) is no plan's cost; counted, it would make the
// samples follow the ranks' skew instead of the exchange.
//
// Nothing that can fail follows the commit. The result reaches recvbuf
// before the exchange vote; in place it is finished (averaged) in its
// staging buffer instead and leaves it after the commit by a host copy, which
// cannot fail. Where that copy could fail (a device twin) or converts (the
// sum's type is not the tensor's), and after the pipelined step (its vote is
// its own), the rest runs after the exchange vote with a vote of its own; an
// in-place call that fails there may hold the result in recvbuf.
//
// Types: the allgather algorithm sums the wire values in the accumulation
// type (fp32 for half tensors); the dense algorithm reduces in the wire type
// itself, as NCCL and MPI_Allreduce of that type would.
//
// A rank that fails anywhere still takes part in every collective of the
// step (transport.h's contract), so nobody waits; the votes carry the
// failure to every rank and nothing is committed anywhere.
#include <algorithm>
#include <cstring>

#include "algo/agree.h"
#include "algo/allreduce_step.h"
#include "algo/gather_slot.h"
#include "algo/global_topk.h"
#include "algo/packed_message.h"
#include "algo/split_allreduce.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

size_t denseBytes(const Step& s) { return s.c->count * dtypeSize(s.c->wireType); }

// Lays the selection out in `wire` as one contiguous message
// (packed_message.h).
dctResult_t pack(Step& s) {
  dctCompressor_t c = s.c;
  const Message& msg = s.msg;
  const size_t valueBytes = dtypeSize(c->wireType);
  DCTCHECK(c->wire.reserve(packedMessageRoom(msg.nnz, c->indexBytes, valueBytes)));
  return packMessage(c, msg.indices, msg.values, msg.nnz, valueBytes, 0, c->wire.as<char>(), s.bytes, s.stream);
}

bool splits(const Step& s) { return s.plan.algorithm == dctAlgoSplit || s.plan.algorithm == dctAlgoGlobalTopk; }

// Everything this rank can do (and fail at) before talking to the others.
dctResult_t localWork(Step& s) {
  dctCompressor_t c = s.c;
  DCTCHECK(c->ops->streamBegin(c->kernels, s.stream));
  // An owner residual this step will not read joins the worker residual
  // (with ownerReturn no step reads one: a restored keeping state's moves).
  const bool global = s.plan.algorithm == dctAlgoGlobalTopk && !c->config.ownerReturn;
  const int P = s.comm->size, me = s.comm->rank;
  const size_t begin = global ? splitRangeBegin(c->count, P, me) : 0;
  DCTCHECK(foldOwnerResidual(c, begin, global ? splitRangeBegin(c->count, P, me + 1) - begin : 0, s.stream));
  DCTCHECK(s.comm->transport->prepare(s.comm, s.target, denseBytes(s), s.stream));
  if (s.sendGradientAsIs) {
    s.draft = StepDraft{};
    s.draft.tau = c->tau;
    s.draft.nnz = c->count;
    s.bytes = denseBytes(s);
    return dctSuccess;
  }
  if (s.plan.algorithm == dctAlgoDense) {
    // Dense costs the same whatever it carries: send all of acc (zero
    // residual after it), written where the sum goes.
    s.msg.dense = s.target;
    s.msg.everyNonzero = true;
    DCTCHECK(compressStep(c, s.send, s.msg, s.draft, s.stream));
    s.bytes = denseBytes(s);
    return dctSuccess;
  }
  s.msg.storage = &c->selection;
  DCTCHECK(compressStep(c, s.send, s.msg, s.draft, s.stream));
  if (!splits(s)) return pack(s);
  if (s.plan.algorithm == dctAlgoGlobalTopk) DCTCHECK(keepSent(c, s.msg, s.stream));
  if (s.plan.halving) {  // laid out in the agreement, from the selection
    s.bytes = 0;
    return dctSuccess;
  }
  DCTCHECK(splitPack(c, s.comm, s.msg, s.pieces, s.stream));
  s.bytes = s.pieces.bytes;
  return dctSuccess;
}

// In the header's flags: this rank's split plan exchanges by recursive halving.
constexpr int32_t kHalving = 2;

// Recursive halving's schedule, bounds and buffers from the agreed counts,
// once every rank is known to run it.
dctResult_t prepareHalving(Step& s, const std::vector<CallHeader>& all) {
  std::vector<uint64_t> nnz(all.size());
  for (size_t r = 0; r < all.size(); r++) {
    if (!(all[r].flags & kHalving))
      return fail(s.comm, dctInvalidArgument, "dctSparseAllreduce: rank %zu exchanges pairwise, this rank by halving",
                  r);
    nnz[r] = all[r].nnz;
  }
  s.halving.c = s.c;
  s.halving.comm = s.comm;
  return halvingPrepare(s.halving, nnz.data(), s.msg, s.stream);
}

// After the headers: room for every rank's message, sized by the agreement.
dctResult_t reserveGathered(Step& s, const std::vector<CallHeader>& all) {
  if (splits(s) && s.plan.halving) return prepareHalving(s, all);
  if (s.plan.algorithm != dctAlgoAllgather) return dctSuccess;
  size_t total = 0;
  DCTCHECK(checkAnnounced(s.comm, all, s.c->count, dtypeSize(s.c->wireType), s.c->indexBytes, total,
                          "dctSparseAllreduce"));
  DCTCHECK(s.c->gathered.reserve(total));
  return s.comm->transport->prepare(s.comm, s.c->gathered.as(), total, s.stream);
}

// The allgather plan's message copied into this rank's gather slot where it
// fits (host twin, not nested: a hierarchical step's comms keep agree()).
dctResult_t slotMessage(Step& s, CallHeader& mine) {
  const size_t slot = s.c->ops->device || s.nesting ? 0 : s.comm->gatherSlot;
  if (s.plan.algorithm != dctAlgoAllgather || slot == 0 || s.bytes > slot) return dctSuccess;
  mine.flags |= kInSlotFlag;
  return s.c->ops->copy(s.c->kernels, sendSlot(s.comm), s.c->wire.as(), s.bytes, s.stream);
}

dctResult_t exchange(Step& s, const std::vector<CallHeader>& all) {
  dctCompressor_t c = s.c;
  if (s.tiny) {
    DCTCHECK(mergeGathered(c, s.comm, all, s.target, s.stream, "dctSparseAllreduce", false, mergeFactor(s)));
    s.clock.lap(dctPhaseExchange);
  } else if (s.plan.algorithm == dctAlgoAllgather)
    DCTCHECK(gatherMerged(c, s.comm, all, s.target, s.stream, s.clock, s.received, "dctSparseAllreduce",
                          mergeFactor(s)));
  else if (splits(s) && s.plan.halving) {
    OwnerDraft* owner = s.plan.algorithm == dctAlgoGlobalTopk ? &s.owner : nullptr;
    uint64_t inflow = 0;
    const dctResult_t res = halvingExchange(s.halving, s.target, inflow, s.bytes, s.received, s.stream);
    s.clock.lap(dctPhaseExchange);
    DCTCHECK(splitRanges(c, s.comm, res, inflow, s.target, s.stream, s.clock, s.bytes, s.received, owner));
  } else if (splits(s)) {
    size_t allRanksBytes = 0;
    for (const CallHeader& h : all) allRanksBytes += h.bytes;
    OwnerDraft* owner = s.plan.algorithm == dctAlgoGlobalTopk ? &s.owner : nullptr;
    DCTCHECK(splitExchange(c, s.comm, s.pieces, allRanksBytes, s.target, s.stream, s.clock, s.bytes, s.received,
                           owner));
  }
  else {
    const void* from = s.sendGradientAsIs ? s.send : s.target;  // the selection is already in the target
    DCTCHECK(s.comm->transport->allreduce(s.comm, from, s.target, c->count, c->wireType, s.stream));
    s.received = denseBytes(s);
    s.clock.lap(dctPhaseExchange);
  }
  if (s.plan.algorithm == dctAlgoGlobalTopk && returnsUndelivered(c, s.msg)) {
    DCTCHECK(returnUndelivered(c, s.msg, s.target, s.targetType, s.stream));
    s.draft.residualZero = false;
  }
  // Averaged here, before the vote, when built in recvbuf (the allgather
  // plan's merge averages as it builds: mergeFactor); a staged result is
  // averaged by finish() as it is copied out after the commit (in place,
  // sendbuf must survive until then).
  if (s.op == dctAvg && s.averageOver > 1 && s.target == s.recv && mergeFactor(s) == 1.0)
    DCTCHECK(c->ops->scale(c->kernels, s.target, c->count, c->dtype, 1.0 / s.averageOver, s.stream));
  s.clock.lap(dctPhaseReduce);
  return dctSuccess;
}

// A staged result reaches recvbuf in the tensor's type, averaged on the way.
dctResult_t finish(Step& s) {
  if (s.target == s.recv) return dctSuccess;
  dctCompressor_t c = s.c;
  const double factor = s.op == dctAvg && s.averageOver > 1 ? 1.0 / s.averageOver : 1.0;
  if (s.targetType == c->dtype && factor == 1.0)
    return c->ops->copy(c->kernels, s.recv, s.target, c->count * dtypeSize(c->dtype), s.stream);
  return c->ops->convert(c->kernels, s.recv, c->dtype, s.target, s.targetType, c->count, factor, s.stream);
}

void commit(Step& s, const std::vector<CallHeader>& all) {
  dctCompressor_t c = s.c;
  // The first rank with the longest previous step (waiting excluded): the
  // same on every rank, so every rank's tuner learns the same sample.
  size_t slowest = 0;
  c->lastMessages.resize(all.size());
  for (size_t r = 0; r < all.size(); r++) {
    c->lastMessages[r] = RankMessage{all[r].nnz, all[r].bytes, all[r].lastStepNs};
    if (all[r].lastStepNs > all[slowest].lastStepNs) slowest = r;
  }
  c->tuner.commit(s.plan.decision, static_cast<double>(all[slowest].lastStepNs) * 1e-3, c->stats.step,
                  static_cast<double>(all[slowest].lastLocalNs) * 1e-3);
  // What the pipelined attempt's chunks needed sizes the next one's slots;
  // a step without one leaves no history.
  c->chunkNeeds = std::move(s.chunkNeeds);
  c->chunkElems = c->chunkNeeds.empty() ? 0 : s.chunkElems;
  commitOwner(c, s.owner);
  commitStep(c, s.draft, s.bytes, s.received, s.plan.algorithm);
}

bool averaged(const Step& s) { return s.op == dctAvg && s.averageOver > 1; }

// In place on the host in the tensor's type: the result is finished in its
// staging buffer and copied into recvbuf after the commit.
bool copiesAfterCommit(const Step& s) {
  return !s.nesting && s.send == s.recv && !s.c->ops->device && s.targetType == s.c->dtype;
}

// All that can fail once the exchange is done: the result finished into
// recvbuf (copiesAfterCommit: in its staging buffer), the stream work ended.
dctResult_t tail(Step& s) {
  dctCompressor_t c = s.c;
  if (!copiesAfterCommit(s)) DCTCHECK(finish(s));
  else if (averaged(s) && mergeFactor(s) == 1.0)  // in place, element by element (scale takes fp32/fp64 only)
    DCTCHECK(c->ops->convert(c->kernels, s.target, c->dtype, s.target, c->dtype, c->count, 1.0 / s.averageOver,
                             s.stream));
  return c->ops->streamEnd(c->kernels, s.stream);
}

// Whether this rank's tail can fail: a host copy cannot, a device twin's
// work and a conversion or averaging (split through the pool) can.
bool tailCanFail(const Step& s) {
  return s.c->ops->device || (s.target != s.recv && (s.targetType != s.c->dtype || averaged(s)));
}

// In the header's flags: this rank's tail runs after the exchange vote and
// can fail, so the step votes on it before committing.
constexpr int32_t kLateTail = 1;

bool lateTailVote(const std::vector<CallHeader>& all) {
  for (const CallHeader& h : all)
    if (h.flags & kLateTail) return true;
  return false;
}

// Every rank's exchange has succeeded: the tail where it still has to run
// (nested: before the outer step decides), then the commit.
dctResult_t complete(Step& s, const std::vector<CallHeader>& all, bool tailDone, const char* fn) {
  dctCompressor_t c = s.c;
  if (s.nesting) DCTCHECK(s.nesting->beforeCommit(tail(s), s.plan.algorithm, s.draft.threshold, s.clock));
  // The late vote follows the headers alone: a rank whose tail already ran
  // (called out of place) votes too when another rank's tail is late.
  else if (lateTailVote(all)) DCTCHECK(vote(s.comm, tailDone ? dctSuccess : tail(s), s.stream, fn, "copy of the result"));
  else if (!tailDone) (void)tail(s);  // no rank's can fail
  commit(s, all);
  if (copiesAfterCommit(s)) (void)c->ops->copy(c->kernels, s.recv, s.target, c->count * dtypeSize(c->dtype), s.stream);
  s.clock.lap(dctPhaseOther);
  s.clock.record(c->stats.phaseUs, c->stats.totalPhaseUs);
  DCT_TRACE("step %llu: nnz %llu tau %g algo %d chunks of %zu; ms: compress %.2f agree %.2f exchange %.2f reduce %.2f "
            "total %.2f (waiting %.2f)",
            (unsigned long long)c->stats.step, (unsigned long long)c->stats.nnz, c->tau.tau,
            static_cast<int>(s.plan.algorithm), s.chunkElems, s.clock.us(dctPhaseCompress) * 1e-3,
            s.clock.us(dctPhaseAgree) * 1e-3, s.clock.us(dctPhaseExchange) * 1e-3, s.clock.us(dctPhaseReduce) * 1e-3,
            s.clock.totalUs() * 1e-3, s.clock.waitingUs() * 1e-3);
  // Auto learns the step less this rank's waiting (header gathers; see the
  // top of the file): the local work stays in, since the dense plan's steady
  // state skips the compressor's passes, which the sparse plans pay.
  c->lastStepNs = static_cast<uint64_t>(std::max(0.0, s.clock.totalUs() - s.clock.waitingUs()) * 1e3);
  c->lastLocalNs = static_cast<uint64_t>((s.clock.us(dctPhaseCompress) + s.clock.us(dctPhaseReduce)) * 1e3);
  return dctSuccess;
}

// Auto on a device waits for the stream where it times a step, so the step's
// time holds the device work it queued, and no other.
bool timesDevice(const Step& s) { return s.c->config.algorithm == dctAlgoAuto && s.c->ops->device; }

// The step in one piece: local work, agreement, exchange, tail, vote.
// tailDone: the tail ran before the vote (all but nested and some in-place steps).
dctResult_t unchunked(Step& s, CallHeader& mine, std::vector<CallHeader>& all, bool& tailDone, const char* fn) {
  dctCompressor_t c = s.c;
  // The caller's work already queued on the stream is waiting, not this
  // step's local work (nested, the stream holds the node's reduce: the step's).
  if (mine.localError == dctSuccess && timesDevice(s) && !s.nesting) {
    mine.localError = c->ops->synchronize(c->kernels, s.stream);
    s.clock.lapWaiting();
  }
  if (mine.localError == dctSuccess) mine.localError = caught(s.comm, fn, [&] { return localWork(s); });
  if (mine.localError == dctSuccess && timesDevice(s)) mine.localError = c->ops->synchronize(c->kernels, s.stream);
  mine.nnz = s.draft.nnz;
  mine.bytes = s.bytes;
  if (mine.localError == dctSuccess) mine.localError = slotMessage(s, mine);
  s.clock.lap(dctPhaseCompress);
  const dctResult_t agreed = agreeOrSlots(s.comm, mine, all, s.stream, fn, s.tiny, [&] {
    s.clock.lapWaiting();  // every rank has arrived
    s.tiny = allInSlots(all);
    return s.tiny ? viewSlots(c, s.comm, all, s.stream, s.received, fn, false) : reserveGathered(s, all);
  });
  if (!s.tiny) DCTCHECK(agreed);
  s.clock.lap(dctPhaseAgree);
  dctResult_t exchanged = agreed == dctSuccess ? exchange(s, all) : agreed;
  tailDone = !s.nesting && (s.send != s.recv || copiesAfterCommit(s));  // sendbuf stays as it is
  if (exchanged == dctSuccess && tailDone) exchanged = tail(s);
  if (exchanged == dctSuccess && timesDevice(s)) exchanged = c->ops->synchronize(c->kernels, s.stream);
  DCTCHECK(vote(s.comm, exchanged, s.stream, fn, s.tiny ? "agreement" : "exchange"));
  s.clock.lap(dctPhaseAgree);
  // Alike on every rank: the same headers and plan.
  if (s.plan.algorithm == dctAlgoAllgather && !s.nesting) learnGatherSlot(s.comm, all);
  else learnNoSlotCall(s.comm);
  return dctSuccess;
}

}  // namespace

double mergeFactor(const Step& s) {
  const bool merges = s.plan.algorithm == dctAlgoAllgather && averaged(s) && s.targetType == s.c->dtype;
  return merges && (s.target == s.recv || copiesAfterCommit(s)) ? 1.0 / s.averageOver : 1.0;
}

dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                            const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                            dctResult_t localError, const char* fn, const Nesting* nesting) {
  CallHeader mine = allreduceHeader(localError, count, dtype, op);
  std::vector<CallHeader> all;
  if (localError != dctSuccess || count == 0) return agree(comm, mine, all, stream, fn);

  Step s{sendbuf, recvbuf, recvbuf, dctFloat32, op, c, comm, stream, Plan{}};
  // Local work runs under caught() up to the agreement: a rank out of memory
  // still takes part in it, and every rank fails.
  mine.localError = caught(comm, fn, [&] {
    s.plan = planAlgorithm(c, comm);
    return dctSuccess;
  });
  s.averageOver = nesting ? nesting->averageOver : comm->size;
  s.nesting = nesting;
  if (nesting) s.clock = nesting->clock;
  // Plain: a dense step with no residual to add and nothing to round sends
  // the gradient as is: no pass over it at all (auto's steady state on
  // tensors too small or too dense to compress).
  s.sendGradientAsIs = s.plan.algorithm == dctAlgoDense && c->residualZero && c->wireType == c->dtype;
  s.targetType = s.plan.algorithm == dctAlgoDense ? c->wireType : c->accType;
  stampConfig(mine, c->config, nesting ? kPathHierarchical : kPathTopk);
  mine.algorithm = s.plan.algorithm;
  if (splits(s) && s.plan.halving) mine.flags |= kHalving;
  mine.mode = inWarmup(c) ? 1 : 0;
  mine.lastStepNs = c->lastStepNs;
  mine.lastLocalNs = c->lastLocalNs;
  if (mine.localError == dctSuccess && (sendbuf == recvbuf || s.targetType != dtype)) {  // staged: sendbuf must survive, or types differ
    mine.localError = c->staged.reserve(count * dtypeSize(c->accType));
    s.target = c->staged.as();
  }
  // Room for the exchange's tables and the commit's: nothing allocates after the agreement.
  if (mine.localError == dctSuccess) mine.localError = caught(comm, fn, [&] {
    s.chunkElems = pipelineChunkElems(s);
    c->lastMessages.reserve(comm->size);
    return c->rankArrays.reserve(comm->size);
  });
  const bool late = !nesting && tailCanFail(s);  // after the pipelined step's vote, or in place
  if (s.chunkElems) {
    bool fallback = false;
    const CallHeader args = mine;
    if (late) mine.flags |= kLateTail;
    DCTCHECK(pipelinedStep(s, mine, all, fallback, fn));
    if (!fallback) {
      learnNoSlotCall(comm);  // a pipelined step: its messages did not fit the slots
      return complete(s, all, false, fn);
    }
    mine = args;  // every rank falls back alike: the unchunked step, from scratch
  }
  if (late && sendbuf == recvbuf && !copiesAfterCommit(s)) mine.flags |= kLateTail;
  bool tailDone = false;
  DCTCHECK(unchunked(s, mine, all, tailDone, fn));
  return complete(s, all, tailDone, fn);
}

}  // namespace dct
