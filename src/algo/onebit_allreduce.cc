// The 1-bit compressed allreduce (the collective of 1-bit Adam, Tang et al.,
// ICML 2021) as one transaction over every rank, like sparse_allreduce.cc:
//
//   local work   state set-up (first step); the worker compresses sendbuf +
//                its committed error into sign words and one scale, and
//                keeps x as the spare residual (kernels/onebit_kernels.h:
//                keepX; the error x leaves is formed by the next step as it
//                reads x back, so the error costs no pass of its own);
//                transport staging
//   agreement    header allgather + vote
//   exchange     alltoallv of the worker's slots (chunk j's scale and signs
//                to rank j); the server compresses the average of its
//                chunk over the ranks plus its committed error into its own
//                slot, keeping its x as the spare error as the worker does;
//                allgather of the server slots; vote
//   commit       both errors swap in (not on a non-finite step), stats;
//                recvbuf decoded from the server slots
//
// Each scale rides in front of its sign words (onebit_kernels.h's slots),
// so each phase is one collective. With segments (dctCompressorSetSegments)
// the worker has a scale per segment and the server one per piece (a
// segment within its chunk); each slot carries its chunk's pieces' scales
// (as many entries as the most pieces a chunk has), and the segments'
// digest is part of the agreed header.
//
// Chunk j (OnebitChunks: word-aligned, possibly empty) is served by rank j.
// About n/8 bytes leave each rank per phase instead of dense's ~4n.
// Every rank runs every collective of the step whatever failed before it
// (transport.h), so nobody waits; the vote carries a failure to every rank
// and nothing is committed anywhere. Warm-up steps (config.warmupSteps) are
// a plain dense allreduce that leaves the error state alone.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/gather_slot.h"
#include "algo/onebit_step.h"
#include "algo/stream_step.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "base/phase_timer.h"
#include "core/stream_setup.h"
#include "transport/comm.h"

namespace dct {
namespace {

// The header's algorithm field: no dctAlgorithm_t, so a rank calling with a
// top-K compressor disagrees with one calling with a 1-bit compressor.
constexpr int32_t kOnebitHeader = 0x1b17;

struct Step {
  const void* send;
  void* recv;
  dctRedOp_t op;
  dctCompressor_t c;
  dctComm_t comm;
  void* stream;
  OnebitChunks chunks;
  size_t scaleBytes;  // accumulation type: fp32, or fp64 for fp64 tensors
  OnebitArena arena;
  size_t scales;  // scale entries per slot
  bool warm = false;
  void* target = nullptr;  // warm-up: where the dense sum lands (recv, or staged in place)
  void* result = nullptr;  // where finish() writes: recv, or (copiesAfterCommit) staged
  double workerScale = 0, serverScale = 0;
  bool nonFinite = false;  // some server scale is NaN: output NaN, commit no error
  size_t sent = 0, received = 0;
  PhaseTimer clock{};

