// What a 1-bit compressor keeps besides the worker error (which lives in
// the compressor's two residual buffers, as an error or as the x that
// left it): the server error of the chunk this rank reduces,
// double-buffered like the residual so a failed step changes nothing, and
// one arena for the step's sign words and scales. Allocated on the first
// 1-bit step, in the compressor's twin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/twin_buffer.h"
#include "kernels/kernels.h"
#include "kernels/onebit_kernels.h"

namespace dct {

// The arena's pieces, in bytes from its start (each 8-byte aligned): the
// step's messages as slots (onebit_kernels.h: each chunk's scale, then its
// sign words, then the call's digest) and the compress op's fp64 partials.
struct OnebitArena {
  size_t slotBytes;
  size_t workerSlots;    // this rank's worker signs, one slot per server
  size_t receivedSlots;  // every rank's worker signs of this rank's chunk
  size_t serverSlot;     // this rank's server signs
  size_t gatheredSlots;  // every server's signs: the result
  size_t scratch;
  size_t bytes;
  OnebitArena(const OnebitChunks& chunks, size_t scaleBytes, size_t scalesPerSlot = 1, size_t segments = 1)
      : slotBytes(onebitSlotWithDigest(onebitSlotBytes(chunks.chunkWords, scaleBytes, scalesPerSlot))) {
    auto pad8 = [](size_t b) { return (b + 7) & ~size_t(7); };
    const size_t all = pad8(static_cast<size_t>(chunks.ranks) * slotBytes);
    size_t at = 0;
    auto take = [&](size_t b) { const size_t here = at; at += pad8(b); return here; };
    workerSlots = take(all);
    receivedSlots = take(all);
    serverSlot = take(slotBytes);
    gatheredSlots = take(all);
    scratch = take(onebitScratchBytes(chunks.n, segments));
    bytes = at;
  }
};

// Segments (dctCompressorSetSegments): a scale per segment of the tensor
// and, on the server side, per piece (a segment within this rank's chunk).
// Empty segments are dropped (they hold no element, so no scale); one
// segment is the unsegmented compressor, which keeps its scales in
// OnebitState's scalars and may queue its steps (onebit_step.cc).
struct OnebitSegments {
  std::vector<size_t> offsets;        // count + 1, strictly increasing, 0 to n; empty: one segment
  std::vector<size_t> serverOffsets;  // this rank's pieces, from its chunk's start (with offsets)
  size_t scalesPerSlot = 1;           // onebitScalesPerSlot
  uint64_t digest = 0;                // agreed across ranks every step (0: one segment)

  bool many() const { return offsets.size() > 2; }
  int count() const { return many() ? static_cast<int>(offsets.size()) - 1 : 1; }
  int serverCount() const { return many() ? static_cast<int>(serverOffsets.size()) - 1 : 1; }
  const size_t* data() const { return many() ? offsets.data() : nullptr; }
  const size_t* serverData() const { return many() ? serverOffsets.data() : nullptr; }
};

// The segments of `offsets` (nsegments + 1 entries, checked by the caller:
// 0 first, n last, non-decreasing) for a vector of n over `ranks`, as this
// rank serves them. May throw (allocation).
OnebitSegments onebitSegmentsOf(const size_t* offsets, int nsegments, size_t n, int ranks, int rank);

struct OnebitState {
  TwinBuffer arena;
  TwinBuffer serverErrors[2];
  int serverCommitted = 0;
  // Both errors are kept as the x they were formed from (onebit_kernels.h:
  // keepX), the error x - (x >= 0 ? p : -p) formed by the next step as it
  // reads x back. The worker's x is the compressor's residual: its flag
  // survives release() and bindOps clears it as it zeroes the residual.
  bool pending = false;
  double pendingScale = 0;
  bool serverPending = false;
  double serverPendingScale = 0;
  // With segments (seg.many()) the scales are per segment and per piece
  // instead: the pending ones (as the scalars above), and this step's.
  OnebitSegments seg;
  std::vector<double> pendingScales, serverPendingScales;
  std::vector<double> stepScales, stepServerScales;
  // The twin the buffers were set up for: a compressor re-bound to another
  // ops table or context (tests) starts over.
  const KernelOps* ops = nullptr;
  KernelContext* kernels = nullptr;

  bool readyFor(const KernelOps* o, KernelContext* k) const { return ops == o && kernels == k; }
  void release() {
    arena.reset();
    serverErrors[0].reset();
    serverErrors[1].reset();
    ops = nullptr;
    kernels = nullptr;
  }
};

}  // namespace dct
