// CUDA twin of the DCT-MP row wire ops (RowOffsetsArgs, RowWireArgs).
//
//   rowOffsets  counts widened to uint64 (or the fixed count) through a
//               transform iterator, cub::DeviceScan::ExclusiveSum over
//               rowCount + 1 items (the last one 0, so offsets[rowCount] is
//               the total), the total back to the host
//   rowPack     masked rows up to kLaneWireMax entries: one thread per row
//               (cuda_rows_wire_tile.cuh); up to kWarpRowMax one warp per
//               row (cuda_rows_wire_warp.cuh); longer rows one block per row:
//               wire counts, bitmap bytes, and a block scan of the mask
//               bits placing each kept value (and index)
//   rowUnpack   decodeRows validates every wire mask into the internal
//               bitmap and counts malformed rows; the count comes back (one
//               stream synchronisation) and only then does expandRows write
//               the dense rows, zeros off the mask - so a malformed block
//               writes no row, as on the CPU twin (a thread per row up
//               to kLaneWireMax entries, cuda_rows_wire_tile.cuh; a warp per
//               row up to kWarpRowMax, as rowPack)
//
// A null mask (format -1) means whole rows: plain copies at the offsets.
// Wire layouts and the validation rules are the CPU twin's (cpu_rows.cc).
// Values in the rows' own type only move, so pack and unpack run on their
// bits: one instantiation per width (2, 4, 8 bytes) serves all four value
// types. A narrower wire type rounds in the pack and widens in the unpack
// (storeValue / loadValue: the CPU twin's bits, NaN signs included).
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "cuda_rows.cuh"
#include "cuda_rows_wire_tile.cuh"
#include "cuda_rows_wire_warp.cuh"
#include "cuda_values.cuh"

