// CUDA twin of streamMerge (kernels/stream_args.h), bit for bit the CPU
// twin's (cpu_stream_step.cc), nothing read back, the same launches every
// step:
//
//   snapshot       words->halt = *failed, verdict = 0
//   verdictKernel  every slot checked (the CPU twin's slotVerdict: digest,
//                  then nnz <= capacity, then indices strictly ascending and
//                  < n), the worst into words->verdict (integer atomicMax:
//                  order-free)
//   voteKernel     state->vote = the verdict (halted: the sticky error);
//                  ranged (global top-k's owner slots, each at its range),
//                  raised to it instead
//   zeroKernel, scatterSlot (one launch per rank, in rank order), scaleKernel
//                  the sum, each a no-op unless the verdict is 0: a slot's
//                  indices are strictly ascending, so one thread per entry
//                  adds to distinct targets and every target sees the ranks'
//                  adds in rank order, as the CPU twin's scatter-add loop.
#include "cuda_stream.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

const char* slotOf(const void* slots, size_t slotBytes, int r) {
  return static_cast<const char*>(slots) + static_cast<size_t>(r) * slotBytes;
}

// Thread (r, j) of ranks x span (span = max(capacity, 1)): j == 0 checks
// slot r's header, every j < nnz its index j against j - 1. A slot whose
// header fails reports that alone (the CPU twin returns at the first
// failing check of a slot).
// Ranged (global top-k's owner slots): slot r's indices are below range r's
// length.
template <typename I>
__global__ void verdictKernel(StreamWords* words, const char* slots, size_t slotBytes, int ranks, size_t span,
                              size_t capacity, uint64_t n, uint64_t digest, bool ranged) {
  if (words->halt) return;
  const size_t total = static_cast<size_t>(ranks) * span;
  DCT_GRID_STRIDE(t, total) {
    const size_t r = t / span, j = t % span;
    const char* slot = slots + r * slotBytes;
    const SlotHeader* h = reinterpret_cast<const SlotHeader*>(slot);
    int32_t bad = dctSuccess;
    if (h->digest != digest) {
      bad = j == 0 ? dctInvalidUsage : dctSuccess;
    } else if (h->nnz > capacity) {
      bad = j == 0 ? dctInternalError : dctSuccess;
    } else if (j < h->nnz) {
      const I* idx = reinterpret_cast<const I*>(slot + slotIndexOffset());
      const int q = static_cast<int>(r);
      const uint64_t below = ranged ? streamRangeBegin(n, ranks, q + 1) - streamRangeBegin(n, ranks, q) : n;
      if (idx[j] >= below || (j > 0 && idx[j] <= idx[j - 1])) bad = dctInternalError;
    }
    if (bad != dctSuccess) atomicMax(&words->verdict, bad);
  }
}

// A halted rank votes its sticky error: every rank then drops the step.
// Ranged, the step's earlier merge voted already: this raises it.
__global__ void voteKernel(const StreamWords* words, StreamState* state, bool ranged) {
  const int32_t mine = words->halt ? words->halt : words->verdict;
  const int32_t before = ranged ? state->vote : 0;
  state->vote = mine > before ? mine : before;
}

__device__ __forceinline__ bool summing(const StreamWords* words) { return !words->halt && words->verdict == 0; }

template <typename T>
__global__ void zeroKernel(const StreamWords* words, T* target, size_t n) {
  if (!summing(words)) return;
  DCT_GRID_STRIDE(i, n) target[i] = T(0);
}

// target[idx[j]] += values[j] for j < the slot's nnz (checked <= capacity).
template <typename D, typename V, typename I>
__global__ void scatterSlot(const StreamWords* words, const char* slot, size_t capacity, int indexBytes,
                            D* target) {
  if (!summing(words)) return;
  const size_t nnz = reinterpret_cast<const SlotHeader*>(slot)->nnz;
  const I* idx = reinterpret_cast<const I*>(slot + slotIndexOffset());
  const V* values = reinterpret_cast<const V*>(slot + slotValueOffset(capacity, indexBytes));
  DCT_GRID_STRIDE(j, nnz) addInto(target[idx[j]], values[j]);
}

// The CPU twin's scale: x *= T(factor), a NaN kept as the host keeps it.
template <typename T>
__global__ void scaleKernel(const StreamWords* words, T* x, size_t n, T factor) {
  if (!summing(words)) return;
  DCT_GRID_STRIDE(i, n) x[i] = hostMul(x[i], factor);
}

template <typename D, typename V, typename I>
dctResult_t sumSlots(const StreamStepArgs& a, const StreamWords* words, cudaStream_t s) {
  D* target = static_cast<D*>(a.target);
  if (a.n > 0) {
    zeroKernel<D><<<gridFor(a.n), kThreads, 0, s>>>(words, target, a.n);
    CUDACHECK_LAUNCH();
  }
  if (a.capacity > 0) {
    for (int r = 0; r < a.ranks; r++) {
      D* at = a.ranged ? target + streamRangeBegin(a.n, a.ranks, r) : target;
      scatterSlot<D, V, I><<<gridFor(a.capacity), kThreads, 0, s>>>(words, slotOf(a.slots, a.slotBytes, r),
                                                                      a.capacity, a.indexBytes, at);
      CUDACHECK_LAUNCH();
    }
  }
  if (a.target == a.result && a.factor != 1.0 && a.n > 0) {
    scaleKernel<D><<<gridFor(a.n), kThreads, 0, s>>>(words, target, a.n, static_cast<D>(a.factor));
    CUDACHECK_LAUNCH();
  }
  return dctSuccess;
}

}  // namespace

dctResult_t streamMerge(KernelContext* ctx, const StreamStepArgs* args, void* stream) {
  const StreamStepArgs& a = *args;
  const cudaStream_t s = cudaStreamOf(stream);
  if (a.indexBytes != 4 && a.indexBytes != 8)
    return fail(nullptr, dctInvalidArgument, "streamMerge: index width %d", a.indexBytes);
  StreamWords* words = nullptr;
  void* region = nullptr;
  DCTCHECK(streamWorkspace(cudaCtx(ctx), a, s, &words, &region));
  DCTCHECK(snapshot(a, words, s));
  if (a.ranks > 0) {
    const size_t span = a.capacity > 0 ? a.capacity : 1;
    const size_t total = static_cast<size_t>(a.ranks) * span;
    const char* slots = static_cast<const char*>(a.slots);
    if (a.indexBytes == 8)
      verdictKernel<uint64_t><<<gridFor(total), kThreads, 0, s>>>(words, slots, a.slotBytes, a.ranks, span,
                                                                  a.capacity, a.n, a.digest, a.ranged);
    else
      verdictKernel<uint32_t><<<gridFor(total), kThreads, 0, s>>>(words, slots, a.slotBytes, a.ranks, span,
                                                                  a.capacity, a.n, a.digest, a.ranged);
    CUDACHECK_LAUNCH();
  }
  voteKernel<<<1, 1, 0, s>>>(words, a.state, a.ranged);
  CUDACHECK_LAUNCH();
  // The sum's types: accumulation fp32 or fp64, wire values at most as wide.
  return dispatchValue(a.accType, [&]<typename D>() {
    return dispatchAnyValue(a.wireType, [&]<typename V>() -> dctResult_t {
      if constexpr (sizeof(V) > sizeof(D)) return dctNotSupported;
      else return a.indexBytes == 8 ? sumSlots<D, V, uint64_t>(a, words, s) : sumSlots<D, V, uint32_t>(a, words, s);
    });
  });
}

}  // namespace dct::gpu
