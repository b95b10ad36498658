// The fixed-capacity step (config.capacityFactor): every rank's message is a
// slot of c * k entries fixed when the compressor was made, so a step is
// the same sequence every time and, on a device, is queued on the caller's
// stream without waiting for anything:
//
//   estimate, select into the slot      (kernels/stream_args.h)
//   allgather of every rank's slot      (fixed size: no counts exchanged)
//   merge: check every slot, sum in rank order, the verdict into the vote
//   vote: max of every rank's verdict   (in place on the device with NCCL)
//   commit (vote 0) or drop, finish the result into recvbuf
//
// On a device, two collectives a step instead of four: the header agreement
// runs once, on the compressor's first fixed-capacity step (synchronous: it
// also puts the state in the twin's memory), and agrees everything that
// sizes the slots. Later steps carry a digest of the call's arguments and
// settings in every slot instead; a slot whose digest differs fails the
// step on every rank. A rank whose own checks fail still queues the step
// (with the compressor's slot size) and votes its error, so no peer waits.
// Host twins add the header gather every path opens with (three
// collectives; hostHeaders), so a rank that passes another compressor
// fails every rank instead of leaving them in a collective of another size.
//
// Failures: on a host twin the step is synchronous and returns the vote's
// outcome, the state unchanged on failure (a retry is exact). On a device
// the outcome arrives after the call returns: a failed vote sets the comm's
// sticky error (dctCommGetAsyncError), and every later step on the comm
// still runs its collectives (peers never wait) but changes nothing and
// returns that error. The compressors keep their last committed state.
#include "algo/stream_step.h"

#include <cstring>

#include "algo/agree.h"
#include "algo/stream_call.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "kernels/sampling.h"
#include "transport/comm.h"

