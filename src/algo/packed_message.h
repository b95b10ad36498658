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
#include "base/checked_size.h"
#include "base/phase_timer.h"

#include "core/compressor.h"
#include "kernels/index_packing.h"

namespace dct {

// Room packMessage may need for nnz entries of valueBytes each.
inline size_t packedMessageRoom(size_t nnz, int indexBytes, size_t valueBytes) {
  return packing::maxPackedBytes(nnz, indexBytes) + packing::pad8(nnz * valueBytes);
}

// packedMessageRoom, or false where it would not fit size_t (a huge count,
// a peer's bogus nnz). Per entry the room is at most its index data (8),
// base, offset and width shares (8 + 4 + 1) and value, plus a group's
// slack: when that bound fits, no step of the exact sum can wrap.
inline bool checkedMessageRoom(uint64_t nnz, int indexBytes, size_t valueBytes, size_t& out) {
  size_t n = 0, padded = 0, bound = 0;
  if (!toSize(nnz, n) || !checkedAdd(n, 2 * packing::kPackGroup, padded) ||
      !checkedMulAdd(padded, 21 + valueBytes, 64, bound))
    return false;
  out = packedMessageRoom(n, indexBytes, valueBytes);
  return true;
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

// Whether (bytes, nnz), as a peer announced them, can describe a message
// over `length` elements: at most length entries, their values whole, and
// no more index bytes than nnz indices can take. A garbled size must not
// send a decoder astray or size a buffer.
inline bool plausibleMessage(uint64_t bytes, uint64_t nnz, size_t length, size_t valueBytes, int indexBytes) {
  size_t values = 0;
  if (nnz > length || bytes % 8 != 0 || !checkedMul(nnz, valueBytes, values) || !checkedAdd(values, 7, values))
    return false;
  values &= ~size_t(7);
  return bytes >= values && bytes - values <= packing::maxPackedBytes(nnz, indexBytes);
}

// Every rank's announced message (all[r].bytes, all[r].nnz) checked as
// above; `total`: their bytes together. Fails naming the first bad rank.
dctResult_t checkAnnounced(dctComm_t comm, const std::vector<CallHeader>& all, size_t length, size_t valueBytes,
                           int indexBytes, size_t& total, const char* fn);

// The allgather plan's exchange: every rank's packed message from c->wire
// gathered into c->gathered (reserved for them all), their sizes and counts
// from the agreed headers, then summed in rank order into `target` (count
// elements of c->accType; mergePacked): bit-identical on every rank.
// `received`: bytes from the other ranks. The exchange's lap ends on clock.
// c->rankArrays must hold room for comm->size ranks (reserved before the
// agreement): nothing allocates here.
dctResult_t gatherMerged(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* target,
                         void* stream, PhaseTimer& clock, size_t& received, const char* fn, double factor = 1.0);

// gatherMerged in two halves. gatherPacked: the gather, the messages viewed
// in c->rankArrays.messages and, with `check`, checked (mergePacked's
// checkOnly: a malformed one fails naming its rank). mergeGathered: their
// sum into `target` (`checked`: after such a check, not validated again);
// after a check it cannot fail on the host, so it may follow the call's
// last vote and write straight into the caller's buffer. factor != 1:
// each element of the sum times it (MergeArgs::factor).
dctResult_t gatherPacked(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* stream,
                         PhaseTimer& clock, size_t& received, const char* fn, bool check);
dctResult_t mergeGathered(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* target,
                          void* stream, const char* fn, bool checked, double factor = 1.0);

// gatherPacked's views (and, with `check`, its check) of the messages that
// came in the slots of the header allgather (algo/gather_slot.h): each
// announced message must fit its slot. `received`: their bytes from the
// other ranks.
dctResult_t viewSlots(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* stream,
                      size_t& received, const char* fn, bool check);

}  // namespace dct

