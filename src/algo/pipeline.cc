// The allgather plan, pipelined: the tensor is cut into chunks; while chunk
// i's packed messages travel (a nonblocking allgatherv, progressed by
// test() between pieces of local work), chunk i + 1 is selected and the
// chunks that arrived are merged, so compute and wire time overlap instead
// of adding up.
//
// Every exchange has a shape fixed before the step from committed state
// (each rank's slot per chunk, sized from what its chunk needed last time;
// only what a rank has crosses the wire), so a rank that failed anywhere
// can still take part in every one of them and nobody waits. Each slot starts with a header (entries, packed bytes,
// bytes needed, status); every rank reads the same headers, so every rank
// reaches the same verdict: commit, fall back to the unchunked step (a
// chunk outgrew its slot, or the selection ran away or ended empty and
// compressStep would re-estimate tau at once), or fail at the exchange vote.
//
// Results are bit for bit the unchunked algorithm's: the same tau selects
// the same entries, and each output element is the same rank-order sum.
#include <algorithm>
#include <cstring>
#include <new>

#include "algo/allreduce_step.h"
#include "algo/packed_message.h"
#include "algo/vote_flag.h"
#include "algo/request_wait.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/cost_model.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

// Redo (the step is redone unchunked): the chunk outgrew its slot, the
// selection ran away or ended empty (compressStep would re-estimate tau at
// once: kChunkRunaway), or an earlier chunk of this rank did either and this
// one was not selected (its need is unknown: the slot's history carries
// over).
enum ChunkStatus : int32_t { kChunkOk = 0, kChunkOutgrew = 1, kChunkFailed = 2, kChunkRunaway = 3, kChunkSkipped = 4 };

struct ChunkHeader {
  uint64_t nnz = 0;
  uint64_t need = 0;  // the packed message's bytes (packed_message.h), fitting or not
  int32_t status = kChunkFailed;
  int32_t unused = 0;
};
constexpr size_t kHeaderBytes = sizeof(ChunkHeader);
static_assert(kHeaderBytes % 8 == 0, "slots stay 8-byte aligned");

// What a chunk puts on the wire: its header, and its message if it fit.
size_t sentBytes(const ChunkHeader& h) { return kHeaderBytes + (h.status == kChunkOk ? h.need : 0); }

// Room for a chunk that needed `need` bytes last time. Slots cost memory,
// not wire: twice that covers error feedback's growth between estimates
// (measured up to +46% in a step), and a selection past twice its target
// runs away and is redone anyway.
size_t slotFor(uint64_t need) { return kHeaderBytes + packing::pad8(2 * need + 1024); }

// Where every rank's slot of every chunk lies in `gathered`: chunk-major, so
// one chunk's slots form one allgatherv.
struct Layout {
  int ranks = 0, chunks = 0;
  size_t elems = 0, count = 0, total = 0;
  std::vector<size_t> bytes, within, base;  // [chunk * ranks + rank], [chunk * ranks + rank], [chunk]
  std::vector<uint64_t> needs;              // [chunk * ranks + rank]: what each slot was sized for

  size_t lo(int i) const { return static_cast<size_t>(i) * elems; }
  size_t len(int i) const { return std::min(elems, count - lo(i)); }
  size_t at(int i, int r) const { return base[i] + within[i * ranks + r]; }
};

Layout layout(const Step& s) {
  const dctCompressor_t c = s.c;
  Layout L;
  L.ranks = s.comm->size;
  L.elems = s.chunkElems;
  L.count = c->count;
  L.chunks = static_cast<int>((c->count + L.elems - 1) / L.elems);
  const bool history = c->chunkElems == L.elems && c->chunkNeeds.size() == static_cast<size_t>(L.chunks * L.ranks);
  L.bytes.resize(L.chunks * L.ranks);
  L.within.resize(L.chunks * L.ranks);
  L.needs.resize(L.chunks * L.ranks);
  L.base.resize(L.chunks);
  for (int i = 0; i < L.chunks; i++) {
    L.base[i] = L.total;
    size_t chunk = 0;
    for (int r = 0; r < L.ranks; r++) {
      // No history: the last message spread evenly.
      const uint64_t need = history ? c->chunkNeeds[i * L.ranks + r] : c->lastMessages[r].bytes / L.chunks;
      L.needs[i * L.ranks + r] = need;
      L.bytes[i * L.ranks + r] = slotFor(need);
      L.within[i * L.ranks + r] = chunk;
      chunk += L.bytes[i * L.ranks + r];
    }
    L.total += chunk;
  }
  return L;
}

