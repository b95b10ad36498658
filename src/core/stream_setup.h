// A fixed-capacity compressor's device-side state (kernels/stream_args.h)
// and what the host keeps of it. Once a compressor's fixed-capacity steps
// run (`live`), its state lives in the twin's memory and the host fields
// (c->tau, c->committed, c->stats' counters) are a snapshot that
// settleStream() refreshes: every call that reads or replaces the state
// settles first, and one that replaces it (a loaded state) drops `live`,
// so the next step publishes the host fields again.
#pragma once

#include <cstddef>
#include <vector>

#include "core/twin_buffer.h"
#include "dct/dct.h"

namespace dct {

struct StreamSetup {
  TwinBuffer state;          // one StreamState
  bool live = false;         // `state` holds the compressor's state
  bool agreed = false;       // the ranks agreed this compressor's slots (its first step)
  void* lastStream = nullptr;  // the last step's stream: reads of the state wait for it
  size_t capacity = 0;       // entries per slot
  size_t slotBytes = 0;
  // A step's statistics, fixed by the agreed sizes (settleStream).
  uint64_t sentBytes = 0, receivedBytes = 0;
  dctAlgorithm_t algorithm = dctAlgoAllgather;
  // Host stats when the state went live: the counters since come from it.
  dctStats_t base{};
  // Global top-k with fixed pieces (algo/stream_global_topk.cc): the
  // owner's StreamState, P pieces of pieceCapacity entries each way (sent
  // from the compressor's wire, received here), the range's sum, the
  // owner's slot (ownerCapacity; the compressor's gathered holds all P).
  TwinBuffer ownerState;
  TwinBuffer received;
  TwinBuffer rangeSum;
  TwinBuffer ownerSlot;
  size_t pieceCapacity = 0, ownerCapacity = 0, ownerSlotBytes = 0;
  size_t ownerBegin = 0, ownerLength = 0;  // this rank's range
  std::vector<size_t> blockBytes, blockOffsets;  // the pieces' alltoallv, where the transport has no alltoall
  // Tests: a host twin's steps report as a device's do (asynchronously,
  // through the comm's sticky error), so that contract runs without a GPU.
  bool asyncForTesting = false;
};

// The 1-bit allreduce's queued step (algo/onebit_step.cc) uses the same
// state (StreamState's 1-bit fields), published and settled here too.
//
// The fixed-capacity mode is on for this compressor (config.capacityFactor,
// a top-K compressor).
bool fixedCapacity(dctCompressor_t c);
// Entries per slot: ceil(capacityFactor * k), at most count.
size_t slotCapacity(dctCompressor_t c);
// The fixed-capacity step runs global top-k with fixed pieces
// (config.algorithm), else the allgather of slots.
bool fixedGlobalTopk(dctCompressor_t c);
// Global top-k's fixed sizes, for `ranks` equal ranges of the tensor (the
// longest, ceil(count / P), sizes every piece and owner slot alike):
//   piece    the worker's share of a range: kq = density x longest range,
//            capacity max(ceil(c kq), ceil(kq + 3 sqrt(kq))), at most the range
//   owner    the owner's aim (kOwnerTargetScale x density, at most 1) of the
//            longest range, with the same rule
// The 3 sqrt(kq) is the drift band's noise allowance: a uniform selection
// puts a binomial count of sd ~ sqrt(kq) into a range, which c kq alone
// covers only from kq >= 9 / (c - 1)^2 (144 at c = 1.25).
size_t pieceCapacity(dctCompressor_t c, int ranks);
size_t ownerSlotCapacity(dctCompressor_t c, int ranks);

// A step of this compressor queues on a device with no host round trip
// (fixed-capacity or unsegmented 1-bit, device twin, past its warmup and
// first agreed step, its state live in device memory): what CUDA graph
// capture needs.
bool stepCapturable(dctCompressor_t c);

// Host fields -> the twin's StreamState (synchronous); `live` afterwards.
// Global top-k's owner too (its residual must already cover the range
// reserveSlots gave this rank: foldOwnerResidual first).
dctResult_t publishStream(dctCompressor_t c, void* stream);
// The twin's StreamState -> host fields, after waiting for the last step's
// stream; nothing when not live.
dctResult_t settleStream(dctCompressor_t c);

}  // namespace dct
