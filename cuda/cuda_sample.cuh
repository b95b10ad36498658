// The sampled and exact threshold estimates' device pieces, shared by the
// threshold op (cuda_threshold.cu: seed from the call, k-th key read back)
// and the fixed-capacity step's estimate (cuda_stream_step.cu: seed and
// verdict in device memory, k-th key left there): the value at a position
// (x, or the accumulator x + y never written), the gather of magnitude keys
// at the CPU twin's sample positions, and the k-th largest key (a block's
// radix select for a sample, a descending radix sort for larger sets).
#pragma once

#include <cub/device/device_radix_sort.cuh>

#include "cuda_device.cuh"
#include "cuda_kth_select.cuh"
#include "cuda_values.cuh"
#include "kernels/sampling.h"
#include "kernels/threshold_bisect.h"

namespace dct::gpu {

// The value at position i: x[i], or the accumulator x[i] + y[i] (y widened
// first, as addKernel forms it), never written.
template <typename T>
struct Plain {
  const T* __restrict__ x;
  __device__ T operator()(size_t i) const { return x[i]; }
};
template <typename T, typename B>
struct Accumulated {
  const T* __restrict__ x;
  const B* __restrict__ y;
  __device__ T operator()(size_t i) const { return hostAdd(x[i], widenValue<T>(y[i])); }
};

// Where a gather's seed comes from. HostSeed: the call's argument, always
// gathering. DeviceSeed: words an earlier kernel on the stream wrote (the
// step's seed, and whether the step estimates at all): the launch is the
// same every step, so a captured graph replays it.
struct SampleGate {
  uint64_t seed;
  int32_t active;  // 0: gather nothing (no estimate due, or the comm has failed)
};
struct HostSeed {
  uint64_t seed;
  __device__ bool active() const { return true; }
  __device__ uint64_t value() const { return seed; }
};
struct DeviceSeed {
  const SampleGate* gate;
  __device__ bool active() const { return gate->active != 0; }
  __device__ uint64_t value() const { return gate->seed; }
};

template <typename At, typename K, typename Seed>
__global__ void gatherAll(At at, size_t n, Seed seed, K* __restrict__ keys) {
  if (!seed.active()) return;
  DCT_GRID_STRIDE(i, n) keys[i] = rowKey(at(i));
}

// Draw i of the splitmix64 stream seeded by `seed` picks position
// samplePosition(draw, n), exactly as the CPU twin's sequential loop does.
template <typename At, typename K, typename Seed>
__global__ void gatherSample(At at, size_t n, size_t m, Seed seed, K* __restrict__ keys) {
  if (!seed.active()) return;
  const uint64_t s = seed.value();
  DCT_GRID_STRIDE(i, m) keys[i] = rowKey(at(samplePositionAt(splitmix64At(s, i), n)));
}

constexpr size_t alignUp256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The k-th largest key of m gathered keys: sample size and k (the CPU
// twin's formulas) and its device memory: the keys, then the block select's
// result word, or a second key buffer and CUB's temp for the sort.
struct KthLayout {
  size_t m = 0, k = 0;
  bool block = false;    // m <= kBlockKthMax: the block select
  size_t keyBytes = 0;   // each key buffer (256-aligned)
  size_t tempBytes = 0;  // the sort's, or the select's result
  size_t total() const { return (block ? 1 : 2) * keyBytes + tempBytes; }
};

template <typename T>
int kthEndBit() {
  return static_cast<int>(sizeof(KeyOf<T>) * 8 - 1);  // the sign bit is always clear
}

// n >= 1. Queries CUB for its temp size (host only, nothing queued).
template <typename T>
cudaError_t kthLayout(size_t n, double density, dctThresholdMethod_t method, KthLayout* l) {
  using K = KeyOf<T>;
  l->m = method == dctThresholdExact ? n : thresholdSampleSize(n, density);
  l->k = thresholdK(l->m, density);
  l->block = l->m <= kBlockKthMax;
  l->keyBytes = alignUp256(l->m * sizeof(K));
  if (l->block) {
    l->tempBytes = alignUp256(sizeof(K));
    return cudaSuccess;
  }
  cub::DoubleBuffer<K> keys(nullptr, nullptr);
  const uint64_t items = l->m;  // one (64-bit offset) instantiation per key type
  size_t bytes = 0;
  const cudaError_t err = cub::DeviceRadixSort::SortKeysDescending(nullptr, bytes, keys, items, 0, kthEndBit<T>());
  l->tempBytes = alignUp256(bytes);
  return err;
}

// Gathers the keys of `at` (n values) into `memory` (l.total() bytes) and
// finds the k-th largest, on s; *kth: where it lands. Every argument of
// every launch depends only on (l, memory, at, n, seed), so repeated calls
// with the same ones queue identical work.
template <typename T, typename At, typename Seed>
dctResult_t gatherKth(const KthLayout& l, void* memory, At at, size_t n, Seed seed, cudaStream_t s,
                      const KeyOf<T>** kth) {
  using K = KeyOf<T>;
  char* base = static_cast<char*>(memory);
  K* gathered = reinterpret_cast<K*>(base);
  if (l.m == n) gatherAll<<<gridFor(l.m), kThreads, 0, s>>>(at, l.m, seed, gathered);
  else gatherSample<<<gridFor(l.m), kThreads, 0, s>>>(at, n, l.m, seed, gathered);
  CUDACHECK_LAUNCH();
  if (l.block) {
    K* out = reinterpret_cast<K*>(base + l.keyBytes);
    blockKthKernel<<<1, kKthThreads, 0, s>>>(gathered, static_cast<uint32_t>(l.m), static_cast<uint32_t>(l.k),
                                             seed, out);
    CUDACHECK_LAUNCH();
    *kth = out;
    return dctSuccess;
  }
  cub::DoubleBuffer<K> keys(gathered, reinterpret_cast<K*>(base + l.keyBytes));
  const uint64_t items = l.m;
  size_t bytes = l.tempBytes;
  CUDACHECK(cub::DeviceRadixSort::SortKeysDescending(base + 2 * l.keyBytes, bytes, keys, items, 0, kthEndBit<T>(),
                                                     s));
  *kth = keys.Current() + (l.k - 1);
  return dctSuccess;
}

// fn.template operator()<T>(at) for the value source of a threshold: x
// alone (any value type), or an accumulator x + y (x float or double, y
// any): dctInvalidArgument for any other accumulator.
template <typename Fn>
dctResult_t dispatchSource(const void* x, dctDataType_t xType, const void* y, dctDataType_t yType, Fn&& fn) {
  if (y == nullptr)
    return dispatchAnyValue(xType, [&]<typename T>() { return fn.template operator()<T>(Plain<T>{static_cast<const T*>(x)}); });
  const dctResult_t res = dispatchValue(xType, [&]<typename T>() {
    return dispatchAnyValue(yType, [&]<typename B>() {
      return fn.template operator()<T>(Accumulated<T, B>{static_cast<const T*>(x), static_cast<const B*>(y)});
    });
  });
  return res == dctNotSupported ? dctInvalidArgument : res;  // an accumulator is float or double
}

}  // namespace dct::gpu