struct Pipeline {
  Step& s;
  Layout L;
  bool fromGrad = false;
  uint64_t selected = 0, nnz = 0, nonFinite = 0;
  std::vector<void*> requests{};
  int merged = 0;       // chunks completed (merged or skipped), in order
  bool clean = true;    // every header so far is kChunkOk
  dctResult_t status = dctSuccess;

  char* slot(int i, int r) const { return s.c->gathered.as<char>() + L.at(i, r); }
  ChunkHeader header(int i, int r) const {
    ChunkHeader h;
    std::memcpy(&h, slot(i, r), kHeaderBytes);
    return h;
  }
};

// Selects chunk i and packs it into this rank's slot (after the header):
// straight there when the slot has room for the worst case, else through
// c->wire, to learn the size a slot would need.
dctResult_t compressChunk(Pipeline& p, int i, ChunkHeader& h) {
  Step& s = p.s;
  dctCompressor_t c = s.c;
  const size_t valueSize = dtypeSize(c->wireType), idxBytes = alignedIndexBytes(p.L.elems, c->indexBytes);
  Message msg;
  msg.indices = c->selection.as();
  msg.values = c->selection.as<char>() + idxBytes;
  msg.capacity = p.L.elems;  // a chunk's whole length: it always fits
  SelectArgs args;
  DCTCHECK(selectChunk(c, p.fromGrad ? s.send : nullptr, p.L.lo(i), p.L.len(i), s.draft, msg, args, s.stream));
  p.selected += args.selected;
  char* body = p.slot(i, s.comm->rank) + kHeaderBytes;
  const size_t room = p.L.bytes[i * p.L.ranks + s.comm->rank] - kHeaderBytes;
  char* out = packedMessageRoom(msg.nnz, c->indexBytes, valueSize) <= room ? body : c->wire.as<char>();
  size_t need = 0;
  DCTCHECK(packMessage(c, msg.indices, msg.values, msg.nnz, valueSize, 0, out, need, s.stream));
  h.nnz = msg.nnz;
  h.need = need;
  h.status = kChunkOutgrew;
  if (need > room) return dctSuccess;
  if (out != body) DCTCHECK(c->ops->copy(c->kernels, body, out, need, s.stream));
  p.nnz += msg.nnz;
  p.nonFinite += args.nonFinite;
  h.status = kChunkOk;
  return dctSuccess;
}

// Chunk i has arrived: the rank-order sum of its P messages into its range
// of the target (averaged as it is built: mergeFactor), unless a
// header says the step cannot commit as is.
dctResult_t mergeChunk(Pipeline& p, int i) {
  Step& s = p.s;
  dctCompressor_t c = s.c;
  const int P = p.L.ranks;
  std::vector<PackedMessage>& messages = c->rankArrays.messages;  // reserved before the agreement
  messages.assign(P, PackedMessage{});
  for (int r = 0; r < P && p.clean; r++) {
    const ChunkHeader h = p.header(i, r);
    p.clean = h.status == kChunkOk;
    // A garbled header (a failed transfer) must not send the merge astray.
    const size_t room = p.L.bytes[i * P + r] - kHeaderBytes, valueSize = dtypeSize(c->wireType);
    if (p.clean && (h.need > room || !plausibleMessage(h.need, h.nnz, p.L.len(i), valueSize, c->indexBytes)))
      return fail(s.comm, dctInternalError, "dctSparseAllreduce: malformed chunk %d header from rank %d", i, r);
    messages[r] = packedView(p.slot(i, r) + kHeaderBytes, h.need, h.nnz, valueSize);
  }
  if (!p.clean) return dctSuccess;
  char* dense = static_cast<char*>(s.target) + p.L.lo(i) * dtypeSize(c->accType);
  MergeArgs merge{dense, p.L.len(i), c->accType, c->wireType, c->indexBytes, messages.data(), P};
  merge.stream = usesStreamingStores(c);
  merge.factor = mergeFactor(s);
  if (dctResult_t res = c->ops->mergePacked(c->kernels, &merge, s.stream); res != dctSuccess)
    return merge.malformed < 0 ? res
                               : fail(s.comm, res, "dctSparseAllreduce: malformed chunk %d from rank %d", i,
                                      merge.malformed);
  return dctSuccess;
}

