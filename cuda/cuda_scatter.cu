// CUDA twin of scatter-add: dense[indices[j]] += values[j].
//
// Strictly ascending (unique) indices never share a target, so one thread per
// entry is race-free and each target sees exactly one add: bit-identical to
// the CPU twin. Repeated indices must be added in j order to match the CPU
// twin's sequential loop bit for bit: a stable radix sort of (index, j) by
// index puts each target's entries together, still in j order, and one
// thread per distinct index then adds its run in that order - for every
// target, the CPU's exact sequence of adds. Every libdct device path
// scatters sorted unique messages; the sorted path serves user indices
// (dctScatterAdd).
//
// Each add is addInto (dense type D, value type V): formed in D's
// accumulation type and rounded to D once, as cpu_context.h's addInto.
#include <cub/device/device_radix_sort.cuh>

#include "cuda_device.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

template <typename D, typename V, typename I>
__global__ void scatterUnique(D* __restrict__ dense, const I* __restrict__ indices,
                              const V* __restrict__ values, size_t nnz, const void* unlessNonzero,
                              size_t unlessBytes) {
  DCT_GRID_STRIDE(j, nnz) {
    if (unlessNonzero && nonzeroAt(unlessNonzero, unlessBytes, indices[j])) continue;
    addInto(dense[indices[j]], values[j]);
  }
}

template <typename J>
__global__ void iota(J* __restrict__ out, size_t nnz) {
  DCT_GRID_STRIDE(j, nnz) out[j] = static_cast<J>(j);
}

// keys: the indices sorted (all bits, so equal keys are adjacent); order:
// their original positions j (uint64 when wideOrder, else uint32: a runtime
// switch, not a template parameter). The thread at the first entry of a run
// of equal keys adds the whole run, in j order, rounding to D after every
// add as the CPU twin does. Keys >= n write nothing.
template <typename D, typename V, typename I>
__global__ void scatterRuns(D* __restrict__ dense, uint64_t n, const I* __restrict__ keys,
                            const void* __restrict__ order, bool wideOrder, const V* __restrict__ values,
                            size_t nnz) {
  DCT_GRID_STRIDE(k, nnz) {
    const I target = keys[k];
    if ((k > 0 && keys[k - 1] == target) || target >= n) continue;
    D sum = dense[target];
    for (size_t e = k; e < nnz && keys[e] == target; e++) {
      const size_t j = wideOrder ? static_cast<const uint64_t*>(order)[e] : static_cast<const uint32_t*>(order)[e];
      addInto(sum, values[j]);
    }
    dense[target] = sum;
  }
}

constexpr size_t align256(size_t bytes) { return (bytes + 255) & ~size_t(255); }

// Sorts (indices, j) by index into scratch, scatters the runs, and waits for
// the stream: scratch and temp are free again when it returns.
template <typename D, typename V, typename I, typename J>
dctResult_t scatterSorted(CudaContext* c, const ScatterArgs& a, cudaStream_t s) {
  const size_t keyBytes = align256(a.nnz * sizeof(I)), orderBytes = align256(a.nnz * sizeof(J));
  DCTCHECK(c->scratch.reserve(keyBytes + 2 * orderBytes));
  I* keys = c->scratch.as<I>();
  J* orderIn = c->scratch.as<J>(keyBytes);
  J* orderOut = c->scratch.as<J>(keyBytes + orderBytes);
  const I* idx = static_cast<const I*>(a.indices);
  iota<J><<<gridFor(a.nnz), kThreads, 0, s>>>(orderIn, a.nnz);
  CUDACHECK_LAUNCH();
  size_t bytes = 0;
  CUDACHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, idx, keys, orderIn, orderOut, a.nnz, 0,
                                            int(8 * sizeof(I)), s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceRadixSort::SortPairs(c->temp.ptr, bytes, idx, keys, orderIn, orderOut, a.nnz,
                                            0, int(8 * sizeof(I)), s));
  scatterRuns<D, V, I><<<gridFor(a.nnz), kThreads, 0, s>>>(
      static_cast<D*>(a.dense), a.n, keys, orderOut, sizeof(J) == 8, static_cast<const V*>(a.values), a.nnz);
  CUDACHECK_LAUNCH();
  CUDACHECK(cudaStreamSynchronize(s));
  return dctSuccess;
}

}  // namespace

dctResult_t scatterAdd(KernelContext* ctx, const ScatterArgs* args, void* stream) {
  const ScatterArgs& a = *args;
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchScatter(a, [&]<typename D, typename V, typename I>() -> dctResult_t {
    if (a.nnz == 0) return dctSuccess;
    if (!a.sortedUnique)
      return a.nnz <= UINT32_MAX ? scatterSorted<D, V, I, uint32_t>(cudaCtx(ctx), a, s)
                                 : scatterSorted<D, V, I, uint64_t>(cudaCtx(ctx), a, s);
    scatterUnique<D, V, I><<<gridFor(a.nnz), kThreads, 0, s>>>(
        static_cast<D*>(a.dense), static_cast<const I*>(a.indices), static_cast<const V*>(a.values), a.nnz,
        a.unlessNonzero, a.unlessBytes);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

}  // namespace dct::gpu
