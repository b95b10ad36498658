// CUDA twin of the fixed-capacity step's ops (kernels/stream_args.h), bit
// for bit the CPU twin (cpu_stream_step.cc), with nothing read back and the
// same launches every step (cuda_stream.cuh's capture rules):
//
//   workspace      streamWorkspace: reserved once, refused under capture
//   streamEstimate decideKernel (the schedule, the seed, draftTau = tau),
//                  then the threshold op's gather and k-th key (cuda_sample.cuh)
//                  predicated on the decision, pickKernel: draftTau = the
//                  k-th key, floored as the threshold op floors it
//   streamPost / streamCommit / streamFinish
//                  one thread each (finish: convert's element, predicated)
// streamSelect is cuda_stream_select.cu, streamMerge cuda_stream_merge.cu.
#include <cuda/std/limits>

#include "cuda_select_tiles.cuh"
#include "cuda_stream.cuh"
#include "kernels/select_types.h"

namespace dct::gpu {

// --- the workspace ------------------------------------------------------

namespace {

constexpr size_t kWordsBytes = alignUp256(sizeof(StreamWords));

// The region: the estimate's keys and k-th key, or the select's tile state.
dctResult_t regionBytes(const StreamStepArgs& a, size_t* bytes) {
  *bytes = 0;
  if (a.n == 0) return dctSuccess;
  const size_t tiles = tileCount(a.n);
  if (!tilesFit(tiles)) return fail(nullptr, dctNotSupported, "fixed-capacity step: %zu elements", a.n);
  size_t tileBytes = 0;
  CUDACHECK(TileState::AllocationSize(static_cast<int>(tiles), tileBytes));
  KthLayout l;
  const dctResult_t res = dispatchValue(a.accType, [&]<typename T>() -> dctResult_t {
    CUDACHECK(kthLayout<T>(a.n, a.density, dctThresholdSampled, &l));
    return dctSuccess;
  });
  DCTCHECK(res);
  *bytes = l.total() > tileBytes ? l.total() : tileBytes;
  return dctSuccess;
}

__global__ void snapshotKernel(const int32_t* failed, StreamWords* words) {
  words->halt = readFailed(failed);
  words->verdict = 0;
  words->gate.active = 0;
  words->selected = 0;
  words->nonFinite = 0;
}

}  // namespace

dctResult_t streamWorkspace(CudaContext* c, const StreamStepArgs& a, cudaStream_t s, StreamWords** words,
                            void** region) {
  size_t bytes = 0;
  DCTCHECK(regionBytes(a, &bytes));
  const size_t want = kWordsBytes + bytes;
  if (want > c->stream.bytes) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDACHECK(cudaStreamIsCapturing(s, &capture));
    if (capture != cudaStreamCaptureStatusNone)
      return fail(nullptr, dctInvalidUsage,
                  "fixed-capacity step: its device workspace (%zu bytes) is allocated by the first step, which "
                  "must run outside CUDA graph capture (run one step eagerly before capturing)",
                  want);
    CUDACHECK(cudaStreamSynchronize(s));  // steps queued before may still use the old block
    DCTCHECK(c->stream.reserve(want));
  }
  *words = c->stream.as<StreamWords>();
  *region = c->stream.as<char>(kWordsBytes);
  return dctSuccess;
}

