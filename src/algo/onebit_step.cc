// The 1-bit allreduce queued on the caller's stream (onebit_step_args.h):
//
//   worker compress      sendbuf + committed error -> worker slots
//   alltoallv            worker slots (sizes fixed by count and ranks)
//   server compress      mean of the received slots + server error -> server slot
//   allgather            server slots
//   check, post, vote    the verdict: the comm's sticky error, this rank's
//                        failures, every rank's (in place on NCCL)
//   commit               vote 0: the errors swap in (not on a non-finite
//                        step), the step counts (stream_args.h: onebitAdvance)
//   decode               a committed step's result into recvbuf
//
// Nothing is read back: scales and the non-finite flag stay in the twin's
// memory, the statistics are settled lazily (settleStream). In place is
// safe without staging: recvbuf is written only after the commit, which a
// failed step never reaches. Failures follow the fixed-capacity step
// (docs/fixed_capacity.md): a failed vote changes no state and sets the
// comm's sticky error; later steps run their collectives but commit
// nothing, and return the error.
#include "algo/onebit_step.h"

#include <cstring>

#include "algo/stream_step.h"
#include "base/caught.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/compressor.h"
#include "core/stream_setup.h"
#include "transport/comm.h"

namespace dct {

bool onebitQueues(dctCompressor_t c) {
  // Segments stay synchronous: their scales are read back to the host.
  return c->ops != nullptr && c->ops->onebitStepCompress != nullptr && asynchronous(c) && c->stream.agreed &&
         c->count > 0 && !inWarmup(c) && c->onebit.readyFor(c->ops, c->kernels) && !c->onebit.seg.many();
}

void onebitAgreed(dctCompressor_t c, size_t sent, size_t received) {
  c->stream.sentBytes = sent;
  c->stream.receivedBytes = received;
  c->stream.algorithm = static_cast<dctAlgorithm_t>(dctNumAlgorithms);  // as the synchronous step reports
  c->stream.agreed = true;
}

size_t onebitExchangeSizes(dctCompressor_t c, dctComm_t comm, size_t slotBytes) {
  const int P = comm->size;
  RankArrays& a = c->rankArrays;
  a.sizes.assign(P, slotBytes);
  a.recvBytes.assign(P, slotBytes);
  a.offsets.assign(P, 0);
  for (int q = 0; q < P; q++) a.offsets[q] = q * slotBytes;
  return static_cast<size_t>(P) * P * slotBytes;
}

namespace {

// What every rank's queued step must agree on, in its slots: the call's
// arguments and what shapes the slots (the first, synchronous step agreed
// the rest in its header).
uint64_t onebitCallDigest(dctCompressor_t c, const dctRedOp_t& op, size_t slotBytes) {
  int32_t rawOp = 0;
  std::memcpy(&rawOp, &op, sizeof rawOp);
  return digestOf(0x6463745f31626974ull, {static_cast<uint64_t>(c->count), static_cast<uint64_t>(c->dtype),
                                          static_cast<uint64_t>(static_cast<uint32_t>(rawOp)), slotBytes,
                                          static_cast<uint64_t>(c->config.warmupSteps)});
}

}  // namespace

dctResult_t onebitQueuedStep(const void* sendbuf, void* recvbuf, size_t count, const dctRedOp_t& op, dctCompressor_t c,
                             dctComm_t comm, void* stream, dctResult_t local, const char* fn) {
  if (local == dctSuccess && count != c->count)
    local = fail(comm, dctInvalidArgument, "%s: count %zu differs from the compressor's %zu", fn, count, c->count);
  if (local == dctSuccess && !c->stream.live) local = caught(comm, fn, [&] { return publishStream(c, stream); });
  const KernelOps& ops = *c->ops;
  const OnebitChunks chunks(c->count, comm->size);
  const size_t scaleBytes = dtypeSize(accumulationType(c->dtype));
  const OnebitArena arena(chunks, scaleBytes);
  char* base = c->onebit.arena.as<char>();
  OnebitStepArgs a{};
  a.state = c->stream.state.as<StreamState>();
  a.failed = comm->asyncError.pointer(ops.device);
  a.input = sendbuf;
  a.dtype = c->dtype;
  a.n = c->count;
  a.errors[0] = c->residuals[0].as();
  a.errors[1] = c->residuals[1].as();
  a.serverN = chunks.length(comm->rank);
  a.serverErrors[0] = c->onebit.serverErrors[0].as();
  a.serverErrors[1] = c->onebit.serverErrors[1].as();
  a.workerSlots = base + arena.workerSlots;
  a.receivedSlots = base + arena.receivedSlots;
  a.serverSlot = base + arena.serverSlot;
  a.gatheredSlots = base + arena.gatheredSlots;
  a.slotBytes = arena.slotBytes;
  a.chunkWords = chunks.chunkWords;
  a.ranks = comm->size;
  a.scratch = reinterpret_cast<double*>(base + arena.scratch);
  a.result = recvbuf;
  a.factor = op == dctSum ? static_cast<double>(comm->size) : 1.0;
  a.digest = onebitCallDigest(c, op, arena.slotBytes);
  StreamStepArgs v{};  // the vote and the commit
  v.state = a.state;
  v.failed = a.failed;
  v.sticky = true;
  v.onebit = true;
  const size_t total = onebitExchangeSizes(c, comm, arena.slotBytes);
  const RankArrays& sizes = c->rankArrays;
  const Transport* t = comm->transport;
  const int32_t before = comm->asyncError.read();
  // Every collective runs whatever failed before it (no peer waits); a
  // failure here is posted into the vote.
  auto keep = [&](dctResult_t r) {
    if (local == dctSuccess) local = r;
  };
  keep(ops.streamBegin(c->kernels, stream));
  if (local == dctSuccess) keep(ops.onebitStepCompress(c->kernels, &a, 0, stream));
  keep(t->alltoallv(comm, a.workerSlots, sizes.sizes.data(), sizes.offsets.data(),
                    const_cast<void*>(a.receivedSlots), sizes.recvBytes.data(), sizes.offsets.data(), total, stream));
  if (local == dctSuccess) keep(ops.onebitStepCompress(c->kernels, &a, 1, stream));
  keep(t->allgather(comm, a.serverSlot, const_cast<void*>(a.gatheredSlots), a.slotBytes, stream));
  if (local == dctSuccess) keep(ops.onebitStepCheck(c->kernels, &a, stream));
  if (local != dctSuccess) (void)ops.streamPost(c->kernels, &v, local, stream);
  keep(voteOnTwin(c, comm, v, stream));
  keep(ops.streamCommit(c->kernels, &v, stream));
  keep(ops.onebitStepDecode(c->kernels, &a, stream));
  keep(ops.streamEnd(c->kernels, stream));
  c->stream.lastStream = stream;
  return queuedOutcome(comm, local, before, fn);
}

}  // namespace dct