namespace dct::gpu {
namespace {

using rows::maskBit;
using rows::RowScan;
using rows::RowSum;

// fn.template operator()<T>() with T the unsigned integer as wide as dtype.
template <typename Fn>
dctResult_t dispatchBits(dctDataType_t dtype, Fn&& fn) {
  switch (dtype) {
    case dctFloat16:
    case dctBFloat16: return fn.template operator()<uint16_t>();
    case dctFloat32: return fn.template operator()<uint32_t>();
    case dctFloat64: return fn.template operator()<uint64_t>();
    default: return dctNotSupported;
  }
}

// fn.template operator()<T, W>() for rows of T whose values travel as W:
// bits of one width when W is T, else the value types (W no wider than T).
template <typename Fn>
dctResult_t dispatchRowWire(const RowWireArgs& a, Fn&& fn) {
  if (a.valueT() == a.dtype) return dispatchBits(a.dtype, [&]<typename T>() { return fn.template operator()<T, T>(); });
  return dispatchNarrowing(a.dtype, a.valueT(), [&]<typename T, typename W>() -> dctResult_t {
    if constexpr (::cuda::std::is_same_v<W, T>) return dctNotSupported;  // unreachable: the bits above
    else return fn.template operator()<T, W>();
  });
}

template <typename To, typename From>
__device__ __forceinline__ To wireValue(From x) {
  if constexpr (::cuda::std::is_same_v<To, From>) return x;
  else return storeValue<To>(loadValue(x));
}

// Item r of the offsets scan: row r's count, 0 past the last row.
struct WidenCount {
  const void* counts;
  int countBytes;
  uint64_t fixed;
  uint64_t rows;
  __device__ uint64_t operator()(uint64_t r) const {
    if (r >= rows) return 0;
    return counts ? readWidth(counts, r, countBytes) : fixed;
  }
};

template <typename T, typename W, int THREADS>
__global__ void __launch_bounds__(THREADS) packRows(RowWireArgs a) {
  __shared__ typename RowScan<THREADS>::TempStorage scan;
  const size_t D = a.rowLength, wordsPerRow = dct::maskWords(D), bitmapBytes = dct::bitmapBytes(D);
  const T* in = static_cast<const T*>(a.rows);
  W* values = static_cast<W*>(a.values);
  DCT_ROW_LOOP(r, a.rowCount) {
    const size_t at = a.offsets[r] - a.base;
    const T* row = in + r * D;
    if (a.wireCounts && threadIdx.x == 0)
      writeWidth(a.wireCounts, r, a.countBytes, static_cast<uint32_t>(a.offsets[r + 1] - a.offsets[r]));
    if (a.mask == nullptr) {
      for (size_t j = threadIdx.x; j < D; j += THREADS) values[at + j] = wireValue<W>(row[j]);
      continue;
    }
    const uint32_t* words = a.mask + r * wordsPerRow;
    if (a.maskFormat == 0) {  // the words' bytes, little-endian (the CPU twin's memcpy)
      uint8_t* out = static_cast<uint8_t*>(a.wireMask) + r * bitmapBytes;
      for (size_t b = threadIdx.x; b < bitmapBytes; b += THREADS)
        out[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
    }
    rows::scanRow<THREADS>(
        scan, D, [&](size_t j) { return maskBit(words, j); },
        [&](size_t j, bool kept, size_t m) {
          if (!kept) return;
          if (a.maskFormat > 0) writeWidth(a.wireMask, at + m, a.maskFormat, static_cast<uint32_t>(j));
          values[at + m] = wireValue<W>(row[j]);
        });
  }
}

// Wire mask -> a.mask, one block per row; counts the malformed rows. Their
// mask words are unspecified (the CPU twin stops at the first bad entry).
template <int THREADS>
__global__ void __launch_bounds__(THREADS) decodeRows(RowWireArgs a, unsigned long long* malformed) {
  __shared__ typename RowSum<THREADS>::TempStorage sum;
  const size_t D = a.rowLength, W = dct::maskWords(D), bitmapBytes = dct::bitmapBytes(D);
  unsigned long long bad = 0;
  DCT_ROW_LOOP(r, a.rowCount) {
    uint32_t* words = a.mask + r * W;
    const uint64_t count = a.offsets[r + 1] - a.offsets[r];
    if (a.maskFormat == 0) {
      const uint8_t* in = static_cast<const uint8_t*>(a.wireMask) + r * bitmapBytes;
      unsigned long long bits = 0;
      for (size_t w = threadIdx.x; w < W; w += THREADS) {
        uint32_t word = 0;
        for (size_t b = 4 * w; b < 4 * w + 4 && b < bitmapBytes; b++) word |= uint32_t(in[b]) << (8 * (b % 4));
        words[w] = word;
        bits += __popc(word);
      }
      bits = RowSum<THREADS>(sum).Sum(bits);
      const bool tailClear = D % 8 == 0 || (in[D / 8] >> (D % 8)) == 0;
      if (threadIdx.x == 0) bad += !tailClear || bits != count;
    } else {
      const size_t at = a.offsets[r] - a.base;
      for (size_t w = threadIdx.x; w < W; w += THREADS) words[w] = 0;
      __syncthreads();  // the zeros land before any bit is set
      // More than D entries cannot be strictly ascending below D: rejected
      // without reading them (the CPU twin stops at the first bad one).
      bool wrong = count > D;
      for (size_t m = threadIdx.x; !wrong && m < count; m += THREADS) {
        const uint64_t j = readWidth(a.wireMask, at + m, a.maskFormat);
        if (j >= D || (m > 0 && j <= readWidth(a.wireMask, at + m - 1, a.maskFormat))) wrong = true;
        else atomicOr(&words[j / 32], 1u << (j % 32));
      }
      if (__syncthreads_or(wrong) && threadIdx.x == 0) bad++;
    }
    __syncthreads();
  }
  rows::addRowCount<THREADS>(sum, bad, malformed);
}

// Dense rows from the values: whole rows (null mask), else zeros off the
// mask and the row's values in column order on it.
template <typename T, typename W, int THREADS>
__global__ void __launch_bounds__(THREADS) expandRows(RowWireArgs a) {
  __shared__ typename RowScan<THREADS>::TempStorage scan;
  const size_t D = a.rowLength, wordsPerRow = dct::maskWords(D);
  T* out = static_cast<T*>(a.rows);
  const W* values = static_cast<const W*>(a.values);
  DCT_ROW_LOOP(r, a.rowCount) {
    const size_t at = a.offsets[r] - a.base;
    T* row = out + r * D;
    if (a.mask == nullptr) {
      for (size_t j = threadIdx.x; j < D; j += THREADS) row[j] = wireValue<T>(values[at + j]);
      continue;
    }
    const uint32_t* words = a.mask + r * wordsPerRow;
    rows::scanRow<THREADS>(
        scan, D, [&](size_t j) { return maskBit(words, j); },
        [&](size_t j, bool kept, size_t m) {
          if (j < D) row[j] = kept ? wireValue<T>(values[at + m]) : T{};  // all-zero bits: +0 in every type
        });
  }
}

}  // namespace

dctResult_t rowOffsets(KernelContext* ctx, RowOffsetsArgs* args, void* stream) {
  RowOffsetsArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  a.total = 0;
  if (a.rowCount == 0) {
    CUDACHECK(cudaMemsetAsync(a.offsets, 0, sizeof(uint64_t), s));
    return dctSuccess;
  }
  const auto in = thrust::make_transform_iterator(
      thrust::counting_iterator<uint64_t>(0), WidenCount{a.counts, a.countBytes, a.fixedCount, a.rowCount});
  const uint64_t items = static_cast<uint64_t>(a.rowCount) + 1;
  size_t bytes = 0;
  CUDACHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, a.offsets, items, s));
  DCTCHECK(c->temp.reserve(bytes));
  CUDACHECK(cub::DeviceScan::ExclusiveSum(c->temp.ptr, bytes, in, a.offsets, items, s));
  CUDACHECK(cudaMemcpyAsync(&c->host->entries, a.offsets + a.rowCount, sizeof(uint64_t),
                            cudaMemcpyDeviceToHost, s));
  CUDACHECK(cudaStreamSynchronize(s));  // temp is free again; the total is known
  a.total = c->host->entries;
  return dctSuccess;
}

