// CUDA twin of the fused EF + threshold select + compaction (SelectArgs).
//
//   entry    selectCompact: type dispatch, counters back to the host
//   dispatch compactSelected: EF pass, CUB two-phase temp sizing, launches
//   kernels  add (EF, any gradient type), cub::DeviceSelect::FlaggedIf of the
//            indices flagged by acc, finishWritten (values and residual of
//            the written entries)
//
// FlaggedIf takes a counting iterator of indices as its items and acc itself
// as the flags, so CUB loads acc as a plain array (coalesced tiles) and writes
// the selected indices in ascending order. (DeviceSelect::If over the indices
// with a predicate that read acc[i] took 193 us at 64M on an H200, FlaggedIf
// 151 us: the predicate's loads strided by each thread's items.) A tabulate output iterator writes
// slot j's index only while j < capacity, so at most `capacity` entries are
// ever stored and entries past it keep acc in the residual. finishWritten then
// rounds each written acc to the value type (saturating) and leaves the
// rounding error in the residual. Only the accumulation type is a template
// parameter of the CUB instantiation (the index width is a runtime switch in
// the writer, the value type lives in finishWritten), which keeps the build to
// two DeviceSelect instantiations.
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/tabulate_output_iterator.h>

#include "cuda_device.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

template <typename T>
struct IsTaken {
  T tau;
  __device__ bool operator()(T acc) const { return taken(acc, tau); }
};

// Output slot j receives the j-th selected index i.
struct WriteIndex {
  void* indices;
  int64_t capacity;
  bool wide;  // uint64 indices
  __device__ void operator()(int64_t j, int64_t i) const {
    if (j >= capacity) return;
    if (wide) static_cast<uint64_t*>(indices)[j] = static_cast<uint64_t>(i);
    else static_cast<uint32_t*>(indices)[j] = static_cast<uint32_t>(i);
  }
};

// For the nnz = min(selected, capacity) written entries (the count is read
// on the device: no host round trip): value = acc saturated to V, residual =
// acc - value (0 when V is T, and for NaN/Inf), and the non-finite count.
template <typename T, typename V, typename I>
__global__ void finishWritten(T* __restrict__ residual, const I* __restrict__ indices,
                              V* __restrict__ values, size_t capacity, AccOf<V> limit, Counters* counters) {
  const size_t selected = static_cast<size_t>(counters->selected);
  const size_t nnz = selected < capacity ? selected : capacity;
  unsigned long long nonFinite = 0;
  DCT_GRID_STRIDE(j, nnz) {
    const T acc = residual[indices[j]];
    const V v = saturateValue<V>(acc, limit);
    values[j] = v;
    const bool fin = finite(acc);
    residual[indices[j]] = fin ? hostSub(acc, widenValue<T>(v)) : T(0);
    nonFinite += !fin;
  }
  addBlockCount(nonFinite, &counters->nonFinite);
}

template <typename T, typename V, typename I>
dctResult_t compactSelected(CudaContext* c, const SelectArgs& a, cudaStream_t s) {
  T* residual = static_cast<T*>(a.residual);
  const size_t slots = a.capacity < a.n ? a.capacity : a.n;  // never more than n are selected
  const auto first = thrust::counting_iterator<int64_t>(0);
  const auto out = thrust::make_tabulate_output_iterator(
      WriteIndex{a.outIndices, static_cast<int64_t>(slots), sizeof(I) == 8});
  const IsTaken<T> pred{static_cast<T>(a.tau)};  // tau rounded to T, as on the CPU
  const int64_t n = static_cast<int64_t>(a.n);

  CUDACHECK(resetCounters(c, s));
  size_t bytes = 0;
  const T* flags = residual;
  CUDACHECK(cub::DeviceSelect::FlaggedIf(nullptr, bytes, first, flags, out, &c->device->selected, n, pred, s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceSelect::FlaggedIf(c->temp.ptr, bytes, first, flags, out, &c->device->selected, n, pred, s));
  if (slots > 0) {
    finishWritten<T, V, I><<<gridFor(slots), kThreads, 0, s>>>(
        residual, static_cast<const I*>(a.outIndices), static_cast<V*>(a.outValues), slots, valueLimitOf<T, V>(a), c->device);
    CUDACHECK_LAUNCH();
  }
  CUDACHECK(fetchCounters(c, s));
  return dctSuccess;
}

}  // namespace

dctResult_t selectCompact(KernelContext* ctx, SelectArgs* args, void* stream) {
  SelectArgs& a = *args;
  a.nnz = a.selected = a.nonFinite = 0;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchTypes(a.dtype, a.indexBytes, [&]<typename T, typename I>() {
    return dispatchAnyValue(a.valueT(), [&]<typename V>() -> dctResult_t {
      if (a.n == 0) return dctSuccess;
      // Error feedback first: the residual becomes acc (the old residual + grad).
      if (a.grad) DCTCHECK(add(ctx, a.residual, a.in(), a.grad, a.n, a.dtype, a.gradT(), stream));
      else if (a.in() != a.residual)
        CUDACHECK(cudaMemcpyAsync(a.residual, a.in(), a.n * sizeof(T), cudaMemcpyDeviceToDevice, s));
      DCTCHECK((compactSelected<T, V, I>(c, a, s)));
      a.selected = static_cast<size_t>(c->host->selected);
      a.nnz = a.selected < a.capacity ? a.selected : a.capacity;
      a.nonFinite = static_cast<size_t>(c->host->nonFinite);
      return dctSuccess;
    });
  });
}

}  // namespace dct::gpu