  char* at(size_t offset) const { return c->onebit.arena.as<char>() + offset; }
  void* serverError(int which) const { return c->onebit.serverErrors[which].as(); }
};

Step makeStep(const void* send, void* recv, dctRedOp_t op, dctCompressor_t c, dctComm_t comm, void* stream) {
  const OnebitChunks chunks(c->count, comm->size);
  const size_t scaleBytes = dtypeSize(accumulationType(c->dtype));
  return Step{send, recv, op, c, comm, stream, chunks, scaleBytes, onebitArenaOf(c), c->onebit.seg.scalesPerSlot};
}

// A compression's segments: the worker's (segments) or this rank's pieces.
void segmentsInto(OnebitCompressArgs& a, const OnebitState& ob, bool server) {
  const OnebitSegments& seg = ob.seg;
  a.scalesPerSlot = seg.scalesPerSlot;
  if (!seg.many() || a.n == 0) return;  // an empty chunk: one (empty) segment
  a.segments = server ? seg.serverData() : seg.data();
  a.segmentCount = server ? seg.serverCount() : seg.count();
  a.pendingScales = server ? ob.serverPendingScales.data() : ob.pendingScales.data();
}

// Payload this rank sends to / receives from the other ranks in one step.
void countBytes(Step& s) {
  const size_t peers = static_cast<size_t>(s.comm->size - 1);
  s.sent = s.received = 2 * peers * s.arena.slotBytes;  // whole slots, in both phases
}

// In place on the host: the result is finished in the staging buffer and
// copied into recvbuf after the commit by a host copy, which cannot fail
// (sendbuf must survive a failed step).
bool copiesAfterCommit(const Step& s) { return s.send == s.recv && !s.c->ops->device; }

dctResult_t localWork(Step& s) {
  dctCompressor_t c = s.c;
  DCTCHECK(c->ops->streamBegin(c->kernels, s.stream));
  DCTCHECK(c->rankArrays.reserve(s.comm->size));  // the exchange's tables: nothing allocates after the agreement
  const size_t P = static_cast<size_t>(s.comm->size);
  c->rankArrays.bytes.reserve(P * s.scales * s.scaleBytes);  // the server scales read back
  const size_t bytes = c->count * dtypeSize(c->dtype);
  s.result = s.recv;
  if (copiesAfterCommit(s) || (s.warm && s.send == s.recv)) {
    DCTCHECK(c->staged.reserve(bytes));
    if (copiesAfterCommit(s)) s.result = c->staged.as();
  }
  if (s.warm) {
    s.target = s.send == s.recv ? c->staged.as() : s.recv;  // sendbuf must survive a failed step
    s.sent = s.received = bytes;
    return s.comm->transport->prepare(s.comm, s.target, bytes, s.stream);
  }
  DCTCHECK(onebitSetUp(c, s.stream));  // first 1-bit step (or first after a re-bind)
  if (asynchronous(c)) {  // the queued steps' state and error word, before they may start
    DCTCHECK(c->stream.state.reserve(sizeof(StreamState)));
    if (c->ops->device) DCTCHECK(s.comm->asyncError.mapForDevice());
  }
  DCTCHECK(s.comm->transport->prepare(s.comm, c->onebit.arena.as(), P * s.arena.slotBytes, s.stream));
  OnebitCompressArgs w{s.send, c->residual(), c->spareResidual(), c->count, c->dtype, s.at(s.arena.workerSlots),
                       s.arena.slotBytes, s.chunks.chunkWords, s.comm->size,
                       reinterpret_cast<double*>(s.at(s.arena.scratch))};
  // One pass: the error the committed x left is formed as x is read, and
  // this step's x is kept for the next one (OnebitState::pending).
  w.keepX = true;
  w.pending = c->onebit.pending;
  w.pendingScale = c->onebit.pendingScale;
  segmentsInto(w, c->onebit, false);
  w.scaleValues = c->onebit.stepScales.data();
  DCTCHECK(c->ops->onebitCompress(c->kernels, &w, s.stream));
  s.workerScale = w.scaleValue;
  countBytes(s);
  return dctSuccess;
}

// The server's part: average of its chunk over the ranks + its error, re-compressed.
dctResult_t serverWork(Step& s) {
  dctCompressor_t c = s.c;
  const int committed = c->onebit.serverCommitted;
  OnebitCompressArgs server{nullptr, s.serverError(committed), s.serverError(1 - committed),
                            s.chunks.length(s.comm->rank), c->dtype, s.at(s.arena.serverSlot), s.arena.slotBytes,
                            s.chunks.chunkWords, 1, reinterpret_cast<double*>(s.at(s.arena.scratch))};
  server.mean = OnebitMean{s.at(s.arena.receivedSlots), s.arena.slotBytes, s.comm->size};
  server.keepX = true;  // one pass, as the worker's
  server.pending = c->onebit.serverPending;
  server.pendingScale = c->onebit.serverPendingScale;
  segmentsInto(server, c->onebit, true);
  server.scaleValues = c->onebit.stepServerScales.data();
  DCTCHECK(c->ops->onebitCompress(c->kernels, &server, s.stream));
  s.serverScale = server.scaleValue;
  if (c->onebit.seg.many() && server.segments == nullptr) c->onebit.stepServerScales[0] = server.scaleValue;
  return dctSuccess;
}

// Every rank sees every server scale: one NaN makes the step non-finite.
dctResult_t readServerScales(Step& s) {
  const int P = s.comm->size;
  const size_t area = s.scales * s.scaleBytes;  // a slot's first bytes
  std::vector<unsigned char>& raw = s.c->rankArrays.bytes;  // reserved by localWork
  raw.assign(P * area, 0);
  for (int j = 0; j < P; j++) {
    const char* scales = s.at(s.arena.gatheredSlots + j * s.arena.slotBytes);
    DCTCHECK(s.c->ops->copy(s.c->kernels, raw.data() + j * area, scales, area, s.stream));
  }
  DCTCHECK(s.c->ops->synchronize(s.c->kernels, s.stream));
  for (size_t k = 0; k < P * s.scales; k++) {
    double v;
    if (s.scaleBytes == 8) std::memcpy(&v, raw.data() + 8 * k, 8);
    else {
      float f;
      std::memcpy(&f, raw.data() + 4 * k, 4);
      v = f;
    }
    if (!std::isfinite(v)) s.nonFinite = true;
  }
  return dctSuccess;
}

// Runs both collectives whatever fails on the way; returns the first error.
dctResult_t exchange(Step& s) {
  dctComm_t comm = s.comm;
  const Transport* t = comm->transport;
  if (s.warm) return t->allreduce(comm, s.send, s.target, s.c->count, s.c->dtype, s.stream);
  const RankArrays& a = s.c->rankArrays;  // reserved by localWork
  const size_t total = onebitExchangeSizes(s.c, comm, s.arena.slotBytes);
  dctResult_t res = dctSuccess;
  auto keep = [&](dctResult_t r) {
    if (res == dctSuccess) res = r;
  };
  keep(t->alltoallv(comm, s.at(s.arena.workerSlots), a.sizes.data(), a.offsets.data(), s.at(s.arena.receivedSlots),
                    a.recvBytes.data(), a.offsets.data(), total, s.stream));
  s.clock.lap(dctPhaseExchange);
  if (res == dctSuccess) res = serverWork(s);
  s.clock.lap(dctPhaseReduce);
  keep(t->allgather(comm, s.at(s.arena.serverSlot), s.at(s.arena.gatheredSlots), s.arena.slotBytes, s.stream));
  if (res == dctSuccess) res = readServerScales(s);
  s.clock.lap(dctPhaseExchange);
  return res;
}

void commit(Step& s) {
  dctCompressor_t c = s.c;
  StepDraft d{};
  d.tau = c->tau;
  d.nnz = c->count;
  d.threshold = s.warm ? 0.0 : s.workerScale;
  d.nonFinite = !s.warm && std::isnan(s.workerScale) ? 1 : 0;
  d.newResidual = !s.warm && !s.nonFinite;  // the worker error swaps in with the residual
  if (d.newResidual) {
    c->onebit.serverCommitted = 1 - c->onebit.serverCommitted;
    c->onebit.pending = true;  // the residual about to be committed holds this step's x
    c->onebit.pendingScale = s.workerScale;
    c->onebit.serverPending = true;
    c->onebit.serverPendingScale = s.serverScale;
    c->onebit.pendingScales.swap(c->onebit.stepScales);  // with segments: the per-segment scales
    c->onebit.serverPendingScales.swap(c->onebit.stepServerScales);
  }
  commitStep(c, d, s.sent, s.received, s.warm ? dctAlgoDense : static_cast<dctAlgorithm_t>(dctNumAlgorithms));
}

// s.result: the decoded server chunks (x P for dctSum), or the warm-up's
// dense sum (/ P for dctAvg). Before the exchange vote, as everything that
// can fail; in place on a device twin (the copy into recvbuf can fail) after
// it, with a vote of its own.
dctResult_t finish(Step& s) {
  dctCompressor_t c = s.c;
  const double P = static_cast<double>(s.comm->size);
  if (s.warm) {
    const double factor = s.op == dctAvg ? 1.0 / P : 1.0;
    if (s.target == s.result && factor == 1.0) return dctSuccess;
    return c->ops->convert(c->kernels, s.result, c->dtype, s.target, c->dtype, c->count, factor, s.stream);
  }
  const double factor = s.nonFinite ? std::numeric_limits<double>::quiet_NaN() : (s.op == dctSum ? P : 1.0);
  OnebitDecodeArgs out{s.at(s.arena.gatheredSlots), s.arena.slotBytes, s.chunks.chunkWords, c->count, c->dtype,
                       s.result, factor};
  out.segments = c->onebit.seg.data();
  out.segmentCount = c->onebit.seg.count();
  out.scalesPerSlot = s.scales;
  return c->ops->onebitDecode(c->kernels, &out, s.stream);
}

bool validQueue(dctCompressor_t c) { return c != nullptr && onebitQueues(c); }

}  // namespace

dctResult_t onebitResidual(dctCompressor_t c, void* out, void* stream) {
  // A compression of the error alone: its x is the error itself, kept into out.
  const OnebitChunks chunks(c->count, c->comm->size);
  const OnebitArena arena = onebitArenaOf(c);
  char* base = c->onebit.arena.as<char>();
  if (!c->onebit.readyFor(c->ops, c->kernels) || base == nullptr) return dctInternalError;
  OnebitCompressArgs a{nullptr, c->residual(), out, c->count, c->dtype, base + arena.workerSlots, arena.slotBytes,
                       chunks.chunkWords, c->comm->size, reinterpret_cast<double*>(base + arena.scratch)};
  a.keepX = true;
  a.pending = true;
  a.pendingScale = c->onebit.pendingScale;
  segmentsInto(a, c->onebit, false);
  std::vector<double> scales(static_cast<size_t>(c->onebit.seg.count()));
  a.scaleValues = scales.data();
  return c->ops->onebitCompress(c->kernels, &a, stream);
}

dctResult_t onebitAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                            const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                            dctResult_t localError, const char* fn) {
  if (validQueue(c)) return onebitQueuedStep(sendbuf, recvbuf, count, op, c, comm, stream, localError, fn);
  // A twin that queues and went back to the host path (a re-bind) first
  // takes its host fields back.
  if (localError == dctSuccess && c->stream.live) {
    localError = settleStream(c);
    c->stream.live = false;
  }
  CallHeader mine = allreduceHeader(localError, count, dtype, op);
  mine.algorithm = kOnebitHeader;
  std::vector<CallHeader> all;
  if (localError != dctSuccess || count == 0) return agree(comm, mine, all, stream, fn);

  stampConfig(mine, c->config, kPathOnebit);
  mine.segments = c->onebit.seg.digest;
  Step s = makeStep(sendbuf, recvbuf, op, c, comm, stream);
  s.warm = inWarmup(c);
  mine.mode = s.warm ? 1 : 0;
  mine.localError = caught(comm, fn, [&] { return localWork(s); });
  mine.bytes = s.sent;
  s.clock.lap(dctPhaseCompress);
  constexpr int32_t kLateTail = 1;  // header flag: this rank finishes its result after the exchange vote
  const bool early = sendbuf != recvbuf || copiesAfterCommit(s);
  if (!early) mine.flags |= kLateTail;
  DCTCHECK(agree(comm, mine, all, stream, fn));
  s.clock.lap(dctPhaseAgree);
  auto tail = [&]() -> dctResult_t {
    DCTCHECK(finish(s));
    dctResult_t res = c->ops->streamEnd(c->kernels, stream);
    s.clock.lap(dctPhaseReduce);
    return res;
  };
  dctResult_t exchanged = exchange(s);
  if (exchanged == dctSuccess && early) exchanged = tail();
  DCTCHECK(vote(comm, exchanged, stream, fn, "exchange"));
  s.clock.lap(dctPhaseAgree);
  bool late = false;
  for (const CallHeader& h : all) late = late || (h.flags & kLateTail);
  if (late) DCTCHECK(vote(comm, early ? dctSuccess : tail(), stream, fn, "copy of the result"));
  s.clock.lap(dctPhaseAgree);

  commit(s);
  learnNoSlotCall(comm);  // alike on every rank: its headers carried the slots for nothing
  if (!s.warm && asynchronous(c)) onebitAgreed(c, s.sent, s.received);  // later steps queue
  if (copiesAfterCommit(s)) (void)c->ops->copy(c->kernels, s.recv, s.result, c->count * dtypeSize(c->dtype), stream);
  s.clock.lap(dctPhaseOther);
  s.clock.record(c->stats.phaseUs, c->stats.totalPhaseUs);
  DCT_TRACE("step %llu: 1-bit%s, worker scale %g%s", (unsigned long long)c->stats.step, s.warm ? " (dense warm-up)" : "",
            s.workerScale, s.nonFinite ? ", non-finite: output NaN, errors kept" : "");
  return dctSuccess;
}

}  // namespace dct
