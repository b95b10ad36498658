// CUDA twin of the threshold estimators, for every value type: the k-th
// largest |x| (NaN as +Inf) of the same deterministic PRNG sample as the CPU
// twin (sampled), or of all of x (exact), x optionally an accumulator read as
// residual + grad; or MSTopK bisection (bisect).
//
//   entry    threshold: n == 0, type dispatch, the positive floor
//   sampled / exact
//            kthLargest: sample size and k (the CPU twin's formulas), scratch,
//            the k-th largest magnitude key (a block radix select for a
//            sample, CUB radix sort past that; row_keys.h: the bits
//            of |x| below the always-clear sign bit, NaN as +Inf; 16-bit keys
//            for fp16/bf16), the k-th key back to the host
//   bisect   bisect: statsKernel (+ foldKernel levels) -> MagnitudeStats, then
//            the shared host driver (threshold_bisect.h) with countKernel as
//            its counting pass, one count read back per pass
//
// Keys order exactly like magnitudes, and the k-th largest is a value, not a
// position, so sampled / exact equal the CPU twin's nth_element bit for bit.
// Bisect equals the CPU twin bit for bit too: its statistics are integers
// (order-free atomics) plus the fixed-order sum of threshold_bisect.h, which
// statsKernel forms with one block per chunk in the CPU twin's order; the
// driver then runs the same host code on the same numbers, and every count
// is an exact integer.
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "cuda_sample.cuh"

