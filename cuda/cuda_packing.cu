// CUDA twin of delta bit-packing (src/kernels/index_packing.h).
//
//   entry    packIndices / scatterAddPacked: type dispatch
//   dispatch packList: measure, cub::DeviceScan of the word counts, encode,
//            the total word count back to the host (the caller sizes its
//            exchange with it)
//   kernels  one warp per group: measure, encode, validate, scatter (lanes
//            split the group's gaps, words and entries)
//
// A group is 128 entries, so a message of k entries is k / 128 groups: 5k
// groups at 64M and 1%, too few for a thread each on a GPU (the thread-per-
// group encode and scatter ran 67 and 139 us there on an H200, latency-bound
// in 21 blocks). Encode writes each data word whole from the gaps that meet
// it, and decode is a warp prefix sum of the gaps, so the bytes are the CPU
// twin's (encodeGroup / decodeGroup) and both twins accept and reject the
// same lists (validGroup), which the tests check byte for byte and list by
// list.
#include <cub/device/device_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>

#include "base/dtype.h"
#include "cuda_device.cuh"
#include "cuda_values.cuh"
#include "kernels/index_packing.h"

namespace dct::gpu {
namespace {

using packing::kPackGroup;
using packing::Layout;
using packing::Sections;

constexpr int kWarpsPerBlock = kThreads / kWarp;
constexpr unsigned kAllLanes = 0xffffffffu;
using WarpSum = cub::WarpScan<uint64_t>;

template <typename I>
__device__ uint64_t gapOf(const I* idx, size_t j) {  // gap j - 1: entries j - 1 and j
  return static_cast<uint64_t>(idx[j] - idx[j - 1] - 1);
}

// The group's width is the width of the OR of its gaps (packing::groupWidth).
template <typename I>
__global__ void measureGroups(const I* __restrict__ idx, size_t nnz, uint64_t base, Sections<I> s, size_t groups,
                              uint32_t* __restrict__ words) {
  using WarpOr = cub::WarpReduce<uint64_t>;
  __shared__ typename WarpOr::TempStorage temp[kWarpsPerBlock];
  const unsigned lane = threadIdx.x % kWarp;
  DCT_WARP_STRIDE(g, groups) {
    const I* first = idx + g * kPackGroup;
    const size_t count = packing::groupSize(nnz, g);
    uint64_t bits = 0;
    for (size_t j = 1 + lane; j < count; j += kWarp) bits |= gapOf(first, j);
    bits = WarpOr(temp[threadIdx.x / kWarp]).Reduce(bits, ::cuda::std::bit_or<>{});
    if (lane == 0) {
      const int width = packing::bitWidth(bits);
      s.bases[g] = static_cast<I>(first[0] - base);
      s.widths[g] = static_cast<uint8_t>(width);
      words[g] = static_cast<uint32_t>(packing::groupWords(count, width));
    }
  }
}

// Data word w of a group: the gaps whose bits [j width, (j + 1) width) meet
// bits [64 w, 64 w + 64), each shifted into place (packing::encodeGroup ORs
// the same pieces, gap by gap).
template <typename I>
__device__ uint64_t encodeWord(const I* idx, size_t count, int width, size_t w) {
  const size_t lo = 64 * w;
  uint64_t word = 0;
  for (size_t j = lo / width; j + 1 < count && j * width < lo + 64; j++) {
    const size_t bit = j * width;
    const uint64_t gap = gapOf(idx, j + 1);
    word |= bit >= lo ? gap << (bit - lo) : gap >> (lo - bit);
  }
  return word;
}

template <typename I>
__global__ void encodeGroups(const I* __restrict__ idx, size_t nnz, Sections<I> s, size_t groups) {
  const unsigned lane = threadIdx.x % kWarp;
  DCT_WARP_STRIDE(g, groups) {
    const size_t count = packing::groupSize(nnz, g);
    const int width = s.widths[g];
    uint64_t* out = s.data + s.offsets[g];
    for (size_t w = lane; w < packing::groupWords(count, width); w += kWarp)
      out[w] = encodeWord(idx + g * kPackGroup, count, width, w);
  }
}

// Decodes one group, lanes taking entries j = lane, lane + 32, ...: entry
// j's index is base plus the sum of (gap + 1) over the entries up to j
// (decodeGroup's recurrence, modulo 2^64), a warp prefix sum a round, the
// round's last index carried into the next. Calls visit(j, index, index of
// entry j - 1 (base for j = 0)) for each j < count and returns the last
// entry's index. The frame must be valid (packing::validFrame).
template <typename Visit>
__device__ uint64_t warpDecode(uint64_t base, const uint64_t* words, size_t wordCount, int width, size_t count,
                               typename WarpSum::TempStorage& temp, Visit&& visit) {
  const unsigned lane = threadIdx.x % kWarp;
  const uint64_t mask = packing::widthMask(width);
  uint64_t last = base;
  for (size_t round = 0; round < count; round += kWarp) {
    const size_t j = round + lane;
    uint64_t step = 0;
    if (j >= 1 && j < count) step = (width ? packing::gapAt(words, wordCount, j - 1, width, mask) : 0) + 1;
    uint64_t sum;
    WarpSum(temp).InclusiveSum(step, sum);
    const uint64_t index = last + sum;
    uint64_t previous = __shfl_up_sync(kAllLanes, index, 1);
    if (lane == 0) previous = last;
    if (j < count) visit(j, index, previous);
    last = __shfl_sync(kAllLanes, index, kWarp - 1);
  }
  return last;
}

// Counts the malformed groups: packing::validGroup's rule. An entry is valid
// when its index is below n and above the previous one (a gap that wraps
// past 2^64 lands below it); the group's last index must lie below the next
// group's first. Every thread reaches addBlockCount (it synchronizes the
// block).
template <typename I>
__global__ void validateGroups(Sections<I> s, size_t groups, size_t nnz, uint64_t n, size_t words,
                               unsigned long long* malformed) {
  __shared__ typename WarpSum::TempStorage temp[kWarpsPerBlock];
  unsigned long long bad = 0;
  DCT_WARP_STRIDE(g, groups) {
    bool ok = packing::validFrame(s, g, groups, nnz, words);  // warp-uniform
    if (ok) {
      bool mine = true;
      const uint64_t last = warpDecode(
          s.bases[g], s.data + s.offsets[g], s.offsets[g + 1] - s.offsets[g], s.widths[g],
          packing::groupSize(nnz, g), temp[threadIdx.x / kWarp],
          [&](size_t j, uint64_t index, uint64_t previous) { mine &= index < n && (j == 0 || index > previous); });
      const uint64_t lastIndex = static_cast<I>(last);  // decodeGroup visits indices as I
      ok = __all_sync(kAllLanes, mine) && (g + 1 == groups || lastIndex < static_cast<uint64_t>(s.bases[g + 1]));
    }
    bad += threadIdx.x % kWarp == 0 && !ok;
  }
  addBlockCount(bad, malformed);
}

// Runs only on a validated list: groups cover disjoint ascending ranges, so
// no two lanes share a target. Targets are still bounded by n.
template <typename D, typename V, typename I>
__global__ void scatterGroups(D* __restrict__ dense, uint64_t n, Sections<I> s, size_t groups,
                              size_t nnz, const V* __restrict__ values) {
  __shared__ typename WarpSum::TempStorage temp[kWarpsPerBlock];
  DCT_WARP_STRIDE(g, groups) {
    const V* val = values + g * kPackGroup;
    warpDecode(s.bases[g], s.data + s.offsets[g], s.offsets[g + 1] - s.offsets[g], s.widths[g],
               packing::groupSize(nnz, g), temp[threadIdx.x / kWarp],
               [&](size_t j, uint64_t index, uint64_t) {
                 const I i = static_cast<I>(index);  // as decodeGroup visits it
                 if (i < n) addInto(dense[i], val[j]);
               });
  }
}

// One thread per key: a binary search of the ascending list (the CPU twin's
// std::lower_bound), keys past the index type's range above every entry.
template <typename I>
__global__ void lowerBoundKeys(const I* __restrict__ idx, size_t nnz, const uint64_t* __restrict__ keys,
                               size_t count, uint64_t* __restrict__ positions) {
  DCT_GRID_STRIDE(j, count) {
    const uint64_t key = keys[j];
    size_t lo = 0, hi = nnz;
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (static_cast<uint64_t>(idx[mid]) < key) lo = mid + 1;
      else hi = mid;
    }
    positions[j] = lo;
  }
}

template <typename I>
dctResult_t packList(CudaContext* c, PackArgs& a, cudaStream_t st) {
  const Layout l(a.nnz, sizeof(I));
  Sections<I> s(a.out, l);
  const I* idx = static_cast<const I*>(a.indices);
  CUDACHECK(cudaMemsetAsync(a.out, 0, l.data, st));  // padding and offsets[0]
  DCTCHECK(c->scratch.reserve(l.groups * sizeof(uint32_t)));
  uint32_t* words = c->scratch.as<uint32_t>();
  measureGroups<I><<<gridFor(kWarp * l.groups), kThreads, 0, st>>>(idx, a.nnz, a.base, s, l.groups, words);
  CUDACHECK_LAUNCH();
  size_t bytes = 0;
  const int groups = static_cast<int>(l.groups);  // < 2^32 / 128 groups (fitsOffsets)
  CUDACHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, words, s.offsets + 1, groups, st));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceScan::InclusiveSum(c->temp.ptr, bytes, words, s.offsets + 1, groups, st));
  encodeGroups<I><<<gridFor(kWarp * l.groups), kThreads, 0, st>>>(idx, a.nnz, s, l.groups);
  CUDACHECK_LAUNCH();
  CUDACHECK(cudaMemcpyAsync(&c->host->packedWords, s.offsets + l.groups, sizeof(uint32_t),
                            cudaMemcpyDeviceToHost, st));
  CUDACHECK(cudaStreamSynchronize(st));  // scratch is free again; the size is known
  a.bytes = l.bytes(c->host->packedWords);
  return dctSuccess;
}

}  // namespace