namespace dct {
namespace {

// What every rank's slot must agree on: the call's arguments and what
// shapes the slots and the sum.
uint64_t callDigest(dctCompressor_t c, const dctRedOp_t& op) {
  uint64_t density = 0, factor = 0;
  std::memcpy(&density, &c->config.density, sizeof density);
  std::memcpy(&factor, &c->config.capacityFactor, sizeof factor);
  int32_t rawOp = 0;
  std::memcpy(&rawOp, &op, sizeof rawOp);
  return digestOf(0x6463745f73746570ull,
                  {static_cast<uint64_t>(c->count), static_cast<uint64_t>(c->dtype),
                   static_cast<uint64_t>(static_cast<uint32_t>(rawOp)), static_cast<uint64_t>(c->wireType), density,
                   factor, static_cast<uint64_t>(c->stream.slotBytes), static_cast<uint64_t>(c->config.warmupSteps),
                   static_cast<uint64_t>(fixedGlobalTopk(c))});
}

// The compressor's slots, state and the comm's transport room, once.
dctResult_t reserveSlots(dctCompressor_t c, dctComm_t comm, void* stream) {
  if (fixedGlobalTopk(c)) return reserveGlobalTopk(c, comm, stream);
  StreamSetup& st = c->stream;
  st.capacity = slotCapacity(c);
  st.slotBytes = slotBytes(st.capacity, c->indexBytes, dtypeSize(c->wireType));
  size_t all = 0;
  if (!checkedMul(st.slotBytes, static_cast<size_t>(comm->size), all))
    return fail(comm, dctInvalidArgument, "dctSparseAllreduce: %d slots of %zu bytes do not fit in memory",
                comm->size, st.slotBytes);
  st.sentBytes = st.slotBytes;
  st.receivedBytes = st.slotBytes * static_cast<uint64_t>(comm->size - 1);
  st.algorithm = dctAlgoAllgather;
  DCTCHECK(c->wire.reserve(st.slotBytes));
  DCTCHECK(c->gathered.reserve(all));
  DCTCHECK(c->ops->zero(c->kernels, c->wire.as(), st.slotBytes, stream));
  if (c->ops->device) DCTCHECK(comm->asyncError.mapForDevice());
  return comm->transport->prepare(comm, c->gathered.as(), all, stream);
}

// The host state into the twin's memory, the owner residual first moved
// where this comm's range needs it.
dctResult_t publish(dctCompressor_t c, void* stream) {
  DCTCHECK(foldForStream(c, stream));
  return publishStream(c, stream);
}

// The header's mode on the step that agrees the slots: a rank whose
// compressor is past it is in another phase.
constexpr int32_t kAgreeingSlots = 2;

// This rank's header for a fixed-capacity step: the call, the settings
// that shape the slots, and the phase (`mode`).
CallHeader slotHeader(dctCompressor_t c, const dctRedOp_t& op, dctResult_t local, int32_t mode) {
  CallHeader h = allreduceHeader(local, c->count, c->dtype, op);
  stampConfig(h, c->config, kPathFixed);
  h.algorithm = fixedGlobalTopk(c) ? dctAlgoGlobalTopk : dctAlgoAllgather;
  h.mode = mode;
  h.bytes = c->stream.slotBytes;
  return h;
}

// The first fixed-capacity step's agreement (synchronous): every rank's
// header, naming what differs, and its room, voted.
dctResult_t agreeSlots(dctCompressor_t c, dctComm_t comm, const dctRedOp_t& op, void* stream, const char* fn) {
  const dctResult_t ready = caught(comm, fn, [&] {
    DCTCHECK(reserveSlots(c, comm, stream));
    return c->stream.live ? dctSuccess : publish(c, stream);
  });
  // A rank already past this phase disagrees (hostHeaders).
  const CallHeader mine = slotHeader(c, op, ready, kAgreeingSlots);
  std::vector<CallHeader> all;
  DCTCHECK(agree(comm, mine, all, stream, fn));
  c->stream.agreed = true;
  return dctSuccess;
}

using Call = StreamCall;

}  // namespace

StreamStepArgs stepArgs(const Call& k, void* target) {
  dctCompressor_t c = k.c;
  StreamStepArgs a{};
  a.state = c->stream.state.as<StreamState>();
  a.failed = k.comm->asyncError.pointer(c->ops->device);
  a.sticky = asynchronous(c);
  a.grad = k.send;
  a.gradType = c->dtype;
  a.residuals[0] = c->residuals[0].as();
  a.residuals[1] = c->residuals[1].as();
  a.n = c->count;
  a.accType = c->accType;
  a.errorFeedback = c->config.errorFeedback;
  a.density = c->config.density;
  a.interval = static_cast<uint64_t>(c->config.thresholdInterval);
  a.seed = c->config.seed;
  a.k = targetNnz(c);
  a.tauFloor = tauFloor(c);
  a.capacity = c->stream.capacity;
  a.indexBytes = c->indexBytes;
  a.wireType = c->wireType;
  a.valueLimit = c->valueLimit;
  a.slotBytes = c->stream.slotBytes;
  a.digest = callDigest(c, k.op);
  a.slot = c->wire.as();
  a.slots = c->gathered.as();
  a.ranks = k.comm->size;
  a.target = target;
  a.result = k.recv;
  a.resultType = c->dtype;
  a.factor = k.op == dctAvg ? 1.0 / k.comm->size : 1.0;
  return a;
}

namespace {

// The step's ops and collectives in order. A failure this rank sees here
// (a launch, a transport call) is posted into the vote; the collectives
// run regardless, so every rank's sequence matches.
dctResult_t queueStep(const Call& k, const StreamStepArgs& a, dctResult_t local) {
  if (fixedGlobalTopk(k.c)) return queueGlobalTopk(k, a, local);
  dctCompressor_t c = k.c;
  const KernelOps& ops = *c->ops;
  auto keep = [&](dctResult_t r) {
    if (local == dctSuccess) local = r;
  };
  keep(ops.streamBegin(c->kernels, k.stream));
  if (local == dctSuccess) keep(ops.streamEstimate(c->kernels, &a, k.stream));
  if (local == dctSuccess) keep(ops.streamSelect(c->kernels, &a, k.stream));
  keep(k.comm->transport->allgather(k.comm, a.slot, const_cast<void*>(a.slots), a.slotBytes, k.stream));
  if (local == dctSuccess) keep(ops.streamMerge(c->kernels, &a, k.stream));
  if (local != dctSuccess) (void)ops.streamPost(c->kernels, &a, local, k.stream);
  keep(voteOnTwin(c, k.comm, a, k.stream));
  keep(ops.streamCommit(c->kernels, &a, k.stream));
  keep(ops.streamFinish(c->kernels, &a, k.stream));
  keep(ops.streamEnd(c->kernels, k.stream));
  c->stream.lastStream = k.stream;
  return local;
}

// Host twins (whose steps are synchronous anyway) open every step with the
// header allgather every other path opens with: a rank that passes another
// compressor, or none, meets the others in a collective of the same size,
// and every rank fails. No vote follows headers that agree (they size
// nothing here, and every rank reads the same ones); headers that disagree
// are voted, as agree() votes them on the other paths. A rank whose gather
// itself failed goes on to the slots, its failure posted: its peers, who
// received its header, go on too. False: the step ends here with `res`.
bool hostHeaders(const Call& k, dctResult_t& local, dctResult_t& res, const char* fn) {
  const CallHeader mine = slotHeader(k.c, k.op, local, 0);
  std::vector<CallHeader> all;
  const dctResult_t gathered = gatherHeaders(k.comm, mine, all, k.stream, fn);
  if (gathered != dctSuccess) {
    if (local == dctSuccess) local = gathered;
    return true;
  }
  const dctResult_t checked = checkHeaders(k.comm, mine, all, fn);
  if (checked == dctSuccess) return true;
  res = vote(k.comm, checked, k.stream, fn, "agreement");
  return false;
}

// A host twin's outcome, read from the state: dctSuccess once committed.
dctResult_t outcome(const Call& k, const StreamStepArgs& a, dctResult_t local, const char* fn) {
  if (local != dctSuccess) return local;
  const StreamState& s = *a.state;
  if (s.lastOk) return dctSuccess;
  const auto code = s.vote > 0 && s.vote < dctNumResults ? static_cast<dctResult_t>(s.vote) : dctInternalError;
  const char* why = code == dctInvalidUsage    ? "the ranks' calls differ (arguments or settings: the slots' digests)"
                    : code == dctInternalError ? "a malformed slot arrived (count or indices out of range)"
                                               : dctGetErrorString(code);
  return fail(k.comm, code, "%s: the fixed-capacity step failed on some rank: %s; nothing was committed on any rank",
              fn, why);
}

}  // namespace

dctResult_t streamStep(const void* sendbuf, void* recvbuf, size_t count, const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm,
                       void* stream, dctResult_t localError, const char* fn) {
  if (localError == dctSuccess && count != c->count)
    localError = fail(comm, dctInvalidArgument, "%s: count %zu differs from the compressor's %zu", fn, count, c->count);
  if (localError == dctSuccess && c->ops && !c->ops->streamSelect)
    localError = fail(comm, dctNotSupported, "%s: the %s twin has no fixed-capacity step", fn, c->ops->name);
  const bool first = !c->stream.agreed;
  if (first) {
    if (localError != dctSuccess) {  // take part in the agreement, then fail
      CallHeader mine = allreduceHeader(localError, c->count, c->dtype, op);
      std::vector<CallHeader> all;
      return agree(comm, mine, all, stream, fn);
    }
    DCTCHECK(agreeSlots(c, comm, op, stream, fn));
  }
  const Call k{sendbuf, recvbuf, op, c, comm, stream};
  // The sum is built in recvbuf when it has the accumulator's type and the
  // call is out of place; else in the staging buffer (sendbuf must survive
  // a failed step, and a half tensor is summed in fp32).
  void* target = recvbuf;
  dctResult_t local = localError;
  if (local == dctSuccess && !c->stream.live) local = publish(c, stream);  // a loaded state
  if (sendbuf == recvbuf || c->dtype != c->accType) {
    if (local == dctSuccess) local = caught(comm, fn, [&] { return c->staged.reserve(c->count * dtypeSize(c->accType)); });
    target = c->staged.as();
  }
  dctResult_t ended = dctSuccess;
  if (!first && !asynchronous(c) && !hostHeaders(k, local, ended, fn)) return ended;
  const StreamStepArgs a = stepArgs(k, target);
  const int32_t asyncBefore = comm->asyncError.read();
  local = queueStep(k, a, local);
  if (asynchronous(c)) return queuedOutcome(comm, local, asyncBefore, fn);
  return outcome(k, a, local, fn);
}

uint64_t digestOf(uint64_t seed, std::initializer_list<uint64_t> values) {
  uint64_t h = seed;
  for (uint64_t v : values) {
    uint64_t s = h ^ v;
    h = splitmix64(s);
  }
  return h;
}

bool asynchronous(dctCompressor_t c) { return c->ops->device || c->stream.asyncForTesting; }

// The vote in place where the transport has one for the twin's memory;
// else through the host (the state read back: host twins, staged MPI).
dctResult_t voteOnTwin(dctCompressor_t c, dctComm_t comm, const StreamStepArgs& a, void* stream) {
  const Transport* t = comm->transport;
  if (comm->size == 1) return dctSuccess;
  if (t->voteInPlace && c->ops->device) return t->voteInPlace(comm, &a.state->vote, stream);
  // A rank that cannot read its verdict still votes (that failure): every
  // peer waits in the vote, and the worst verdict drops the step everywhere.
  int32_t mine = 0, worst = 0;
  dctResult_t read = c->ops->copy(c->kernels, &mine, &a.state->vote, sizeof mine, stream);
  if (read == dctSuccess) read = c->ops->synchronize(c->kernels, stream);
  if (read != dctSuccess) mine = read;
  const dctResult_t res = t->vote(comm, mine, &worst, stream);
  if (res != dctSuccess) worst = res;
  // The worst verdict into the state, which the commit reads: by the post
  // (max with this rank's own, itself part of the worst) if the copy fails.
  dctResult_t back = c->ops->copy(c->kernels, &a.state->vote, &worst, sizeof worst, stream);
  if (back != dctSuccess) back = c->ops->streamPost(c->kernels, &a, worst, stream);
  return read != dctSuccess ? read : back;
}

dctResult_t queuedOutcome(dctComm_t comm, dctResult_t local, int32_t asyncBefore, const char* fn) {
  if (local != dctSuccess) return local;
  if (asyncBefore != dctSuccess)
    return fail(comm, static_cast<dctResult_t>(asyncBefore),
                "%s: an earlier step failed after its call returned (%s); this step changed nothing: see "
                "dctCommGetAsyncError",
                fn, dctGetErrorString(static_cast<dctResult_t>(asyncBefore)));
  return dctSuccess;
}

}  // namespace dct
