#include "algo/packed_message.h"

#include "algo/gather_slot.h"

#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {

dctResult_t packMessage(dctCompressor_t c, const void* indices, const void* values, size_t nnz, size_t valueBytes,
                        uint64_t base, char* out, size_t& bytes, void* stream) {
  PackArgs packed{indices, nnz, c->indexBytes, out};
  packed.base = base;
  DCTCHECK(c->ops->packIndices(c->kernels, &packed, stream));
  const size_t v = nnz * valueBytes, padded = packing::pad8(v);
  DCTCHECK(c->ops->copy(c->kernels, out + packed.bytes, values, v, stream));
  if (padded > v) DCTCHECK(c->ops->zero(c->kernels, out + packed.bytes + v, padded - v, stream));
  bytes = packed.bytes + padded;  // packed.bytes is a multiple of 8
  return dctSuccess;
}

dctResult_t checkAnnounced(dctComm_t comm, const std::vector<CallHeader>& all, size_t length, size_t valueBytes,
                           int indexBytes, size_t& total, const char* fn) {
  total = 0;
  for (int r = 0; r < comm->size; r++) {
    const CallHeader& h = all[r];
    if (!plausibleMessage(h.bytes, h.nnz, length, valueBytes, indexBytes) || !checkedAdd(total, h.bytes, total))
      return fail(comm, dctInternalError, "%s: rank %d announced a malformed message (%llu entries, %llu bytes)", fn,
                  r, static_cast<unsigned long long>(h.nnz), static_cast<unsigned long long>(h.bytes));
  }
  return dctSuccess;
}

namespace {

// A failed merge or check of the gathered messages, naming a malformed one.
dctResult_t mergeFailed(dctCompressor_t c, dctComm_t comm, dctResult_t res, int malformed,
                        const std::vector<CallHeader>& all, const char* fn) {
  if (malformed < 0) return res;
  return fail(comm, res, "%s: malformed message from rank %d (%llu entries, %zu bytes)", fn, malformed,
              static_cast<unsigned long long>(all[malformed].nnz), c->rankArrays.sizes[malformed]);
}

MergeArgs mergeOf(dctCompressor_t c, void* target) {
  std::vector<PackedMessage>& messages = c->rankArrays.messages;
  MergeArgs merge{target, c->count, c->accType, c->wireType, c->indexBytes, messages.data(),
                  static_cast<int>(messages.size())};
  merge.stream = usesStreamingStores(c);
  return merge;
}

// Every rank's message at base + offsets[r] (sizes from the headers) viewed
// in c->rankArrays.messages and, with `check`, checked (a malformed one
// fails naming its rank).
dctResult_t viewMessages(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, const char* base,
                         void* stream, const char* fn, bool check) {
  const int P = comm->size;
  std::vector<PackedMessage>& messages = c->rankArrays.messages;
  messages.assign(P, PackedMessage{});
  for (int r = 0; r < P; r++)
    messages[r] = packedView(base + c->rankArrays.offsets[r], c->rankArrays.sizes[r], all[r].nnz,
                             dtypeSize(c->wireType));
  if (!check) return dctSuccess;
  MergeArgs merge = mergeOf(c, nullptr);
  merge.checkOnly = true;
  const dctResult_t res = c->ops->mergePacked(c->kernels, &merge, stream);
  return res == dctSuccess ? res : mergeFailed(c, comm, res, merge.malformed, all, fn);
}

// The announced messages checked (sizes, counts) and their total; the
// compressor's rank arrays, reserved before the agreement (RankArrays, so
// nothing allocates here), zeroed for the layout.
dctResult_t announcedLayout(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, size_t& total,
                            const char* fn) {
  c->rankArrays.sizes.assign(comm->size, 0);
  c->rankArrays.offsets.assign(comm->size, 0);
  total = 0;
  return checkAnnounced(comm, all, c->count, dtypeSize(c->wireType), c->indexBytes, total, fn);
}

}  // namespace

dctResult_t gatherPacked(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* stream,
                         PhaseTimer& clock, size_t& received, const char* fn, bool check) {
  const int P = comm->size;
  std::vector<size_t>& sizes = c->rankArrays.sizes;
  std::vector<size_t>& offsets = c->rankArrays.offsets;
  size_t total = 0;
  DCTCHECK(announcedLayout(c, comm, all, total, fn));
  size_t at = 0;  // within total: checked
  for (int r = 0; r < P; r++) {
    offsets[r] = at;
    at += sizes[r] = all[r].bytes;
  }
  char* gathered = c->gathered.as<char>();
  DCTCHECK(comm->transport->allgatherv(comm, c->wire.as(), sizes[comm->rank], gathered, sizes.data(), offsets.data(),
                                       stream));
  clock.lap(dctPhaseExchange);
  received = total - sizes[comm->rank];
  return viewMessages(c, comm, all, gathered, stream, fn, check);
}

dctResult_t viewSlots(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* stream,
                      size_t& received, const char* fn, bool check) {
  const int P = comm->size;
  std::vector<size_t>& sizes = c->rankArrays.sizes;
  std::vector<size_t>& offsets = c->rankArrays.offsets;
  size_t total = 0;
  DCTCHECK(announcedLayout(c, comm, all, total, fn));
  for (int r = 0; r < P; r++) {
    if (all[r].bytes > comm->gatherSlot)  // said it fit, and does not: it would read the next block
      return fail(comm, dctInternalError, "%s: rank %d announced %llu bytes in a slot of %zu", fn, r,
                  static_cast<unsigned long long>(all[r].bytes), comm->gatherSlot);
    sizes[r] = all[r].bytes;
    offsets[r] = static_cast<size_t>(r) * gatherBlockBytes(comm) + sizeof(CallHeader);
  }
  received = total - sizes[comm->rank];
  return viewMessages(c, comm, all, comm->slotRoom.as<char>(), stream, fn, check);
}

dctResult_t mergeGathered(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* target,
                          void* stream, const char* fn, bool checked, double factor) {
  MergeArgs merge = mergeOf(c, target);
  merge.checked = checked;
  merge.factor = factor;
  const dctResult_t res = c->ops->mergePacked(c->kernels, &merge, stream);
  return res == dctSuccess ? res : mergeFailed(c, comm, res, merge.malformed, all, fn);
}

dctResult_t gatherMerged(dctCompressor_t c, dctComm_t comm, const std::vector<CallHeader>& all, void* target,
                         void* stream, PhaseTimer& clock, size_t& received, const char* fn, double factor) {
  DCTCHECK(gatherPacked(c, comm, all, stream, clock, received, fn, false));
  return mergeGathered(c, comm, all, target, stream, fn, false, factor);
}

}  // namespace dct

