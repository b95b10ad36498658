// The DCT-MP forward in chunks (alltoall_call.h). Chunk c holds rows
// [n c / C, n (c + 1) / C) of every peer's n rows, one block per peer,
// [status][mask][values]: while chunk c is on the wire (a nonblocking
// alltoallv) the next chunk's rows are selected and packed, and each chunk
// is unpacked as its request completes. Rows keep exactly K entries, so
// every block's size follows from the split and K: no counts and no size
// exchange, only the header agreement before and the vote after.
//
// A row that keeps more than K (NaN/Inf beyond K) cannot travel so. Its
// rank sets the 8-byte status of every block it sends from then on; every
// rank receives a block from every rank in the last chunk, so all of them
// see it, and the caller redoes the step unchunked. The chunks run on the
// CPU twin (host buffers), whose counts the host reads directly.
#include <algorithm>
#include <cstring>

#include "algo/agree.h"
#include "algo/alltoall_call.h"
#include "algo/vote_flag.h"
#include "algo/request_wait.h"
#include "base/debug.h"
#include "transport/comm.h"

namespace dct {
namespace {

// A chunk carries at least this much of the busiest rank's wire, and there
// are at most kMaxChunks: enough to overlap a chunk's selection with the
// previous one's transfer, few enough that latencies stay small.
constexpr size_t kChunkBytes = size_t(64) << 10;
constexpr int kMaxChunks = 16;
constexpr size_t kStatusBytes = 8;

size_t chunkBegin(size_t rows, int chunks, int c) { return rows * static_cast<size_t>(c) / chunks; }

struct Chunk {
  Blocks out, in;            // per peer, offsets within the chunk's region
  size_t outAt = 0, inAt = 0;  // the region in wireOut / wireIn
};

struct Pipeline {
  dctAlltoallPlan_t p;
  void* stream;
  const char* fn;
  int P, me, C;
  size_t K, words;
  MaskSet *sent, *received;
  std::vector<Chunk> chunks{};
  std::vector<void*> requests{};
  int unpacked = 0;
  bool mine = false;     // this rank's rows cannot go in chunks
  bool flagged = false;  // some rank's cannot (this one's, or a sender's status)
  dctResult_t status = dctSuccess;
  ForwardDraft d{};
  AlltoallCall done{nullptr, nullptr, nullptr};  // what the commit counts