dctResult_t packIndices(KernelContext* ctx, PackArgs* args, void* stream) {
  PackArgs& a = *args;
  a.bytes = 0;
  if (a.nnz == 0) return dctSuccess;
  if (!packing::fitsOffsets(a.nnz, a.indexBytes)) return dctNotSupported;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  return a.indexBytes == 8 ? packList<uint64_t>(c, a, s) : packList<uint32_t>(c, a, s);
}

// Keys up, one search per key, positions back: one synchronisation (the
// caller sizes its pieces with them).
dctResult_t lowerBounds(KernelContext* ctx, const BoundsArgs* args, void* stream) {
  const BoundsArgs& a = *args;
  if (a.count == 0) return dctSuccess;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t st = cudaStreamOf(stream);
  const size_t bytes = a.count * sizeof(uint64_t);
  DCTCHECK(c->scratch.reserve(2 * bytes));
  uint64_t* keys = c->scratch.as<uint64_t>();
  uint64_t* positions = c->scratch.as<uint64_t>(bytes);
  CUDACHECK(cudaMemcpyAsync(keys, a.keys, bytes, cudaMemcpyHostToDevice, st));
  if (a.indexBytes == 8)
    lowerBoundKeys<<<gridFor(a.count), kThreads, 0, st>>>(static_cast<const uint64_t*>(a.indices), a.nnz, keys,
                                                          a.count, positions);
  else
    lowerBoundKeys<<<gridFor(a.count), kThreads, 0, st>>>(static_cast<const uint32_t*>(a.indices), a.nnz, keys,
                                                          a.count, positions);
  CUDACHECK_LAUNCH();
  CUDACHECK(cudaMemcpyAsync(a.positions, positions, bytes, cudaMemcpyDeviceToHost, st));
  CUDACHECK(cudaStreamSynchronize(st));  // scratch is free again; the host has the positions
  return dctSuccess;
}

