// CUDA twin of the 1-bit kernels (src/kernels/onebit_kernels.h), bit for
// bit equal to the CPU twin (src/kernels/cpu_onebit.cc):
//
//   entry     onebitCompress / onebitDecode: type dispatch
//   compress  compressGroups: one warp per group of 32 sign words (1024
//             elements): lane l holds element 32w + l of word w (the
//             tensor plus the error, or a server's mean over the ranks'
//             slots plus its error), so loads are coalesced, the sign word
//             is one __ballot_sync into its slot and the word's sum of
//             squares the halving tree as a shuffle-down reduction; lane k
//             keeps word k's sum and the same tree gives the group's
//             partial. reduceLevel repeats the tree over 32 partials at a
//             time until one is left, which the host reads back to form the
//             scale (onebitScale, shared); feedback then writes the scale
//             into the slots and updates the error (unless keepX: the
//             error is then formed by the next compression, pending).
//   decode:   a grid-stride element kernel over the shared rule of
//             onebit_math.h.
//   segments  (dctCompressorSetSegments) one after another on the stream,
//             as the CPU twin runs them: compressGroups over the groups a
//             segment meets (lanes outside it count +0 and leave the
//             other segments' bits of a shared word as they are), its
//             partials reduced as a range of the whole tree's (rangeLevel)
//             into one sum per segment; the sums come back in one copy,
//             the host forms the scales and writes every slot's scale
//             entries in one 2D copy; the decode runs piece by piece.
//
// CUB's reductions are not used for the sum of squares: their order is an
// implementation detail, and the twins must add in one specified order.
// Adds and squares use __dadd_rn/__dmul_rn so nothing is fused into an FMA.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cuda_device.cuh"
#include "cuda_stream.cuh"
#include "kernels/onebit_math.h"

