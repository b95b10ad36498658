// What a 1-bit compressor keeps besides the worker error (which lives in
// the compressor's two residual buffers): the server error of the chunk
// this rank reduces, double-buffered like the residual so a failed step
// changes nothing, and one arena for the step's sign words and scales.
// Allocated on the first 1-bit step, in the compressor's twin.
#pragma once

#include <cstddef>

#include "core/twin_buffer.h"
#include "kernels/kernels.h"

namespace dct {

// The arena's pieces, in bytes from its start (each 8-byte aligned).
struct OnebitArena {
  size_t workerSigns, receivedSigns, serverSigns, gatheredSigns;  // sign words
  size_t workerScale, workerScales, serverScale, serverScales;    // accumulation-type scales
  size_t scratch;  // the compress op's fp64 partials
  size_t bytes;
  OnebitArena(const OnebitChunks& chunks, size_t scaleBytes) {
    auto pad8 = [](size_t b) { return (b + 7) & ~size_t(7); };
    const size_t P = static_cast<size_t>(chunks.ranks), all = pad8(P * chunks.chunkWords * 4);
    size_t at = 0;
    auto take = [&](size_t b) { const size_t here = at; at += pad8(b); return here; };
    workerSigns = take(all);
    receivedSigns = take(all);
    serverSigns = take(chunks.chunkWords * 4);
    gatheredSigns = take(all);
    workerScale = take(scaleBytes);
    workerScales = take(P * scaleBytes);
    serverScale = take(scaleBytes);
    serverScales = take(P * scaleBytes);
    scratch = take(onebitScratchBytes(chunks.n));
    bytes = at;
  }
};

struct OnebitState {
  TwinBuffer arena;
  TwinBuffer serverErrors[2];
  int serverCommitted = 0;
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
