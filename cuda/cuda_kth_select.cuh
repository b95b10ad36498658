// The k-th largest of m magnitude keys in one block: a radix select, most
// significant byte first, over keys that stay in L2. It replaces the
// device-wide radix sort where a sample is small (a sort's half dozen
// launches cost tens of microseconds at any size, the select one launch),
// and gives the same key: a value, not a position.
#pragma once

#include <cub/block/block_scan.cuh>

#include "cuda_device.cuh"

namespace dct::gpu {

constexpr int kKthThreads = 1024;
// Samples up to this many keys run the block select; larger ones (the exact
// method on a large tensor) the device-wide sort.
constexpr size_t kBlockKthMax = size_t(1) << 16;

// *out = the k-th largest of keys[0, m), 1 <= k <= m <= kBlockKthMax. Each
// pass counts the digits of the keys that match the digits chosen so far,
// then picks the digit holding the k-th largest (a scan from the top digit
// down) and ranks within it. Nothing when the seed is inactive (no estimate
// due), so a captured step can launch it every time.
template <typename K, typename Seed>
__global__ void __launch_bounds__(kKthThreads)
    blockKthKernel(const K* __restrict__ keys, uint32_t m, uint32_t k, Seed seed, K* __restrict__ out) {
  if (!seed.active()) return;
  using Scan = cub::BlockScan<uint32_t, kKthThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t hist[256];
  __shared__ uint32_t chosen[2];  // digit, rank within it
  const unsigned lane = threadIdx.x % 32;
  K prefix = 0, mask = 0;
  uint32_t rank = k;
  for (int shift = int(sizeof(K) * 8) - 8; shift >= 0; shift -= 8) {
    if (threadIdx.x < 256) hist[threadIdx.x] = 0;
    __syncthreads();
    // Warp-uniform loop: the lanes of a warp that hold the same digit add
    // their count once (a byte of magnitudes is crowded: few exponents).
    for (uint32_t base = threadIdx.x - lane; base < m; base += kKthThreads) {
      const uint32_t i = base + lane;
      uint32_t digit = 256;  // none
      if (i < m) {
        const K key = keys[i];
        if ((key & mask) == prefix) digit = (key >> shift) & 0xffu;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, digit);
      if (digit < 256 && lane == unsigned(__ffs(peers) - 1)) atomicAdd(&hist[digit], unsigned(__popc(peers)));
    }
    __syncthreads();
    // Thread t holds digit 255 - t: the exclusive sum counts the keys above it.
    const uint32_t mine = threadIdx.x < 256 ? hist[255 - threadIdx.x] : 0;
    uint32_t above = 0;
    Scan(scan).ExclusiveSum(mine, above);
    if (mine > 0 && above < rank && rank <= above + mine) {
      chosen[0] = 255 - threadIdx.x;
      chosen[1] = rank - above;
    }
    __syncthreads();
    prefix = K(prefix | (K(chosen[0]) << shift));
    mask = K(mask | (K(0xffu) << shift));
    rank = chosen[1];
    __syncthreads();  // chosen and hist are rewritten by the next pass
  }
  if (threadIdx.x == 0) *out = prefix;
}

}  // namespace dct::gpu
