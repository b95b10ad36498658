// What the CUDA twin's fixed-capacity step ops (cuda_stream_step.cu,
// cuda_stream_merge.cu) share: their device words and workspace, and the
// snapshot of the comm's sticky error each op starts with.
//
// Capture rules every op here keeps (a captured graph replays the step):
// only kernel launches and stream-ordered device work, nothing read back,
// no allocation once the workspace is reserved, and every launch's
// arguments (pointers, sizes) the same on every call; what changes from
// step to step (tau, the step count, the committed residual, the verdict)
// is read by the kernels from device memory.
#pragma once

#include "cuda_device.cuh"
#include "cuda_sample.cuh"

namespace dct::gpu {

// Device words of one step (in the workspace's first bytes).
struct StreamWords {
  int32_t halt;     // this op's snapshot of *failed: every kernel of the op reads it
  int32_t verdict;  // streamMerge: the slots' verdict (max)
  SampleGate gate;  // streamEstimate: the step's seed, whether it estimates
  const void* input;  // streamEstimate: residuals[committed]
  unsigned long long selected;   // streamSelect: the last tile's inclusive prefix
  unsigned long long nonFinite;  // streamSelect: atomics
};

// The comm's sticky error as the device sees it now (another stream's
// commit, or the host, may write it at any time: each op reads it once).
__device__ __forceinline__ int32_t readFailed(const int32_t* failed) {
  return *static_cast<const volatile int32_t*>(failed);
}

// The workspace of the step's ops: the words, then one region that the
// estimate's keys and sort and the select's tile state take in turn. Its
// size depends only on the step's fixed arguments, so it is reserved by the
// first op of the first step and never moves after; a growth under stream
// capture fails (dctInvalidUsage) rather than allocate.
dctResult_t streamWorkspace(CudaContext* c, const StreamStepArgs& a, cudaStream_t s, StreamWords** words,
                            void** region);

// Queues one thread: words->halt = *failed, the op's words cleared.
dctResult_t snapshot(const StreamStepArgs& a, StreamWords* words, cudaStream_t s);

}  // namespace dct::gpu
