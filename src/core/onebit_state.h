// What a 1-bit compressor keeps besides the worker error (which lives in
// the compressor's two residual buffers, as an error or as the x that
// left it): the server error of the chunk this rank reduces,
// double-buffered like the residual so a failed step changes nothing, and
// one arena for the step's sign words and scales. Allocated on the first
// 1-bit step, in the compressor's twin.
#pragma once

#include <cstddef>

#include "core/twin_buffer.h"
#include "kernels/kernels.h"

namespace dct {

// The arena's pieces, in bytes from its start (each 8-byte aligned): the
// step's messages as slots (onebit_kernels.h: each chunk's scale, then its
// sign words) and the compress op's fp64 partials.
struct OnebitArena {
  size_t slotBytes;
  size_t workerSlots;    // this rank's worker signs, one slot per server
  size_t receivedSlots;  // every rank's worker signs of this rank's chunk
  size_t serverSlot;     // this rank's server signs
  size_t gatheredSlots;  // every server's signs: the result
  size_t scratch;
  size_t bytes;
  OnebitArena(const OnebitChunks& chunks, size_t scaleBytes)
      : slotBytes(onebitSlotBytes(chunks.chunkWords, scaleBytes)) {
    auto pad8 = [](size_t b) { return (b + 7) & ~size_t(7); };
    const size_t all = pad8(static_cast<size_t>(chunks.ranks) * slotBytes);
    size_t at = 0;
    auto take = [&](size_t b) { const size_t here = at; at += pad8(b); return here; };
    workerSlots = take(all);
    receivedSlots = take(all);
    serverSlot = take(slotBytes);
    gatheredSlots = take(all);
    scratch = take(onebitScratchBytes(chunks.n));
    bytes = at;
  }
};

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