  size_t rowsOut(int q, int c) const { return range(p->send.rows[q], c); }
  size_t rowsIn(int q, int c) const { return range(p->recv.rows[q], c); }
  size_t range(size_t n, int c) const { return chunkBegin(n, C, c + 1) - chunkBegin(n, C, c); }
  BlockLayout layout(size_t rows) const { return blockLayout(*p, rows, rows * K, false); }
  char* outBlock(int c, int q) const { return p->wireOut.as<char>() + chunks[c].outAt + chunks[c].out.offsets[q]; }
  char* inBlock(int c, int q) const { return p->wireIn.as<char>() + chunks[c].inAt + chunks[c].in.offsets[q]; }
};

// Masks, fixed entry offsets (i K), both sides' chunk layouts and buffers,
// the requests and the commit's tables: nothing allocates after the
// agreement.
dctResult_t prelude(Pipeline& s) {
  dctAlltoallPlan_t p = s.p;
  s.requests.assign(s.C, nullptr);
  s.done.out.reserve(s.P);
  s.done.in.reserve(s.P);
  DCTCHECK(p->ops->streamBegin(p->kernels, s.stream));
  DCTCHECK(reserveMasks(p, *s.sent, p->send));
  DCTCHECK(reserveMasks(p, *s.received, p->recv));
  DCTCHECK(p->counts.reserve(p->send.totalRows() * sizeof(uint32_t)));
  for (int q = 0; q < s.P; q++) {
    RowOffsetsArgs sent{nullptr, 4, s.K, p->send.rows[q], offsetsOf(*s.sent, p->send, q)};
    DCTCHECK(p->ops->rowOffsets(p->kernels, &sent, s.stream));
    s.sent->entries[q] = sent.total;
    RowOffsetsArgs received{nullptr, 4, s.K, p->recv.rows[q], offsetsOf(*s.received, p->recv, q)};
    DCTCHECK(p->ops->rowOffsets(p->kernels, &received, s.stream));
    s.received->entries[q] = received.total;
  }
  s.chunks.resize(s.C);
  size_t outAt = 0, inAt = 0;
  for (int c = 0; c < s.C; c++) {
    Chunk& k = s.chunks[c];
    k.out.bytes.resize(s.P);
    k.in.bytes.resize(s.P);
    for (int q = 0; q < s.P; q++) {
      k.out.bytes[q] = kStatusBytes + s.layout(s.rowsOut(q, c)).bytes;
      k.in.bytes[q] = kStatusBytes + s.layout(s.rowsIn(q, c)).bytes;
    }
    k.out.place();
    k.in.place();
    k.outAt = outAt;
    k.inAt = inAt;
    outAt += k.out.total;
    inAt += k.in.total;
  }
  DCTCHECK(p->wireOut.reserve(outAt));
  DCTCHECK(p->wireIn.reserve(inAt));
  return p->ops->zero(p->kernels, p->wireOut.as(), outAt, s.stream);  // padding included
}

// Chunk c's rows of every peer: selected (K each, or this rank flags), packed.
dctResult_t selectAndPack(Pipeline& s, const void* send, int c) {
  dctAlltoallPlan_t p = s.p;
  for (int q = 0; q < s.P && !s.mine; q++) {
    const size_t lo = chunkBegin(p->send.rows[q], s.C, c), rows = s.rowsOut(q, c);
    if (rows == 0) continue;
    const size_t first = p->send.rowStart[q] + lo;
    const char* from = static_cast<const char*>(send) + first * rowBytes(p);
    uint32_t* counts = p->counts.as<uint32_t>() + first;
    uint32_t* mask = maskOf(*s.sent, p->send, q, p->rowLength) + lo * s.words;
    RowSelectArgs sel{from, rows, p->rowLength, p->dtype, s.K, 0.0, mask, counts};
    DCTCHECK(p->ops->rowSelect(p->kernels, &sel, s.stream));
    s.d.nonFinite += sel.nonFinite;
    for (size_t r = 0; r < rows; r++) s.mine = s.mine || counts[r] != s.K;
    if (s.mine) break;
    const BlockLayout b = s.layout(rows);
    char* block = s.outBlock(c, q) + kStatusBytes;
    RowWireArgs a{const_cast<char*>(from), rows, p->rowLength, p->dtype, mask, offsetsOf(*s.sent, p->send, q) + lo,
                  lo * s.K, p->maskFormat, block + b.maskAt, nullptr, p->countBytes, block + b.valuesAt, p->wireType};
    DCTCHECK(p->ops->rowPack(p->kernels, &a, s.stream));
  }
  return dctSuccess;
}

// Chunk c's blocks into the received rows and masks; a flagged block only
// tells that the step will be redone.
dctResult_t unpack(Pipeline& s, void* recv, int c) {
  dctAlltoallPlan_t p = s.p;
  for (int q = 0; q < s.P; q++) {
    const char* block = s.inBlock(c, q);
    uint64_t flag = 0;
    std::memcpy(&flag, block, sizeof(flag));
    if (flag) s.flagged = true;
    const size_t lo = chunkBegin(p->recv.rows[q], s.C, c), rows = s.rowsIn(q, c);
    if (flag || s.flagged || rows == 0) continue;
    const BlockLayout b = s.layout(rows);
    char* body = const_cast<char*>(block) + kStatusBytes;
    RowWireArgs a{static_cast<char*>(recv) + (p->recv.rowStart[q] + lo) * rowBytes(p), rows, p->rowLength, p->dtype,
                  maskOf(*s.received, p->recv, q, p->rowLength) + lo * s.words, offsetsOf(*s.received, p->recv, q) + lo,
                  lo * s.K, p->maskFormat, body + b.maskAt, nullptr, p->countBytes, body + b.valuesAt, p->wireType};
    if (dctResult_t res = p->ops->rowUnpack(p->kernels, &a, s.stream); res != dctSuccess)
      return blockFailed(p->comm, res, s.fn, q, s.chunks[c].in.bytes[q]);
  }
  return dctSuccess;
}

// Tests the requests in order, unpacking each chunk that has arrived;
// `wait`: until all `started` have.
void progress(Pipeline& s, void* recv, int started, bool wait) {
  while (s.unpacked < started) {
    int done = 0;
    const dctResult_t res = testRequest(s.p->comm, s.requests[s.unpacked], wait, done);
    if (!done) {
      if (!wait) return;
      continue;
    }
    if (res != dctSuccess && s.status == dctSuccess) s.status = res;
    if (s.status == dctSuccess) s.status = unpack(s, recv, s.unpacked);
    s.unpacked++;
  }
}

// The committed forward's statistics count the blocks without their status.
void commit(Pipeline& s) {
  AlltoallCall& call = s.done;
  call.p = s.p;
  call.out.bytes.assign(s.P, 0);
  call.in.bytes.assign(s.P, 0);
  for (const Chunk& k : s.chunks)
    for (int q = 0; q < s.P; q++) {
      call.out.bytes[q] += k.out.bytes[q] - kStatusBytes;
      call.in.bytes[q] += k.in.bytes[q] - kStatusBytes;
    }
  call.out.place();
  call.in.place();
  s.d.kept = s.p->send.totalRows() * s.K;
  commitForward(call, s.d);
}

}  // namespace

int forwardChunks(const dctAlltoallPlan& p, const std::vector<uint64_t>& splits) {
  const dctComm_t comm = p.comm;
  const Transport* t = comm->transport;
  if (p.config.rowSelection != dctRowTopK || p.maskFormat < 0 || comm->size < 2 || !comm->settings.pipeline ||
      t->ialltoallv == nullptr || t->test == nullptr)
    return 0;
  const int P = comm->size;
  uint64_t busiest = 0;
  for (int r = 0; r < P; r++) {
    uint64_t rows = 0;
    for (int q = 0; q < P; q++) rows += splits[size_t(r) * 2 * P + q];
    busiest = std::max(busiest, rows);
  }
  const size_t bytes = blockLayout(p, busiest, busiest * p.k, false).bytes;
  const size_t chunks = std::min<size_t>(kMaxChunks, bytes / kChunkBytes);
  return chunks >= 2 ? static_cast<int>(chunks) : 0;
}

dctResult_t pipelinedForward(dctAlltoallPlan_t p, const void* send, void* recv, void* stream, const char* fn,
                             bool& fallback) {
  const int spare = 1 - p->committed;
  Pipeline s{p, stream, fn, p->comm->size, p->comm->rank, p->chunks, p->k, maskWords(p->rowLength),
             &p->sent[spare], &p->received[spare]};
  fallback = false;
  PlanCallHeader mine = planCallHeader(p, kForward, dctSuccess);
  mine.chunks = p->ops->device ? 0 : p->chunks;  // the chunks run on host buffers
  if (mine.chunks) mine.localError = caught(p->comm, fn, [&] { return prelude(s); });
  std::vector<PlanCallHeader> all;
  DCTCHECK(agree(p->comm, mine, all, stream, fn));
  for (const PlanCallHeader& h : all) fallback = fallback || h.chunks != p->chunks;
  if (fallback) return dctSuccess;  // every rank saw the same headers

  const Transport* t = p->comm->transport;
  for (int c = 0; c < s.C; c++) {
    if (s.status == dctSuccess && !s.mine) s.status = selectAndPack(s, send, c);
    const uint64_t flag = s.mine || s.status != dctSuccess ? 1 : 0;
    for (int q = 0; q < s.P; q++) std::memcpy(s.outBlock(c, q), &flag, sizeof(flag));
    const Chunk& k = s.chunks[c];
    const dctResult_t res = t->ialltoallv(p->comm, p->wireOut.as<char>() + k.outAt, k.out.bytes.data(),
                                          k.out.offsets.data(), p->wireIn.as<char>() + k.inAt, k.in.bytes.data(),
                                          k.in.offsets.data(), &s.requests[c]);
    if (res != dctSuccess && s.status == dctSuccess) s.status = res;
    progress(s, recv, c + 1, false);
  }
  progress(s, recv, s.C, true);
  // The stream's end joins the vote, before anything commits. A status word
  // may reach one receiver only (a block garbled on the way): the vote
  // carries the fallback, so every rank redoes the step or none.
  if (s.status == dctSuccess) s.status = p->ops->streamEnd(p->kernels, stream);
  DCTCHECK(voteWithFlag(p->comm, s.status, s.flagged || s.mine, fallback, stream, fn, "exchange"));
  if (fallback) {
    DCT_INFO("%s: a row kept more than K entries (NaN/Inf): the forward is redone unchunked", fn);
    return dctSuccess;
  }
  commit(s);
  return dctSuccess;
}

}  // namespace dct