// Validates the whole list of a message on the device and reads the count
// of malformed groups back (one stream synchronisation).
template <typename I>
dctResult_t validateList(CudaContext* c, const void* indices, size_t packedBytes, size_t nnz, uint64_t n,
                         cudaStream_t st) {
  const Layout l(nnz, sizeof(I));
  if (nnz == 0) return dctSuccess;
  if (!packing::validSize(l, packedBytes)) return dctInternalError;
  Sections<I> s(const_cast<void*>(indices), l);
  const size_t words = (packedBytes - l.data) / 8;
  CUDACHECK(resetCounters(c, st));
  validateGroups<I><<<gridFor(kWarp * l.groups), kThreads, 0, st>>>(s, l.groups, nnz, n, words,
                                                             &c->device->malformed);
  CUDACHECK_LAUNCH();
  CUDACHECK(fetchCounters(c, st));
  return c->host->malformed != 0 ? dctInternalError : dctSuccess;
}

// Validates the whole list and scatters only a list with no malformed
// group: like the CPU twin, a malformed list writes nothing and returns
// dctInternalError. The round trip costs one stream synchronisation per
// message.
dctResult_t scatterAddPacked(KernelContext* ctx, const ScatterArgs* args, void* stream) {
  const ScatterArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t st = cudaStreamOf(stream);
  return dispatchScatter(a, [&]<typename D, typename V, typename I>() -> dctResult_t {
    if (a.nnz == 0) return dctSuccess;
    DCTCHECK(validateList<I>(c, a.indices, a.packedBytes, a.nnz, a.n, st));
    const Layout l(a.nnz, sizeof(I));
    Sections<I> s(const_cast<void*>(a.indices), l);
    scatterGroups<D, V, I><<<gridFor(kWarp * l.groups), kThreads, 0, st>>>(static_cast<D*>(a.dense), a.n, s,
                                                                    l.groups, a.nnz,
                                                                    static_cast<const V*>(a.values));
    CUDACHECK_LAUNCH();
    return dctSuccess;
  });
}