// Drives the requests in flight; merges every chunk that completed in
// order. With `drain`, until all started ones are done.
void progress(Pipeline& p, int started, bool drain) {
  Step& s = p.s;
  while (p.merged < started) {
    int done = 0;
    dctResult_t res = testRequest(s.comm, p.requests[p.merged], drain, done);
    if (res != dctSuccess && p.status == dctSuccess) p.status = res;
    if (!done) {
      if (!drain) return;
      continue;
    }
    s.clock.lap(dctPhaseExchange);
    if (p.status == dctSuccess) p.status = mergeChunk(p, p.merged);
    s.clock.lap(dctPhaseReduce);
    p.merged++;
  }
}

// This rank's chunks are all in: the draft's counts and, after a drift up,
// tau from what they selected (tightenTau), their values copied together
// from the slots. A redo (another rank's chunk did not fit) drafts anew.
dctResult_t finishChunks(Pipeline& p) {
  Step& s = p.s;
  dctCompressor_t c = s.c;
  endChunkedStep(c, s.draft, p.selected, p.nnz, p.nonFinite);
  if (!tightenDue(c, s.draft, p.selected)) return dctSuccess;
  const size_t valueSize = dtypeSize(c->wireType);
  DCTCHECK(c->selection.reserve(p.nnz * valueSize));
  size_t at = 0;
  for (int i = 0; i < p.L.chunks; i++) {
    const ChunkHeader h = p.header(i, s.comm->rank);
    const PackedMessage m = packedView(p.slot(i, s.comm->rank) + kHeaderBytes, h.need, h.nnz, valueSize);
    DCTCHECK(c->ops->copy(c->kernels, c->selection.as<char>() + at, m.values, h.nnz * valueSize, s.stream));
    at += h.nnz * valueSize;
  }
  return tightenTau(c, s.draft, c->selection.as(), p.nnz, s.stream);
}

// Local work before the headers: the slots' layout and room for them, one
// chunk's selection and its packing, the requests and what the commit keeps
// (nothing allocates after the agreement); tau for the step.
dctResult_t prelude(Pipeline& p) {
  Step& s = p.s;
  dctCompressor_t c = s.c;
  p.L = layout(s);
  p.requests.assign(p.L.chunks, nullptr);
  s.chunkNeeds.reserve(static_cast<size_t>(p.L.chunks) * p.L.ranks);
  DCTCHECK(c->ops->streamBegin(c->kernels, s.stream));
  DCTCHECK(c->gathered.reserve(p.L.total));
  DCTCHECK(c->selection.reserve(alignedIndexBytes(p.L.elems, c->indexBytes) + p.L.elems * dtypeSize(c->wireType)));
  DCTCHECK(c->wire.reserve(packedMessageRoom(p.L.elems, c->indexBytes, dtypeSize(c->wireType))));
  return beginChunkedStep(c, s.send, s.draft, p.fromGrad, s.stream);
}

// Whether every rank's message of last step fit the comm's gather slot:
// committed, agreed state, so every rank decides alike.
bool lastMessagesFitSlots(dctCompressor_t c, dctComm_t comm) {
  if (comm->gatherSlot == 0) return false;
  for (const RankMessage& m : c->lastMessages)
    if (m.bytes > comm->gatherSlot) return false;
  return true;
}

}  // namespace

size_t pipelineChunkElems(const Step& s) {
  const dctCompressor_t c = s.c;
  const dctComm_t comm = s.comm;
  if (s.plan.algorithm != dctAlgoAllgather || comm->size < 2 || comm->transport->iallgatherv == nullptr ||
      c->ops->device || sendsEveryNonzero(c))
    return 0;
  // Slots are sized from the last step's messages.
  if (c->stats.algorithm != dctAlgoAllgather || c->lastMessages.size() != static_cast<size_t>(comm->size)) return 0;
  if (!comm->settings.pipeline) return 0;
  // DCT_CHUNK_ELEMENTS as set, raised where it would make too many chunks.
  size_t elems = comm->settings.chunkElems;
  if (elems) elems = std::max<size_t>(elems, (c->count + kMaxExplicitChunks - 1) / kMaxExplicitChunks);
  else {
    std::vector<uint64_t> nnz(comm->size);
    for (int r = 0; r < comm->size; r++) nnz[r] = c->lastMessages[r].nnz;
    const CostParams params = costParams(comm->settings.cost);
    const CostInputs in{comm->size, c->count, dtypeSize(c->wireType), static_cast<size_t>(c->indexBytes), nnz.data(),
                        dtypeSize(c->accType)};
    elems = autoChunkElems(params, in);  // cost_model.h: the pass counts, chunks start aligned
    // Keep the chunking the slots were sized for while the model roughly
    // agrees: a new chunking starts without history.
    if (c->chunkElems && c->chunkElems <= 2 * elems && elems <= 2 * c->chunkElems) elems = c->chunkElems;
  }
  // One chunk overlaps nothing but saves the vote before the exchange; where
  // last step's messages fit the comm's gather slots (gather_slot.h), the
  // unchunked step saves that vote and the allgatherv too.
  if (elems >= c->count && !s.nesting && lastMessagesFitSlots(c, comm)) return 0;
  return std::min(elems, c->count);
}

