// A fixed-capacity compressor's device-side state (kernels/stream_args.h)
// and what the host keeps of it. Once a compressor's fixed-capacity steps
// run (`live`), its state lives in the twin's memory and the host fields
// (c->tau, c->committed, c->stats' counters) are a snapshot that
// settleStream() refreshes: every call that reads or replaces the state
// settles first, and one that replaces it (a loaded state) drops `live`,
// so the next step publishes the host fields again.
#pragma once

#include <cstddef>

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

// A step of this compressor queues on a device with no host round trip
// (fixed-capacity, device twin, past its warmup and first agreed step, its
// state live in device memory): what CUDA graph capture needs.
bool stepCapturable(dctCompressor_t c);

// Host fields -> the twin's StreamState (synchronous); `live` afterwards.
dctResult_t publishStream(dctCompressor_t c, void* stream);
// The twin's StreamState -> host fields, after waiting for the last step's
// stream; nothing when not live.
dctResult_t settleStream(dctCompressor_t c);

}  // namespace dct
