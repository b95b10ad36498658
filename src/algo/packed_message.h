// One sparse message as it travels: its indices delta bit-packed
// (kernels/index_packing.h: ~1.3 bytes each at density 1% instead of 4),
// then its values, padded to 8 bytes so the next message in a gathered
// buffer stays aligned for 64-bit loads (the GPU faults on misaligned ones).
// Shared by the allgather plan, its pipelined chunks and the split pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/agree.h"
#include "base/phase_timer.h"

#include "core/compressor.h"
#include "kernels/index_packing.h"

namespace dct {

// Room packMessage may need for nnz entries of valueBytes each.
inline size_t packedMessageRoom(size_t nnz, int indexBytes, size_t valueBytes) {
  return packing::maxPackedBytes(nnz, indexBytes) + packing::pad8(nnz * valueBytes);
}

// Packs nnz ascending indices (stored relative to `base`) and their values
// at `out`; `bytes` is what was written, a multiple of 8.
dctResult_t packMessage(dctCompressor_t c, const void* indices, const void* values, size_t nnz, size_t valueBytes,
                        uint64_t base, char* out, size_t& bytes, void* stream);

// A received message of `bytes` bytes holding nnz entries.
inline PackedMessage packedView(const char* block, uint64_t bytes, uint64_t nnz, size_t valueBytes) {
  const size_t packed = bytes - packing::pad8(nnz * valueBytes);
  return PackedMessage{block, block + packed, nnz, packed};
}

// Whether (bytes, nnz) can describe a message over `length` elements: a
// garbled size must not send a decoder astray.
inline bool plausibleMessage(uint64_t bytes, uint64_t nnz, size_t length, size_t valueBytes) {
  return nnz <= length && bytes >= packing::pad8(nnz * valueBytes) && bytes % 8 == 0;
}

// The allgather plan's exchange: every rank's packed message from c->wire
// gathered into c->gathered (reserved for them all), their sizes and counts
// from the agreed headers, then summed in rank order into `target` (count
// elements of c->accType; mergePacked): bit-identical on every rank.
// `received`: bytes from the other ranks. The exchange's lap ends on clock.
// c->rankArrays must hold room for comm->size ranks (reserved before the
// agreement): nothing allocates here.
dctResult_t gatherMerged(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* target,
                         void* stream, PhaseTimer& clock, size_t& received, const char* fn);

}  // namespace dct