dctResult_t snapshot(const StreamStepArgs& a, StreamWords* words, cudaStream_t s) {
  snapshotKernel<<<1, 1, 0, s>>>(a.failed, words);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

// --- streamEstimate -----------------------------------------------------

namespace {

// The schedule, on the device: estimated, draftTau = tau, and the gate of
// the gather (the step's seed; whether it samples at all).
__global__ void decideKernel(const int32_t* failed, StreamState* state, uint64_t interval, long long seed,
                             const void* r0, const void* r1, StreamWords* words) {
  words->halt = readFailed(failed);
  words->gate.active = 0;
  if (words->halt) return;
  const int32_t due = streamEstimateDue(*state, interval) ? 1 : 0;
  state->estimated = due;
  state->draftTau = state->tau;
  words->gate.seed = stepSeed(seed, state->step);
  words->gate.active = due;
  words->input = state->committed ? r1 : r0;
}

// The residual to estimate on is the committed one, known on the device:
// read through the word decideKernel wrote (the same for every element).
template <typename T>
struct StepPlain {
  const void* const* x;
  __device__ T operator()(size_t i) const { return static_cast<const T*>(*x)[i]; }
};
template <typename T, typename B>
struct StepAccumulated {
  const void* const* x;
  const B* __restrict__ y;
  __device__ T operator()(size_t i) const { return hostAdd(static_cast<const T*>(*x)[i], widenValue<T>(y[i])); }
};

// draftTau = the k-th largest magnitude (kth null: n == 0, +Inf), floored at
// T's smallest positive value as the threshold op floors it.
template <typename T>
__global__ void pickKernel(const StreamWords* words, const KeyOf<T>* kth, StreamState* state) {
  if (!words->gate.active) return;
  if (kth == nullptr) {
    state->draftTau = ::cuda::std::numeric_limits<double>::infinity();
    return;
  }
  const double t = keyValue<T>(*kth);
  const double smallest = static_cast<double>(::cuda::std::numeric_limits<T>::denorm_min());
  state->draftTau = t > smallest ? t : smallest;
}

template <typename T, typename At>
dctResult_t estimateOn(const StreamStepArgs& a, StreamWords* words, void* region, At at, cudaStream_t s) {
  const KeyOf<T>* kth = nullptr;
  if (a.n > 0) {
    KthLayout l;
    CUDACHECK(kthLayout<T>(a.n, a.density, dctThresholdSampled, &l));
    DCTCHECK((gatherKth<T>(l, region, at, a.n, DeviceSeed{&words->gate}, s, &kth)));
  }
  pickKernel<T><<<1, 1, 0, s>>>(words, kth, a.state);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

}  // namespace

dctResult_t streamEstimate(KernelContext* ctx, const StreamStepArgs* args, void* stream) {
  const StreamStepArgs& a = *args;
  const cudaStream_t s = cudaStreamOf(stream);
  StreamWords* words = nullptr;
  void* region = nullptr;
  DCTCHECK(streamWorkspace(cudaCtx(ctx), a, s, &words, &region));
  decideKernel<<<1, 1, 0, s>>>(a.failed, a.state, a.interval, a.seed, a.residuals[0], a.residuals[1], words);
  CUDACHECK_LAUNCH();
  const void* const* x = &words->input;
  if (a.grad == nullptr)
    return dispatchValue(a.accType, [&]<typename T>() { return estimateOn<T>(a, words, region, StepPlain<T>{x}, s); });
  const dctResult_t res = dispatchValue(a.accType, [&]<typename T>() {
    return dispatchAnyValue(a.gradType, [&]<typename B>() {
      return estimateOn<T>(a, words, region, StepAccumulated<T, B>{x, static_cast<const B*>(a.grad)}, s);
    });
  });
  return res == dctNotSupported ? dctInvalidArgument : res;  // as the threshold op: an accumulator is float or double
}

// --- streamPost, streamCommit, streamFinish -----------------------------

namespace {

// Halted or not: a step whose merge did not run must still vote a failure.
__global__ void postKernel(StreamState* state, int32_t code) {
  if (code > state->vote) state->vote = code;
}

// The draft becomes the state when every rank voted success; a failed vote
// drops it and, on a device (sticky), becomes the comm's asynchronous error
// (the first one stays). The vote alone decides, so every rank commits or
// drops alike (a rank halted before the vote voted its error).
__global__ void commitKernel(int32_t* failed, StreamState* state, StreamState* owner, bool sticky, int errorFeedback,
                             bool onebit) {
  StreamState& s = *state;
  s.lastOk = 0;
  if (s.vote != dctSuccess) {
    if (sticky && !readFailed(failed)) {
      *static_cast<volatile int32_t*>(failed) = s.vote;
      __threadfence_system();  // the host reads the word without waiting for the stream
    }
    return;
  }
  if (onebit) onebitAdvance(s);
  else streamAdvance(s, errorFeedback);
  if (owner) streamAdvance(*owner, errorFeedback);
}

// convert's element (cuda_convert.cu), only after a committed step.
template <typename D, typename S, typename W>
__global__ void finishKernel(const StreamState* state, D* dst, const S* src, size_t n, W factor, bool unit) {
  if (!state->lastOk) return;
  DCT_GRID_STRIDE(i, n) dst[i] = convertElement<D, S, W>(src[i], factor, unit);
}

}  // namespace

dctResult_t streamPost(KernelContext*, const StreamStepArgs* args, int32_t code, void* stream) {
  postKernel<<<1, 1, 0, cudaStreamOf(stream)>>>(args->state, code);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

dctResult_t streamCommit(KernelContext*, const StreamStepArgs* args, void* stream) {
  commitKernel<<<1, 1, 0, cudaStreamOf(stream)>>>(args->failed, args->state, args->owner, args->sticky,
                                                    args->errorFeedback, args->onebit);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

dctResult_t streamFinish(KernelContext*, const StreamStepArgs* args, void* stream) {
  const StreamStepArgs& a = *args;
  if (a.target == a.result) return dctSuccess;  // the merge scaled the result in place
  return dispatchAnyValue(a.resultType, [&]<typename D>() {
    return dispatchAnyValue(a.accType, [&]<typename S>() -> dctResult_t {
      if (a.n == 0) return dctSuccess;
      using W = WideOf<D, S>;
      const W f = static_cast<W>(a.factor);  // rounded on the host, as convert does
      finishKernel<D, S, W><<<gridFor(a.n), kThreads, 0, cudaStreamOf(stream)>>>(
          a.state, static_cast<D*>(a.result), static_cast<const S*>(a.target), a.n, f, f == W(1));
      CUDACHECK_LAUNCH();
      return dctSuccess;
    });
  });
}

}  // namespace dct::gpu
