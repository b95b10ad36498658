// CUDA twin of the threshold estimators: the k-th largest |x| (NaN as +Inf)
// of the same deterministic PRNG sample as the CPU twin (sampled), or of all
// of x (exact).
//
//   entry    threshold: n == 0, type dispatch, the positive floor
//   dispatch kthLargest: sample size and k (the CPU twin's formulas), scratch,
//            CUB two-phase radix sort, the k-th key back to the host
//   kernels  gatherAll / gatherSample -> magnitude keys
//
// Magnitudes are non-negative and never NaN, so their bit patterns as
// unsigned integers sort exactly like the values: the sort runs on integer
// keys below the (always clear) sign bit. The k-th largest is a value, not a
// position, so it equals the CPU twin's nth_element result bit for bit.
#include <cmath>
#include <cstring>
#include <limits>

#include <cub/device/device_radix_sort.cuh>

#include "cuda_device.cuh"

namespace dct::gpu {
namespace {

template <typename T, typename K = typename MagnitudeKey<T>::type>
__global__ void gatherAll(const T* __restrict__ x, size_t n, K* __restrict__ keys) {
  DCT_GRID_STRIDE(i, n) keys[i] = MagnitudeKey<T>::of(magnitude(x[i]));
}

// Draw i of the splitmix64 stream seeded by `seed` picks position
// samplePosition(draw, n), exactly as the CPU twin's sequential loop does.
template <typename T, typename K = typename MagnitudeKey<T>::type>
__global__ void gatherSample(const T* __restrict__ x, size_t n, size_t m, uint64_t seed,
                             K* __restrict__ keys) {
  DCT_GRID_STRIDE(i, m) {
    const size_t p = samplePositionAt(splitmix64At(seed, i), n);
    keys[i] = MagnitudeKey<T>::of(magnitude(x[p]));
  }
}

constexpr size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

template <typename T>
dctResult_t kthLargest(CudaContext* c, const ThresholdArgs& a, cudaStream_t s, double* out) {
  using K = typename MagnitudeKey<T>::type;
  const T* x = static_cast<const T*>(a.data);
  const size_t m = a.method == dctThresholdExact ? a.n : thresholdSampleSize(a.n, a.density);
  const double kd = std::round(a.density * static_cast<double>(m));
  const size_t k = kd < 1.0 ? 1 : (kd > static_cast<double>(m) ? m : static_cast<size_t>(kd));

  const size_t half = alignUp(m * sizeof(K));
  DCTCHECK(c->scratch.reserve(2 * half));
  cub::DoubleBuffer<K> keys(c->scratch.as<K>(), c->scratch.as<K>(half));
  if (m == a.n) gatherAll<T><<<gridFor(m), kThreads, 0, s>>>(x, m, keys.Current());
  else gatherSample<T><<<gridFor(m), kThreads, 0, s>>>(x, a.n, m, a.seed, keys.Current());
  CUDACHECK_LAUNCH();

  const int endBit = static_cast<int>(sizeof(K) * 8 - 1);  // the sign bit is always clear
  const uint64_t items = m;  // one (64-bit offset) instantiation per key type
  size_t bytes = 0;
  CUDACHECK(cub::DeviceRadixSort::SortKeysDescending(nullptr, bytes, keys, items, 0, endBit, s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceRadixSort::SortKeysDescending(c->temp.ptr, bytes, keys, items, 0, endBit, s));

  K bits = 0;
  CUDACHECK(cudaMemcpyAsync(&c->host->kth, keys.Current() + (k - 1), sizeof(K),
                            cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  std::memcpy(&bits, &c->host->kth, sizeof(K));
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  *out = static_cast<double>(value);
  return dctSuccess;
}

}  // namespace

dctResult_t threshold(KernelContext* ctx, const ThresholdArgs* args, double* tau, void* stream) {
  if (args->n == 0) {
    *tau = std::numeric_limits<double>::infinity();
    return dctSuccess;
  }
  double t = 0;
  dctResult_t res = dispatchValue(args->dtype, [&]<typename T>() -> dctResult_t {
    return kthLargest<T>(cudaCtx(ctx), *args, cudaStreamOf(stream), &t);
  });
  // tau must stay positive, or exact zeros would be "selected" and sent.
  const double smallest = args->dtype == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                                    : std::numeric_limits<float>::denorm_min();
  *tau = t > smallest ? t : smallest;
  return res;
}

}  // namespace dct::gpu