namespace dct::gpu {
namespace {

constexpr unsigned kFullWarp = 0xffffffffu;

// Lane 0 gets the halving tree of the 32 lanes' values (onebitTree32): at
// step s lane i adds lane i + s, exactly t[i] = t[i] + t[i + s].
__device__ __forceinline__ double warpTree32(double v) {
  for (int s = 16; s > 0; s >>= 1) v = __dadd_rn(v, __shfl_down_sync(kFullWarp, v, s));
  return v;
}

__device__ __forceinline__ size_t warpIndex() { return (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; }
__device__ __forceinline__ size_t warpCount() { return static_cast<size_t>(gridDim.x) * blockDim.x / 32; }

// Where sign word w goes: its chunk's slot, after its scale entries
// (onebit_kernels.h).
template <typename A>
__device__ __forceinline__ uint32_t* signWord(unsigned char* slots, size_t slotBytes, size_t chunkWords, size_t w,
                                              size_t scales) {
  const size_t q = w / chunkWords;
  return reinterpret_cast<uint32_t*>(slots + q * slotBytes + scales * sizeof(A)) + (w - q * chunkWords);
}

// Segment [lo, hi) of n elements (the whole vector: 0, n), its groups
// from the one holding element lo; errIn and errOut may alias: each
// element is read before it is written, by the same thread. ranks > 0: x
// is the mean over `mean`'s slots (scale entry meanEntry) + the error;
// pending: errIn holds a kept x sent with scale p (onebitErrorIn). A word
// the segment shares keeps the others' bits; bits past n are cleared.
// partials[g - first group] gets group g's sum.
template <typename T, typename A>
__device__ __forceinline__ void compressBody(const T* in, const A* errIn, bool pending, A p, A* errOut, size_t n,
                                             size_t lo, size_t hi, OnebitSlotsOf<A> mean, size_t meanEntry, int ranks,
                                             unsigned char* __restrict__ slots, size_t slotBytes, size_t chunkWords,
                                             double* __restrict__ partials) {
  const unsigned lane = threadIdx.x & 31u;
  if (hi <= lo) return;
  const size_t wf = lo / 32, we = onebitWords(hi), gf = wf / 32, groups = (we + 31) / 32 - gf;
  for (size_t gi = warpIndex(); gi < groups; gi += warpCount()) {  // uniform per warp
    const size_t g = gf + gi;
    double mine = 0.0;  // lane k: word 32g + k's sum
    for (unsigned k = 0; k < 32; k++) {
      const size_t w = g * 32 + k;
      if (w >= we) break;
      if (w < wf) continue;
      const size_t i = w * 32 + lane;
      const bool valid = i >= lo && i < hi;
      A x = A(0);
      if (valid) {
        const A e = onebitErrorIn(errIn, i, pending, p);
        x = ranks > 0 ? onebitMean(mean, ranks, i, meanEntry) + e : onebitInput(in, e, i);
        errOut[i] = x;
      }
      const uint32_t bits = __ballot_sync(kFullWarp, valid && onebitBit(x));
      const uint32_t mask = __ballot_sync(kFullWarp, valid || (hi == n && i >= n));
      if (lane == 0) {
        uint32_t* word = signWord<A>(slots, slotBytes, chunkWords, w, mean.scales);
        *word = mask == kFullWarp ? bits : (*word & ~mask) | bits;
      }
      const double sum = __shfl_sync(kFullWarp, warpTree32(valid ? onebitSquare(x) : 0.0), 0);
      if (lane == k) mine = sum;
    }
    const double group = warpTree32(mine);
    if (lane == 0) partials[gi] = group;
  }
}

template <typename T, typename A>
__global__ void compressGroups(const T* in, const A* errIn, bool pending, A p, A* errOut, size_t n, size_t lo,
                               size_t hi, OnebitSlotsOf<A> mean, size_t meanEntry, int ranks,
                               unsigned char* __restrict__ slots, size_t slotBytes, size_t chunkWords,
                               double* __restrict__ partials) {
  compressBody<T, A>(in, errIn, pending, p, errOut, n, lo, hi, mean, meanEntry, ranks, slots, slotBytes, chunkWords,
                     partials);
}

// The queued step's compression (onebit_step_args.h): which error buffer is
// committed, and the scale its kept x left with, read from the state.
template <typename T, typename A>
__global__ void compressFromState(const T* in, const StreamState* state, bool server, A* e0, A* e1, size_t n,
                                  OnebitSlotsOf<A> mean, int ranks, unsigned char* __restrict__ slots,
                                  size_t slotBytes, size_t chunkWords, double* __restrict__ partials) {
  const int which = server ? state->serverCommitted : state->committed;
  const bool pending = (server ? state->serverPending : state->pending) != 0;
  const A p = static_cast<A>(server ? state->serverPendingScale : state->pendingScale);
  compressBody<T, A>(in, which ? e1 : e0, pending, p, which ? e0 : e1, n, 0, n, mean, 0, ranks, slots, slotBytes,
                     chunkWords, partials);
}

// One level: out[g] = tree of in[32g .. 32g + 31] (zeros past count).
__global__ void reduceLevel(const double* __restrict__ in, size_t count, double* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t groups = (count + 31) / 32;
  for (size_t g = warpIndex(); g < groups; g += warpCount()) {
    const size_t i = g * 32 + lane;
    const double v = warpTree32(i < count ? in[i] : 0.0);
    if (lane == 0) out[g] = v;
  }
}

// A range [lo, hi) of one level's entries (stored from in[0]; the others
// +0) to the next level's: out[g - lo / 32] = tree of in[32g ..], as the
// CPU twin's reduceLevels.
__global__ void rangeLevel(const double* __restrict__ in, size_t lo, size_t hi, double* __restrict__ out) {
  const unsigned lane = threadIdx.x & 31u;
  const size_t nlo = lo / 32, nhi = (hi - 1) / 32 + 1;
  for (size_t g = nlo + warpIndex(); g < nhi; g += warpCount()) {
    const size_t at = g * 32 + lane;
    const double v = warpTree32(at >= lo && at < hi ? in[at - lo] : 0.0);
    if (lane == 0) out[g - nlo] = v;
  }
}

__global__ void copyOne(const double* from, double* to) { *to = *from; }

// Elements [lo, hi): the error x leaves with scale (x itself for a NaN one).
template <typename A>
__global__ void feedback(A* __restrict__ err, size_t lo, size_t hi, A scale) {
  DCT_GRID_STRIDE(k, hi - lo) err[lo + k] = onebitError(err[lo + k], scale);
}

// Elements [lo, hi), all of one piece (scale entry `entry` of its chunk's slot).
template <typename T, typename A>
__global__ void decodeKernel(OnebitSlotsOf<A> slots, size_t chunkWords, size_t lo, size_t hi, A factor,
                             bool nanFactor, size_t entry, T* __restrict__ out) {
  DCT_GRID_STRIDE(k, hi - lo) out[lo + k] = onebitDecoded<T>(slots, chunkWords, lo + k, factor, nanFactor, entry);
}

// Warps enough for `items` warp-sized work items.
unsigned gridForWarps(size_t items) { return gridFor(items * 32); }

// The level-1 partials in scratch reduced to one value, on the device
// (*sum: where it lands; null for no groups, a sum of 0).
dctResult_t reduceSum(double* scratch, size_t groups, cudaStream_t s, const double** sum) {
  *sum = nullptr;
  if (groups == 0) return dctSuccess;
  double* a = scratch;
  double* b = scratch + groups;  // room for ceil(groups / 32) (onebitScratchBytes)
  size_t count = groups;
  while (count > 1) {
    const size_t next = (count + 31) / 32;
    reduceLevel<<<gridForWarps(next), kThreads, 0, s>>>(a, count, b);
    CUDACHECK_LAUNCH();
    double* t = a;
    a = b;
    b = t;
    count = next;
  }
  *sum = a;
  return dctSuccess;
}

// Segment [lo, hi)'s level-1 partials (from scratch[0]) reduced as a range
// of the whole tree's, its sum into *sum (device).
dctResult_t rangeSum(double* scratch, size_t groups, size_t lo, size_t hi, double* sum, cudaStream_t s) {
  double* a = scratch;
  double* b = scratch + groups;  // room for ceil(groups / 32) + 2 (onebitScratchBytes)
  size_t gl = lo / 1024, gh = (onebitWords(hi) + 31) / 32;
  while (gh - gl > 1) {
    rangeLevel<<<gridForWarps((gh - 1) / 32 + 1 - gl / 32), kThreads, 0, s>>>(a, gl, gh, b);
    CUDACHECK_LAUNCH();
    std::swap(a, b);
    gh = (gh - 1) / 32 + 1;
    gl /= 32;
  }
  copyOne<<<1, 1, 0, s>>>(a, sum);
  CUDACHECK_LAUNCH();
  return dctSuccess;
}

// Segment s's scale into its entries of the first slotCount slots' scale
// areas (host, K entries each), as the CPU twin's placeScale.
template <typename A>
void placeScale(const OnebitCompressArgs& a, int s, int m, size_t lo, size_t hi, A scale, std::vector<A>& area) {
  const size_t cl = a.chunkWords * 32, K = a.scalesPerSlot;
  for (size_t q = lo / cl; q < static_cast<size_t>(a.slotCount) && q * cl < hi; q++)
    area[q * K + static_cast<size_t>(s - onebitSegmentAt(a.segments, m, q * cl))] = scale;
  if (s == m - 1)
    for (size_t q = (a.n + cl - 1) / cl; q < static_cast<size_t>(a.slotCount); q++) area[q * K] = scale;
}

template <typename T, typename A>
dctResult_t compressTyped(OnebitCompressArgs& a, cudaStream_t s) {
  const T* in = static_cast<const T*>(a.input);
  A* errOut = static_cast<A*>(a.errorOut);
  unsigned char* slots = static_cast<unsigned char*>(a.slots);
  const int m = a.segments ? a.segmentCount : 1;
  const size_t groups = (onebitWords(a.n) + 31) / 32, K = a.scalesPerSlot;
  double* sums = a.scratch + groups + (groups + 31) / 32 + 2;  // one per segment (onebitScratchBytes)
  const OnebitSlotsOf<A> mean{static_cast<const unsigned char*>(a.mean.slots), a.mean.slotBytes, K};
  for (int seg = 0; seg < m; seg++) {
    const size_t lo = a.segments ? a.segments[seg] : 0, hi = a.segments ? a.segments[seg + 1] : a.n;
    if (hi <= lo) continue;
    const double p = a.segments ? (a.pending ? a.pendingScales[seg] : 0.0) : a.pendingScale;
    const size_t segGroups = (onebitWords(hi) + 31) / 32 - lo / 1024;
    compressGroups<T, A><<<gridForWarps(segGroups), kThreads, 0, s>>>(
        in, static_cast<const A*>(a.errorIn), a.pending, static_cast<A>(p), errOut, a.n, lo, hi, mean,
        static_cast<size_t>(seg), a.mean.ranks, slots, a.slotBytes, a.chunkWords, a.scratch);
    CUDACHECK_LAUNCH();
    DCTCHECK(rangeSum(a.scratch, groups, lo, hi, sums + seg, s));
  }
  std::vector<double> sum(m, 0.0);
  if (a.n > 0) CUDACHECK(cudaMemcpyAsync(sum.data(), sums, m * sizeof(double), cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));
  std::vector<A> area(static_cast<size_t>(a.slotCount) * K, A(0));
  double total = 0.0, largest = 0.0;
  bool nan = false;
  for (int seg = 0; seg < m; seg++) {
    const size_t lo = a.segments ? a.segments[seg] : 0, hi = a.segments ? a.segments[seg + 1] : a.n;
    const double scale = onebitScale(sum[seg], hi - lo, Value<A>::type);
    placeScale<A>(a, seg, m, lo, hi, static_cast<A>(scale), area);
    // A NaN scale leaves x (the step is never committed), as keepX does.
    if (!std::isnan(scale) && !a.keepX && hi > lo) {
      feedback<A><<<gridFor(hi - lo), kThreads, 0, s>>>(errOut, lo, hi, static_cast<A>(scale));
      CUDACHECK_LAUNCH();
    }
    if (a.segments) a.scaleValues[seg] = scale;
    total += sum[seg];
    nan = nan || std::isnan(scale);
    largest = std::max(largest, scale);
  }
  a.sumOfSquares = total;
  a.scaleValue = nan ? std::numeric_limits<double>::quiet_NaN() : largest;
  if (a.slotCount > 0)  // the pageable source is staged before the call returns
    CUDACHECK(cudaMemcpy2DAsync(slots, a.slotBytes, area.data(), K * sizeof(A), K * sizeof(A), a.slotCount,
                                cudaMemcpyHostToDevice, s));
  return dctSuccess;
}

}  // namespace

dctResult_t onebitCompress(KernelContext*, OnebitCompressArgs* args, void* stream) {
  if (args->chunkWords == 0 || (args->mean.ranks > 0 && args->input)) return dctInternalError;
  return dispatchAnyValue(args->dtype, [&]<typename T>() -> dctResult_t {
    return compressTyped<T, typename Value<T>::Acc>(*args, cudaStreamOf(stream));
  });
}

dctResult_t onebitDecode(KernelContext*, const OnebitDecodeArgs* args, void* stream) {
  const OnebitDecodeArgs& a = *args;
  if (a.chunkWords == 0) return dctInternalError;
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    using A = typename Value<T>::Acc;
    if (a.n == 0) return dctSuccess;
    const bool nanFactor = std::isnan(a.factor);
    const A factor = static_cast<A>(nanFactor ? 1.0 : a.factor);
    const OnebitSlotsOf<A> slots{static_cast<const unsigned char*>(a.slots), a.slotBytes, a.scalesPerSlot};
    const cudaStream_t s = cudaStreamOf(stream);
    T* out = static_cast<T*>(a.out);
    if (a.segments == nullptr) {  // one scale per chunk: one launch
      decodeKernel<T, A><<<gridFor(a.n), kThreads, 0, s>>>(slots, a.chunkWords, 0, a.n, factor, nanFactor, 0, out);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    }
    const size_t cl = 32 * a.chunkWords;
    for (size_t cb = 0; cb < a.n; cb += cl) {  // piece by piece, chunk by chunk
      const size_t ce = std::min(a.n, cb + cl);
      const int first = onebitSegmentAt(a.segments, a.segmentCount, cb);
      for (int seg = first; seg < a.segmentCount && a.segments[seg] < ce; seg++) {
        const size_t lo = std::max(a.segments[seg], cb), hi = std::min(a.segments[seg + 1], ce);
        decodeKernel<T, A><<<gridFor(hi - lo), kThreads, 0, s>>>(slots, a.chunkWords, lo, hi, factor, nanFactor,
                                                                  static_cast<size_t>(seg - first), out);
        CUDACHECK_LAUNCH();
      }
    }
    return dctSuccess;
  });
}

}  // namespace dct::gpu