dctResult_t pipelinedStep(Step& s, CallHeader& mine, std::vector<CallHeader>& all, bool& fallback, const char* fn) {
  dctCompressor_t c = s.c;
  const dctComm_t comm = s.comm;
  const int P = comm->size, me = comm->rank;
  Pipeline p{s, Layout{}};
  fallback = false;
  if (mine.localError == dctSuccess) mine.localError = caught(comm, fn, [&] { return prelude(p); });
  mine.chunks = p.L.chunks;
  mine.chunkElems = p.L.elems;
  s.clock.lap(dctPhaseCompress);
  // Every slot's shape is known already; the vote only makes a rank whose
  // header gather failed meet peers that saw a problem in the headers.
  // Every rank has arrived once the headers are in: auto does not count the wait.
  DCTCHECK(agree(comm, mine, all, s.stream, fn, [&] {
    s.clock.lapWaiting();
    return dctSuccess;
  }));
  s.clock.lap(dctPhaseAgree);
  p.status = dctSuccess;
  bool redo = false;  // this rank's chunks so far: the step will be redone
  for (int i = 0; i < p.L.chunks; i++) {
    ChunkHeader h;
    if (p.status == dctSuccess && !redo) {
      dctResult_t res = compressChunk(p, i, h);
      if (res != dctSuccess) {
        h.status = kChunkFailed;
        p.status = res;
      }
      if (chunkedStepRedo(c, s.draft, p.selected, i + 1 == p.L.chunks)) h.status = kChunkRunaway;
    } else if (p.status == dctSuccess) {
      h.status = kChunkSkipped;  // nothing more to select: only take part
    }
    redo = h.status == kChunkOutgrew || h.status == kChunkRunaway || h.status == kChunkSkipped;
    std::memcpy(p.slot(i, me), &h, kHeaderBytes);
    s.clock.lap(dctPhaseCompress);
    dctResult_t res = comm->transport->iallgatherv(comm, p.slot(i, me), sentBytes(h), p.slot(i, 0),
                                                   &p.L.bytes[i * P], &p.L.within[i * P], &p.requests[i]);
    if (res != dctSuccess && p.status == dctSuccess) p.status = res;
    progress(p, i + 1, false);
  }
  progress(p, p.L.chunks, true);
  if (p.status == dctSuccess && !redo) p.status = finishChunks(p);
  // A header garbled on its way may reach some ranks only: the vote carries
  // whether any rank saw one other than kChunkOk (a failed chunk's sender
  // fails the vote itself), so every rank redoes the step or none.
  bool seen = false;
  for (int r = 0; r < P && p.status == dctSuccess; r++)
    for (int i = 0; i < p.L.chunks; i++) seen = seen || p.header(i, r).status != kChunkOk;
  DCTCHECK(voteWithFlag(comm, p.status, seen, fallback, s.stream, fn, "exchange"));
  s.clock.lap(dctPhaseAgree);

  s.chunkNeeds.assign(p.L.chunks * P, 0);
  int outgrew = 0, ranAway = 0, skipped = 0;
  for (int r = 0; r < P; r++) {
    all[r].nnz = all[r].bytes = 0;
    for (int i = 0; i < p.L.chunks; i++) {
      const ChunkHeader h = p.header(i, r);
      s.chunkNeeds[i * P + r] = h.status == kChunkSkipped ? p.L.needs[i * P + r] : h.need;
      outgrew += h.status == kChunkOutgrew;
      ranAway += h.status == kChunkRunaway;
      skipped += h.status == kChunkSkipped;
      all[r].nnz += h.nnz;
      all[r].bytes += sentBytes(h);
    }
  }
  if (fallback) {
    DCT_INFO("step %llu: pipelined attempt redone unchunked (%d chunks outgrew their slots, %d ran away or selected "
             "nothing, %d skipped)",
             static_cast<unsigned long long>(c->stats.step), outgrew, ranAway, skipped);
    return dctSuccess;
  }
  s.bytes = all[me].bytes;
  s.received = 0;
  for (int r = 0; r < P; r++) s.received += r == me ? 0 : all[r].bytes;
  return dctSuccess;
}

}  // namespace dct
