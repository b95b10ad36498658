// A small call's messages ride in its header allgather: every rank sends
// one block of its CallHeader then a slot of comm->gatherSlot bytes, where
// its packed message goes when it fits. Once the headers say that every
// message came, no allgatherv and no vote before it are needed: the call
// checks, merges and votes once (algo/sparse_input_allreduce.cc,
// algo/sparse_allreduce.cc).
//
// The slot's size must be the same on every rank without a word between
// them (a mismatched allgather would hang or overrun), so it never comes
// from a call's arguments, which may disagree. Its bound is fixed when the
// comm is made, from the link probe that every rank shares; within it the
// slot follows the largest message of the last kSlotWindow calls that
// succeeded, read from their gathered headers, which every rank holds
// alike (as auto's plan choice relies on): padding is what costs, and a
// slot far above the messages cost as much as the collectives it saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algo/agree.h"
#include "core/cost_model.h"

namespace dct {

// Per rank at most this, and all ranks' slots together at most the budget:
// a call's padding stays a small fraction of a large call's bytes, and the
// room a comm keeps stays small at any rank count.
constexpr size_t kMaxGatherSlot = 64 << 10;
constexpr size_t kMaxGatherBudget = 256 << 10;

// The slot for `ranks` on links priced by `p`: the bytes the link moves in
// the two collectives a call in the slots saves (a (P-1)-message latency
// each), over the ranks, so that a call whose messages are far smaller than
// its slot pays about what it saves; a multiple of 8, 0 where under 64.
size_t gatherSlotBytes(const CostParams& p, int ranks);

// At the comm's creation, after its link probe: comm->gatherSlot and
// comm->slotRoom (every rank's block, and this rank's block to send). A
// rank without the memory leaves every rank without a slot; so do
// DCT_GATHER_SLOTS=0 and a transport of device buffers (NCCL).
dctResult_t settleGatherSlot(dctComm_t comm);

// Tests: the slot and its bound set by hand (0: none), its history
// cleared, which every rank must do alike between calls. dctOutOfMemory
// leaves it as it was.
dctResult_t setGatherSlot(dctComm_t comm, size_t slot);

// After a call that succeeded on every rank under the allgather plan
// (dctSparseInputAllreduce's or dctSparseAllreduce's): its largest message
// (the agreed headers') joins the window, 0 where it is past the bound (a
// large call gains nothing from padding the small ones after it), and the
// slot becomes the window's largest with 1/32 and 64 bytes to spare (the
// next call's messages vary a little), within the bound.
void learnGatherSlot(dctComm_t comm, const std::vector<CallHeader>& all);

// One rank's block: its header, then its slot.
inline size_t gatherBlockBytes(const dctComm* comm) { return sizeof(CallHeader) + comm->gatherSlot; }
// Rank r's block in the room after the gather.
inline const char* gatheredBlock(dctComm_t comm, int r) { return comm->slotRoom.as<char>() + r * gatherBlockBytes(comm); }
// Where this rank's message goes when it fits its slot.
inline char* sendSlot(dctComm_t comm) {
  return comm->slotRoom.as<char>() + comm->size * gatherBlockBytes(comm) + sizeof(CallHeader);
}

// In a CallHeader's flags: this rank's message is in its slot (a bit no
// call's own flags use).
constexpr int32_t kInSlotFlag = 1 << 8;

inline bool allInSlots(const std::vector<CallHeader>& all) {
  for (const CallHeader& h : all)
    if ((h.flags & kInSlotFlag) == 0) return false;
  return true;
}

// agree() for a call whose messages may ride in the slots: the headers
// (gatherHeadersAndSlots), their check, then `ready` under caught(), which
// decides `tiny` from the gathered headers (alike on every rank whose gather
// succeeded) and reserves or views accordingly; then the agreement's vote
// unless tiny. A tiny call's only vote is its exchange's; a rank that failed
// before deciding votes here and meets it, so every rank fails alike. Tiny,
// the local result is returned for the call to carry to that vote.
template <typename Ready>
dctResult_t agreeOrSlots(dctComm_t comm, const CallHeader& mine, std::vector<CallHeader>& all, void* stream,
                         const char* fn, const bool& tiny, Ready&& ready) {
  dctResult_t res = gatherHeadersAndSlots(comm, mine, all, stream, fn);
  if (res == dctSuccess) res = checkHeaders(comm, mine, all, fn);
  if (res == dctSuccess) res = caught(comm, fn, ready);
  return tiny ? res : vote(comm, res, stream, fn, "agreement");
}

// A call that could not use the slots (another plan, 1-bit) succeeded on
// every rank: the window learns nothing needed room, so a comm that runs
// no small allgather-plan calls soon pads its headers by 64 bytes only.
void learnNoSlotCall(dctComm_t comm);

}  // namespace dct