// The GPU has no cache to block for: zero the output, then scatter the
// messages in order (one kernel each; every message is validated first by
// scatterAddPacked, so a malformed one stops the merge there).
dctResult_t mergePacked(KernelContext* ctx, MergeArgs* args, void* stream) {
  MergeArgs& a = *args;
  a.malformed = -1;
  if (a.checkOnly) {
    CudaContext* c = cudaCtx(ctx);
    for (int r = 0; r < a.count; r++) {
      const PackedMessage& m = a.messages[r];
      const dctResult_t res = a.indexBytes == 8
                                  ? validateList<uint64_t>(c, m.indices, m.packedBytes, m.nnz, a.n, cudaStreamOf(stream))
                                  : validateList<uint32_t>(c, m.indices, m.packedBytes, m.nnz, a.n, cudaStreamOf(stream));
      if (res == dctInternalError) a.malformed = r;
      if (res != dctSuccess) return res;
    }
    return dctSuccess;
  }
  if (a.n) CUDACHECK(cudaMemsetAsync(a.dense, 0, a.n * dtypeSize(a.dtype), cudaStreamOf(stream)));
  for (int r = 0; r < a.count; r++) {
    const PackedMessage& m = a.messages[r];
    ScatterArgs add{a.dense, a.n, a.dtype, a.indexBytes, m.indices, m.values, m.nnz, true, m.packedBytes};
    add.valueType = a.valueType;
    const dctResult_t res = scatterAddPacked(ctx, &add, stream);
    if (res == dctInternalError) a.malformed = r;
    if (res != dctSuccess) return res;
  }
  return a.factor == 1.0 ? dctSuccess : scale(ctx, a.dense, a.n, a.dtype, a.factor, stream);
}

}  // namespace dct::gpu