// --- the queued step's ops (onebit_step_args.h) ---------------------------

namespace dct::gpu {
namespace {

// onebitScale (onebit_kernels.h) on the device, the same bits: correctly
// rounded division and square root, one rounding to A, the canonical NaN.
template <typename A>
__device__ double scaleOf(double sumOfSquares, size_t len) {
  if (len == 0) return 0.0;
  double s = __dsqrt_rn(__ddiv_rn(sumOfSquares, static_cast<double>(len)));
  if (sizeof(A) == 4) s = static_cast<double>(__double2float_rn(s));
  return isfinite(s) ? s : onebitNaN<double>();
}

// The scale into the draft, the scale and the call's digest into the first
// slotCount slots.
template <typename A>
__global__ void stepScaleKernel(const double* sum, size_t len, unsigned char* slots, size_t slotBytes, int slotCount,
                                double* draft, uint64_t digest) {
  const double scale = scaleOf<A>(sum ? *sum : 0.0, len);
  *draft = scale;
  // A NaN scale as the host's conversion writes it (the CPU twin's bits).
  const A stored = isnan(scale) ? onebitNaN<A>() : static_cast<A>(scale);
  for (int q = 0; q < slotCount; q++) {
    *reinterpret_cast<A*>(slots + q * slotBytes) = stored;
    *onebitDigestAt(slots, slotBytes, static_cast<size_t>(q)) = digest;
  }
}

// The verdict's start (the sticky error: a halted rank votes it; a slot
// with another digest: the ranks' calls differ) and whether some gathered
// server scale is not finite.
template <typename A>
__global__ void checkKernel(const int32_t* failed, StreamState* state, const unsigned char* received,
                            const unsigned char* gathered, size_t slotBytes, int ranks, uint64_t digest) {
  state->vote = readFailed(failed);
  const bool same = onebitDigestsMatch(received, slotBytes, ranks, digest) &&
                    onebitDigestsMatch(gathered, slotBytes, ranks, digest);
  if (state->vote == 0 && !same) state->vote = dctInvalidUsage;
  int32_t nonFinite = 0;
  for (int j = 0; j < ranks; j++)
    if (!isfinite(static_cast<double>(*reinterpret_cast<const A*>(gathered + j * slotBytes)))) nonFinite = 1;
  state->draftNonFinite = nonFinite;
}

template <typename T, typename A>
__global__ void decodeStepKernel(const StreamState* state, OnebitSlotsOf<A> slots, size_t chunkWords, size_t n,
                                 A factor, T* __restrict__ out) {
  if (!state->lastOk) return;
  const bool nanFactor = state->draftNonFinite != 0;
  DCT_GRID_STRIDE(i, n) out[i] = onebitDecoded<T>(slots, chunkWords, i, nanFactor ? A(1) : factor, nanFactor);  // one segment
}

}  // namespace

dctResult_t onebitStepCompress(KernelContext*, const OnebitStepArgs* args, int server, void* stream) {
  const OnebitStepArgs& a = *args;
  if (a.chunkWords == 0) return dctInternalError;
  const cudaStream_t s = cudaStreamOf(stream);
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    using A = typename Value<T>::Acc;
    const size_t n = server ? a.serverN : a.n, groups = (onebitWords(n) + 31) / 32;
    void* const* errors = server ? a.serverErrors : a.errors;
    unsigned char* slots = static_cast<unsigned char*>(server ? a.serverSlot : a.workerSlots);
    const OnebitSlotsOf<A> mean{static_cast<const unsigned char*>(a.receivedSlots), a.slotBytes};
    if (groups) {
      compressFromState<T, A><<<gridForWarps(groups), kThreads, 0, s>>>(
          server ? nullptr : static_cast<const T*>(a.input), a.state, server != 0, static_cast<A*>(errors[0]),
          static_cast<A*>(errors[1]), n, mean, server ? a.ranks : 0, slots, a.slotBytes, a.chunkWords, a.scratch);
      CUDACHECK_LAUNCH();
    }
    const double* sum = nullptr;
    DCTCHECK(reduceSum(a.scratch, groups, s, &sum));
    double* draft = server ? &a.state->draftServerScale : &a.state->draftTau;
    stepScaleKernel<A><<<1, 1, 0, s>>>(sum, n, slots, a.slotBytes, server ? 1 : a.ranks, draft, a.digest);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

dctResult_t onebitStepCheck(KernelContext*, const OnebitStepArgs* args, void* stream) {
  const OnebitStepArgs& a = *args;
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    checkKernel<typename Value<T>::Acc><<<1, 1, 0, cudaStreamOf(stream)>>>(
        a.failed, a.state, static_cast<const unsigned char*>(a.receivedSlots),
        static_cast<const unsigned char*>(a.gatheredSlots), a.slotBytes, a.ranks, a.digest);
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

dctResult_t onebitStepDecode(KernelContext*, const OnebitStepArgs* args, void* stream) {
  const OnebitStepArgs& a = *args;
  if (a.chunkWords == 0) return dctInternalError;
  return dispatchAnyValue(a.dtype, [&]<typename T>() -> dctResult_t {
    using A = typename Value<T>::Acc;
    if (a.n == 0) return dctSuccess;
    const OnebitSlotsOf<A> slots{static_cast<const unsigned char*>(a.gatheredSlots), a.slotBytes};
    decodeStepKernel<T, A><<<gridFor(a.n), kThreads, 0, cudaStreamOf(stream)>>>(
        a.state, slots, a.chunkWords, a.n, static_cast<A>(a.factor), static_cast<T*>(a.result));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

}  // namespace dct::gpu
