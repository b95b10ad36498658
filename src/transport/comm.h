// The communicator behind dctComm_t: rank, size, a transport and its state,
// and the last error recorded on it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/async_flag.h"
#include "base/buffer.h"
#include "base/link_timing.h"
#include "base/settings.h"
#include "transport/transport.h"

struct dctComm {
  static constexpr unsigned kMagic = 0xdc7c0aa1u;
  unsigned magic = kMagic;
  int rank = 0;
  int size = 1;
  const dct::Transport* transport = nullptr;
  void* transportState = nullptr;  // owned by the transport
  void* faultSeam = nullptr;       // tests only: transport/fault_injection.h
  dct::LinkTiming link;            // its dense allreduce, timed at creation (link_probe.h)
  dct::Settings settings;          // DCT_* read once at creation, agreed (settleComm)
  uint64_t plansCreated = 0;       // all-to-all plan ids (plan creation is collective)
  // Hierarchical steps (DCT_HIERARCHY, transport/hierarchy.h): this rank's
  // node, and the node leaders (null on the other ranks). Owned.
  dctComm* node = nullptr;
  dctComm* leaders = nullptr;
  // dctSparseInputAllreduce's buffers and kernel context, kept across calls
  // (algo/algorithms.h: sparseInputScratch). Owned.
  dctCompressor* sparseInput = nullptr;
  // The sticky error of a fixed-capacity step that failed after its call
  // returned (device steps: dctCommGetAsyncError); every later step is a
  // no-op while it is set.
  dct::AsyncFlag asyncError;

  // Where a rank with no room for an agreement's headers receives them
  // (algo/agree.h): kHeaderRoomBytes per rank, reserved with the comm.
  static constexpr size_t kHeaderRoomBytes = 256;
  dct::Buffer headerRoom;
  // A small dctSparseInputAllreduce's messages ride in its header
  // allgather, each in a slot of gatherSlot bytes (0: none), the same on
  // every rank; every rank's header and slot land in slotRoom, followed by
  // this rank's own block to send (algo/gather_slot.h). The room holds
  // slots of gatherSlotMax, set at creation; gatherSlot follows the last
  // calls' largest messages (slotNeeds), learned alike on every rank.
  static constexpr int kSlotWindow = 16;
  size_t gatherSlot = 0, gatherSlotMax = 0;
  uint64_t slotNeeds[kSlotWindow] = {};
  uint64_t slotCalls = 0;
  dct::Buffer slotRoom;

  void setLastError(const char* msg);
  // A copy owned by the calling thread: stable until this thread's next
  // call, whatever other threads record on the comm meanwhile.
  const char* lastErrorMessage();

 private:
  std::mutex errorMutex;
  std::string lastError;
};

namespace dct {
// Every rank's outcome of a collective setup step, so that all fail alike:
// this rank's error, or dctInvalidUsage with `othersFailed` where another
// rank failed.
dctResult_t voteOnSetup(dctComm_t comm, dctResult_t mine, const char* othersFailed);

// Reserves comm->headerRoom (a comm's setup step: its failure is voted).
dctResult_t reserveHeaderRoom(dctComm_t comm);

// What every comm does once its transport is up: read the settings, agree
// the wire-shaping ones across ranks (a mismatch fails every rank with
// dctInvalidUsage naming the setting and a rank that differs), then build
// the hierarchy they ask for.
dctResult_t settleComm(dctComm_t comm);

inline bool validComm(dctComm_t comm) { return comm != nullptr && comm->magic == dctComm::kMagic; }
}  // namespace dct