namespace dct::gpu {
namespace {

template <typename T, typename At>
dctResult_t kthLargest(CudaContext* c, const ThresholdArgs& a, At at, cudaStream_t s, double* out) {
  using K = KeyOf<T>;
  KthLayout l;
  CUDACHECK(kthLayout<T>(a.n, a.density, a.method, &l));
  DCTCHECK(c->scratch.reserve(l.total()));
  const K* kth = nullptr;
  DCTCHECK((gatherKth<T>(l, c->scratch.ptr, at, a.n, HostSeed{a.seed}, s, &kth)));
  K bits = 0;
  CUDACHECK(cudaMemcpyAsync(&c->host->kth, kth, sizeof(K), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  std::memcpy(&bits, &c->host->kth, sizeof(K));
  *out = keyValue<T>(bits);
  return dctSuccess;
}

// --- bisect ----------------------------------------------------------------

static_assert(kSumLanes == kThreads, "one thread per lane of the fixed-order sum");

// Device words of the statistics pass and of each count.
struct BisectWords {
  unsigned long long nonFinite, nonzero, maxKey, minKey, count;
};

// The lane fold of threshold_bisect.h's chunkSum over the block's lanes
// (lane = threadIdx.x); the chunk's sum in lane[0]. Every thread calls it.
__device__ __forceinline__ void foldLanes(double mine, double* lane) {
  lane[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned s = kSumLanes / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) lane[threadIdx.x] = __dadd_rn(lane[threadIdx.x], lane[threadIdx.x + s]);
    __syncthreads();
  }
}

// Level 0: one chunk of kSumChunk values per block iteration. Lane l adds
// values l, l + 256, ... of its chunk, as the CPU twin's chunkSum does, and
// every thread gathers the order-free integer statistics on the way.
template <typename T>
__global__ void statsKernel(const T* __restrict__ x, size_t n, size_t chunks, double* __restrict__ partials,
                            BisectWords* words) {
  using K = KeyOf<T>;
  constexpr K kInf = kInfKey<T>;
  __shared__ double lane[kSumLanes];
  unsigned long long nonFinite = 0, nonzero = 0, maxKey = 0, minKey = ~0ull;
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const size_t base = c * kSumChunk + threadIdx.x;
    double sum = 0.0;
    for (size_t j = 0; j < kSumPerLane; j++) {
      const size_t i = base + j * kSumLanes;
      if (i >= n) break;
      const K key = rowKey(x[i]);
      const bool finite = key != kInf;
      nonFinite += !finite;
      nonzero += finite && key != 0;
      if (finite && key > maxKey) maxKey = key;
      if (finite && key != 0 && key < minKey) minKey = key;
      sum = __dadd_rn(sum, finite ? keyValue<T>(key) : 0.0);
    }
    foldLanes(sum, lane);
    if (threadIdx.x == 0) partials[c] = lane[0];
    __syncthreads();  // lane[0] read before the next chunk writes it
  }
  addBlockCount(nonFinite, &words->nonFinite);
  addBlockCount(nonzero, &words->nonzero);
  using Reduce = cub::BlockReduce<unsigned long long, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const unsigned long long blockMax = Reduce(storage).Reduce(maxKey, ::cuda::maximum<>{});
  __syncthreads();
  const unsigned long long blockMin = Reduce(storage).Reduce(minKey, ::cuda::minimum<>{});
  if (threadIdx.x == 0) {
    atomicMax(&words->maxKey, blockMax);
    atomicMin(&words->minKey, blockMin);
  }
}

// A level above: the chunk sums of `in` (m values) into `out`.
__global__ void foldKernel(const double* __restrict__ in, size_t m, double* __restrict__ out) {
  __shared__ double lane[kSumLanes];
  const size_t chunks = sumChunks(m);
  for (size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const size_t base = c * kSumChunk + threadIdx.x;
    double sum = 0.0;
    for (size_t j = 0; j < kSumPerLane && base + j * kSumLanes < m; j++) sum = __dadd_rn(sum, in[base + j * kSumLanes]);
    foldLanes(sum, lane);
    if (threadIdx.x == 0) out[c] = lane[0];
    __syncthreads();
  }
}

// One counting pass: entries whose magnitude key is >= key (!(|x| < tau)
// for tau = the key's value; NaN and +-Inf have kInfKey, above every probe).
template <typename T, typename K = KeyOf<T>>
__global__ void countKernel(const T* __restrict__ x, size_t n, K key, unsigned long long* count) {
  unsigned long long mine = 0;
  DCT_GRID_STRIDE(i, n) mine += rowKey(x[i]) >= key;
  addBlockCount(mine, count);
}

unsigned blocksFor(size_t chunks) { return static_cast<unsigned>(chunks < kMaxBlocks ? chunks : kMaxBlocks); }

template <typename T>
dctResult_t bisect(CudaContext* c, ThresholdArgs& a, cudaStream_t s, double* out) {
  using K = KeyOf<T>;
  const T* x = static_cast<const T*>(a.data);
  const size_t chunks = sumChunks(a.n), upper = sumChunks(chunks);
  const size_t wordsBytes = alignUp256(sizeof(BisectWords)), levelBytes = alignUp256(chunks * sizeof(double));
  DCTCHECK(c->scratch.reserve(wordsBytes + levelBytes + alignUp256(upper * sizeof(double))));
  BisectWords* words = c->scratch.as<BisectWords>();
  double* level = c->scratch.as<double>(wordsBytes);
  double* next = c->scratch.as<double>(wordsBytes + levelBytes);

  CUDACHECK(cudaMemsetAsync(words, 0, sizeof(BisectWords), s));
  CUDACHECK(cudaMemsetAsync(&words->minKey, 0xff, sizeof(words->minKey), s));
  statsKernel<T><<<blocksFor(chunks), kThreads, 0, s>>>(x, a.n, chunks, level, words);
  CUDACHECK_LAUNCH();
  size_t m = chunks;
  while (m > kSumChunk) {  // levels on the device while more than one chunk remains
    foldKernel<<<blocksFor(sumChunks(m)), kThreads, 0, s>>>(level, m, next);
    CUDACHECK_LAUNCH();
    std::swap(level, next);
    m = sumChunks(m);
  }
  BisectWords host{};
  std::vector<double> partials(m);
  CUDACHECK(cudaMemcpyAsync(&host, words, sizeof(host), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaMemcpyAsync(partials.data(), level, m * sizeof(double), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  MagnitudeStats stats;
  stats.nonFinite = host.nonFinite;
  stats.nonzero = host.nonzero;
  stats.maxKey = host.maxKey;
  stats.minKey = host.minKey;
  stats.sum = foldSums(partials.data(), m);

  dctResult_t err = dctSuccess;
  const auto count = [&](K key) -> uint64_t {
    if (err != dctSuccess) return 0;
    err = [&]() -> dctResult_t {
      CUDACHECK(cudaMemsetAsync(&words->count, 0, sizeof(words->count), s));
      countKernel<T><<<gridFor(a.n), kThreads, 0, s>>>(x, a.n, key, &words->count);
      CUDACHECK_LAUNCH();
      // The pinned word of the k-th key doubles as this count's landing place.
      CUDACHECK(cudaMemcpyAsync(&c->host->kth, &words->count, sizeof(uint64_t), cudaMemcpyDeviceToHost, s));
      CUDACHECK(cudaStreamSynchronize(s));
      return dctSuccess;
    }();
    return err == dctSuccess ? c->host->kth : 0;
  };
  const int budget = a.maxPasses > 0 ? a.maxPasses : kBisectMaxPasses;
  const BisectResult r = bisectThreshold<T>(stats, a.n, a.density, budget, count);
  DCTCHECK(err);
  a.passes = r.passes;
  *out = r.tau;
  return dctSuccess;
}

}  // namespace

dctResult_t threshold(KernelContext* ctx, ThresholdArgs* args, double* tau, void* stream) {
  args->passes = 0;
  if (args->n == 0) {
    *tau = std::numeric_limits<double>::infinity();
    return dctSuccess;
  }
  double t = 0;
  const cudaStream_t s = cudaStreamOf(stream);
  dctResult_t res = dctSuccess;
  if (args->method == dctThresholdBisect) {
    if (args->addend != nullptr) return dctInvalidArgument;
    res = dispatchAnyValue(args->dtype, [&]<typename T>() { return bisect<T>(cudaCtx(ctx), *args, s, &t); });
  } else {
    res = dispatchSource(args->data, args->dtype, args->addend, args->addendT(), [&]<typename T>(auto at) {
      return kthLargest<T>(cudaCtx(ctx), *args, at, s, &t);
    });
  }
  // tau must stay positive, or exact zeros would be "selected" and sent.
  const double smallest = args->dtype == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                                    : std::numeric_limits<float>::denorm_min();
  *tau = t > smallest ? t : smallest;
  return res;
}

}  // namespace dct::gpu
