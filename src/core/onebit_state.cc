// Setting up the 1-bit state's buffers in the compressor's twin: the step
// (algo/onebit_allreduce.cc) and a loaded state (compressor_state.cc).
#include "core/compressor.h"
#include "core/onebit_state.h"

#include "base/debug.h"
#include "base/dtype.h"

namespace dct {
namespace {

dctResult_t allocate(dctCompressor_t c, void* stream) {
  OnebitState& st = c->onebit;
  const OnebitChunks chunks(c->count, c->ranks);
  const size_t scaleBytes = dtypeSize(c->accType);
  const OnebitArena arena = onebitArenaOf(c);
  const size_t errorBytes = c->count * scaleBytes, serverBytes = chunks.length(c->rank) * scaleBytes;
  st.arena.bind(c->ops, c->kernels);
  for (TwinBuffer& b : st.serverErrors) b.bind(c->ops, c->kernels);
  DCTCHECK(st.arena.reserve(arena.bytes));
  // Zeroed once: sign words past a chunk's end are never written, and go
  // on the wire as zeros.
  DCTCHECK(c->ops->zero(c->kernels, st.arena.as(), arena.bytes, stream));
  DCTCHECK(st.serverErrors[0].reserve(serverBytes));
  DCTCHECK(st.serverErrors[1].reserve(serverBytes));
  DCTCHECK(c->ops->zero(c->kernels, st.serverErrors[0].as(), serverBytes, stream));
  st.serverCommitted = 0;
  st.serverPending = false;
  // The worker error is the residual, allocated and zeroed by bindOps.
  if (c->residuals[0].capacity() < errorBytes || c->residuals[1].capacity() < errorBytes) return dctInternalError;
  st.ops = c->ops;
  st.kernels = c->kernels;
  return dctSuccess;
}

// A 64-bit mix of the offsets (FNV-1a over their bytes, then a finalizer).
uint64_t digestOf(const std::vector<size_t>& offsets) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t o : offsets) {
    const uint64_t v = o;
    for (int b = 0; b < 8; b++) h = (h ^ ((v >> (8 * b)) & 0xff)) * 0x100000001b3ull;
  }
  h ^= h >> 33;
  return h ? h : 1;
}

}  // namespace

OnebitSegments onebitSegmentsOf(const size_t* offsets, int nsegments, size_t n, int ranks, int rank) {
  OnebitSegments seg;
  std::vector<size_t> kept{0};
  for (int s = 1; s <= nsegments; s++)
    if (offsets[s] > kept.back()) kept.push_back(offsets[s]);
  if (kept.size() <= 2) return seg;  // one segment
  seg.offsets.swap(kept);
  const OnebitChunks chunks(n, ranks);
  const int m = seg.count();
  seg.scalesPerSlot = onebitScalesPerSlot(chunks, seg.offsets.data(), m);
  const OnebitPieces mine = onebitPieces(chunks, seg.offsets.data(), m, rank);
  const size_t b = chunks.begin(rank), e = b + chunks.length(rank);
  seg.serverOffsets.push_back(0);
  for (int k = 1; k < mine.count; k++) seg.serverOffsets.push_back(seg.offsets[mine.first + k] - b);
  seg.serverOffsets.push_back(e - b);
  if (mine.count == 0) seg.serverOffsets.assign(2, 0);  // an empty chunk: one empty piece
  seg.digest = digestOf(seg.offsets);
  return seg;
}

OnebitArena onebitArenaOf(dctCompressor_t c) {
  const OnebitSegments& seg = c->onebit.seg;
  return OnebitArena(OnebitChunks(c->count, c->ranks), dtypeSize(accumulationType(c->dtype)), seg.scalesPerSlot,
                     static_cast<size_t>(seg.count()));
}

dctResult_t onebitSetUp(dctCompressor_t c, void* stream) {
  OnebitState& st = c->onebit;
  if (st.readyFor(c->ops, c->kernels)) return dctSuccess;
  st.release();
  dctResult_t res = allocate(c, stream);
  if (res != dctSuccess) st.release();  // a later step starts over
  return res;
}

}  // namespace dct