dctResult_t rowPack(KernelContext*, const RowWireArgs* args, void* stream) {
  const RowWireArgs& a = *args;
  cudaStream_t s = cudaStreamOf(stream);
  return dispatchRowWire(a, [&]<typename T, typename W>() -> dctResult_t {
    if (a.rowCount == 0) return dctSuccess;
    if (a.rowLength <= rows::kLaneWireMax && a.mask != nullptr) {
      rows::packLaneRows<T, W><<<gridFor(a.rowCount), kThreads, 0, s>>>(a);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    }
    if (a.rowLength <= rows::kWarpRowMax) {
      return rows::dispatchItems(a.rowLength, [&]<int ITEMS>() -> dctResult_t {
        rows::packWarpRows<T, W, ITEMS><<<rows::warpRowGrid(a.rowCount), rows::kRowWarpThreads, 0, s>>>(a);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      });
    }
    return rows::dispatchBlock(a.rowLength, [&]<int THREADS>() -> dctResult_t {
      packRows<T, W, THREADS><<<rows::rowGrid(a.rowCount), THREADS, 0, s>>>(a);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    });
  });
}

// Like scatterAddPacked: the malformed count comes back before any row is
// written (one stream synchronisation per call with a wire mask).
dctResult_t rowUnpack(KernelContext* ctx, const RowWireArgs* args, void* stream) {
  const RowWireArgs& a = *args;
  CudaContext* c = cudaCtx(ctx);
  cudaStream_t s = cudaStreamOf(stream);
  unsigned long long* malformed = &c->device->malformed;
  // Every wire mask into a.mask first, and the malformed count back: no
  // row is written unless all are well formed.
  const auto decode = [&](auto&& launch) -> dctResult_t {
    if (a.maskFormat < 0) return dctSuccess;
    CUDACHECK(resetCounters(c, s));
    launch();
    CUDACHECK_LAUNCH();
    CUDACHECK(fetchCounters(c, s));
    return c->host->malformed != 0 ? dctInternalError : dctSuccess;
  };
  return dispatchRowWire(a, [&]<typename T, typename W>() -> dctResult_t {
    const size_t D = a.rowLength, R = a.rowCount;
    if (R == 0) return dctSuccess;
    if (D > rows::kWarpRowMax) {
      return rows::dispatchBlock(D, [&]<int THREADS>() -> dctResult_t {
        const unsigned grid = rows::rowGrid(R);
        DCTCHECK(decode([&] { decodeRows<THREADS><<<grid, THREADS, 0, s>>>(a, malformed); }));
        expandRows<T, W, THREADS><<<grid, THREADS, 0, s>>>(a);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      });
    }
    const unsigned grid = rows::warpRowGrid(R);
    if (D <= rows::kLaneWireMax && a.mask != nullptr) {
      DCTCHECK(decode([&] { rows::decodeLaneRows<<<gridFor(R), kThreads, 0, s>>>(a, malformed); }));
      if (rows::expandTileFits(D, sizeof(T))) {
        rows::expandTileRows<T, W><<<rows::tileGrid(R), 32, rows::expandTileBytes(D, sizeof(T)), s>>>(a);
        CUDACHECK_LAUNCH();
        return dctSuccess;
      }
    } else {
      DCTCHECK(decode([&] { rows::decodeWarpRows<<<grid, rows::kRowWarpThreads, 0, s>>>(a, malformed); }));
    }
    return rows::dispatchItems(D, [&]<int ITEMS>() -> dctResult_t {
      rows::expandWarpRows<T, W, ITEMS><<<grid, rows::kRowWarpThreads, 0, s>>>(a);
      CUDACHECK_LAUNCH();
      return dctSuccess;
    });
  });
}

}  // namespace dct::gpu
