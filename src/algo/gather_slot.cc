#include "algo/gather_slot.h"

#include <algorithm>
#include <cstring>

#include "base/caught.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "transport/comm.h"

namespace dct {

size_t gatherSlotBytes(const CostParams& p, int ranks) {
  if (ranks < 1) return 0;
  const double latencies = 2.0 * (ranks > 1 ? ranks - 1 : 1);
  const double budget = latencies * p.alphaUs * p.linkGBps * 1e3;  // us x GB/s = kB
  if (!(budget > 0)) return 0;                                   // NaN too
  const size_t capped = budget < static_cast<double>(kMaxGatherBudget) ? static_cast<size_t>(budget) : kMaxGatherBudget;
  const size_t slot = std::min(capped / static_cast<size_t>(ranks), kMaxGatherSlot) & ~size_t(7);
  return slot < 64 ? 0 : slot;
}

dctResult_t settleGatherSlot(dctComm_t comm) {
  comm->gatherSlot = 0;
  if (!comm->settings.gatherSlots) return dctSuccess;  // agreed: every rank has none
  // A device transport's messages never take a slot, and it stages host
  // data in rounds of a few hundred bytes: a slot would only cost there.
  if (!comm->transport->hostBuffers) return dctSuccess;
  const size_t slot = gatherSlotBytes(costParams(comm->settings.cost, comm->link, comm->size), comm->size);
  if (slot == 0) return dctSuccess;  // alike on every rank: the same probe, settings and size
  // Every rank's block, and this rank's to send.
  const bool room = setGatherSlot(comm, slot) == dctSuccess;
  int32_t missing = 0;
  DCTCHECK(comm->transport->vote(comm, room ? 0 : 1, &missing, nullptr));
  if (missing != 0) comm->gatherSlot = comm->gatherSlotMax = 0;
  DCT_INFO("gather slot, %d ranks: %zu bytes per rank", comm->size, comm->gatherSlot);
  return dctSuccess;
}

dctResult_t setGatherSlot(dctComm_t comm, size_t slot) {
  size_t bytes = 0;
  slot &= ~size_t(7);
  if (!checkedMul(sizeof(CallHeader) + slot, static_cast<size_t>(comm->size) + 1, bytes) ||
      comm->slotRoom.reserve(bytes) != dctSuccess)
    return dctOutOfMemory;
  comm->gatherSlot = comm->gatherSlotMax = slot;
  comm->slotCalls = 0;
  for (uint64_t& need : comm->slotNeeds) need = 0;
  return dctSuccess;
}

namespace {

void learnNeed(dctComm_t comm, uint64_t largest) {
  if (comm->gatherSlotMax == 0) return;
  if (largest > comm->gatherSlotMax) largest = 0;  // no slot would hold it: no reason to pad the next calls
  comm->slotNeeds[comm->slotCalls++ % dctComm::kSlotWindow] = largest;
  uint64_t most = 0;
  for (uint64_t need : comm->slotNeeds) most = std::max(most, need);
  const uint64_t padded = most + most / 32 + 64;
  comm->gatherSlot = padded >= comm->gatherSlotMax ? comm->gatherSlotMax : (padded + 7) & ~uint64_t(7);
}

}  // namespace

void learnGatherSlot(dctComm_t comm, const std::vector<CallHeader>& all) {
  uint64_t largest = 0;
  for (const CallHeader& h : all) largest = std::max(largest, h.bytes);
  learnNeed(comm, largest);
}

void learnNoSlotCall(dctComm_t comm) { learnNeed(comm, 0); }

dctResult_t gatherHeadersAndSlots(dctComm_t comm, const CallHeader& mine, std::vector<CallHeader>& all, void* stream,
                                  const char* fn) {
  if (comm->gatherSlot == 0) return gatherPlainHeaders(comm, mine, all, stream, fn);
  char* send = sendSlot(comm) - sizeof(CallHeader);
  std::memcpy(send, &mine, sizeof(CallHeader));
  const dctResult_t room = caught(comm, fn, [&] {
    all.resize(comm->size);
    return dctSuccess;
  });
  const dctResult_t res = comm->transport->allgather(comm, send, comm->slotRoom.as(), gatherBlockBytes(comm), stream);
  if (room != dctSuccess) return room;
  for (int r = 0; r < comm->size; r++) std::memcpy(&all[r], gatheredBlock(comm, r), sizeof(CallHeader));
  return res;
}

}  // namespace dct
