// The kernels ops table: every compression kernel libdct needs, filled by a
// CPU twin (cpu_ops.cc) and, in CUDA builds, a CUDA twin (cuda/). Callers
// never branch on the twin; they pick an ops table once per compressor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dct/dct.h"
#include "dct_config.h"
#include "base/host_device.h"
#include "kernels/onebit_kernels.h"  // the 1-bit ops' argument structs

namespace dct {

// Per-twin workspace (threads' scratch, device temp storage): each twin
// derives its own context type from this one and downcasts what it handed out.
struct KernelContext {
  virtual ~KernelContext() = default;
};

// Fused error feedback + threshold select + compaction:
//   acc = (grad ? grad : 0) + (residualIn ? residualIn : residual)
//   selected = { i : !(|acc_i| < tau) }   (so NaN and Inf are always selected)
//   out = selected entries in ascending index order, at most `capacity`,
//         each value rounded to valueType, a valueType narrower than dtype
//         clamped to +-valueLimit first (storeSaturated: a finite acc never
//         becomes Inf, and P such values never sum past the type's range)
//   residual = acc minus what was written for the written entries (0 when
//   valueType is dtype, or the rounding error; 0 for NaN/Inf), entries
//   beyond capacity keep their acc: nothing is ever lost.
// dtype is the accumulation type (residual, acc: fp32 or fp64); grad is
// gradType (any, converted exactly or rounded to dtype), values valueType.
// Reading the old residual from residualIn and writing the new one to
// `residual` costs the same traffic as in place and leaves the old one
// intact: the compressor commits a step only when every rank succeeded.
// Tensors from this size on leave the caches before their result is read
// again (a step touches gradient, residual, spare and result: 4x this): the
// CPU twin's select writes the new residual and its merge writes the result
// with non-temporal stores, sparing every line's read for ownership
// (SelectArgs::stream, MergeArgs::stream; measured crossover on a 32 MiB L3:
// 2^21 fp32 elements, bench/results/2026-11-25-select-avx2).
constexpr size_t kStreamBytes = size_t(8) << 20;

struct SelectArgs {
  const void* grad;  // may be null
  void* residual;    // out (and in, when residualIn is null)
  size_t n;
  dctDataType_t dtype;
  int indexBytes;  // 4 or 8
  double tau;      // > 0
  size_t capacity;
  void* outIndices;
  void* outValues;
  size_t nnz = 0;        // out: entries written
  size_t selected = 0;   // out: entries meeting the threshold (may exceed nnz)
  size_t nonFinite = 0;  // out: NaN/Inf among the written entries
  const void* residualIn = nullptr;  // may equal residual
  dctDataType_t gradType = dctNumTypes;   // dctNumTypes: dtype
  dctDataType_t valueType = dctNumTypes;  // dctNumTypes: dtype
  double valueLimit = 0;  // a valueType value; 0: valueType's largest finite
  bool stream = false;    // the tensor is past kStreamBytes
  const void* in() const { return residualIn ? residualIn : residual; }
  dctDataType_t gradT() const { return gradType == dctNumTypes ? dtype : gradType; }
  dctDataType_t valueT() const { return valueType == dctNumTypes ? dtype : valueType; }
};

struct ThresholdArgs {
  const void* data;
  size_t n;
  dctDataType_t dtype;  // any type (the all-to-all's rows may be fp16/bf16)
  double density;
  dctThresholdMethod_t method;
  uint64_t seed;  // sample PRNG stream (sampled method)
  int maxPasses = 0;  // bisect: counting-pass budget (0: kBisectMaxPasses, threshold_bisect.h)
  int passes = 0;     // out: counting passes over x the bisect method made (0 for the others)
  // Sampled and exact: estimate on data + addend (the gradient, in its own
  // type, widened to data's float/double first, as the add kernel forms an
  // accumulator), bit for bit the estimate on that sum materialised, without
  // writing it. Bisect passes over x many times: it takes no addend.
  const void* addend = nullptr;
  dctDataType_t addendType = dctNumTypes;  // dctNumTypes: dtype
  dctDataType_t addendT() const { return addendType == dctNumTypes ? dtype : addendType; }
};

// dense[indices[j]] += values[j] for j < nnz, in j order for equal indices.
// dense is dtype, values valueType (any pair): each sum is formed in
// dtype's accumulation type and rounded to dtype once.
struct ScatterArgs {
  void* dense;
  size_t n;
  dctDataType_t dtype;
  int indexBytes;
  const void* indices;
  const void* values;
  size_t nnz;
  bool sortedUnique;  // indices strictly ascending: lets the twin split by range
  size_t packedBytes = 0;  // scatterAddPacked: bytes of the packed index list
  dctDataType_t valueType = dctNumTypes;  // dctNumTypes: dtype
  dctDataType_t valueT() const { return valueType == dctNumTypes ? dtype : valueType; }
};

// The sum of several packed messages (the allgather algorithm's reduction):
// dense[i] = v_0(i) + v_1(i) + ... in message order, starting from +0 and
// skipping messages without entry i; every other element becomes 0. The
// same bits as zeroing dense and scatterAddPacked-ing message after message,
// in one pass that writes dense once.
struct PackedMessage {
  const void* indices;  // packed list (index_packing.h) of packedBytes bytes
  const void* values;   // nnz values of valueType
  size_t nnz;
  size_t packedBytes;
};
struct MergeArgs {
  void* dense;
  size_t n;
  dctDataType_t dtype;      // dense's (the accumulation type)
  dctDataType_t valueType;  // the messages' values
  int indexBytes;
  const PackedMessage* messages;
  int count;
  int malformed = -1;  // out: the first message failing packing::validGroup
  bool stream = false;  // the tensor is past kStreamBytes
};

// Delta bit-packing of a strictly ascending index list (index_packing.h).
struct PackArgs {
  const void* indices;  // nnz entries, strictly ascending
  size_t nnz;
  int indexBytes;
  void* out;         // room for packing::maxPackedBytes(nnz, indexBytes)
  size_t bytes = 0;  // out: bytes written (valid on the host when the op returns)
  uint64_t base = 0; // the list stores index - base (every index >= base): a
                     // piece of a list, relative to its range (split algorithm)
};

// Cut points of a strictly ascending index list: positions[j] = number of
// entries below keys[j], for `keys` ascending (host arrays, results valid on
// the host when the op returns). The split algorithm's cut of a selection
// into its ranges.
struct BoundsArgs {
  const void* indices;  // nnz entries, strictly ascending, in the twin's memory
  size_t nnz;
  int indexBytes;
  const uint64_t* keys;  // host
  size_t count;
  uint64_t* positions;   // host, `count` entries
};

// DCT-MP rows (dctSparseAlltoall): R rows of D entries, row-major, of any
// dtype (fp16/bf16 rank by their own 16-bit keys). A row's
// mask is a bitmap of maskWords(D) uint32 words, bit j%32 of word j/32 set
// when column j is kept; bits past D are zero.
DCT_HOST_DEVICE size_t maskWords(size_t rowLength) { return (rowLength + 31) / 32; }

// Per-row selection. Keys compare the magnitude's bits (|x| as an unsigned
// integer, NaN and +-Inf as the bits of +Inf), so both twins rank alike and
// -0 ties +0.
//  * k > 0 (top-K): a row with nf >= k non-finite entries keeps exactly
//    those; otherwise it keeps its k largest keys, ties at the cut taken in
//    ascending column order (k >= D keeps the whole row);
//  * k == 0 (threshold): keeps { j : !(|x_j| < T(tau)) } (NaN included).
// counts[r] = entries kept in row r; nonFinite = NaN/Inf kept (all rows).
struct RowSelectArgs {
  const void* rows;
  size_t rowCount;
  size_t rowLength;
  dctDataType_t dtype;
  size_t k;
  double tau;
  uint32_t* mask;    // out: rowCount * maskWords(rowLength) words
  uint32_t* counts;  // out: rowCount
  size_t nonFinite = 0;  // out (valid on the host when the op returns)
};

// Entry offsets: offsets[r] = sum of counts[0..r), r <= rowCount, where
// counts are `countBytes` (1, 2 or 4) wide, or all equal to `fixedCount`
// when counts is null. offsets[rowCount] is also returned in *total (host).
struct RowOffsetsArgs {
  const void* counts;
  int countBytes;
  size_t fixedCount;
  size_t rowCount;
  uint64_t* offsets;  // out: rowCount + 1
  uint64_t total = 0; // out (host)
};

// The wire form of rows [0, rowCount) of one peer's block. Row r's entries
// are at offsets[r] - base .. offsets[r+1] - base of the block (ascending
// columns). maskFormat: 1, 2 or 4 = index lists of that width at the same
// entry positions; 0 = bitmap, ceil(D/8) bytes per row (byte b holds
// columns 8b..8b+7, lowest bit first); -1 = no mask on the wire. A null
// `mask` with format -1 means every row is whole (K >= D: plain rows).
struct RowWireArgs {
  void* rows;              // R x D dense rows (pack: read; unpack: written, zeros off the mask)
  size_t rowCount;
  size_t rowLength;
  dctDataType_t dtype;
  uint32_t* mask;          // R x maskWords(D) (pack: read; unpack: read, or written from wireMask)
  const uint64_t* offsets; // R + 1 entries, in this twin's memory
  uint64_t base;           // offsets[0], on the host
  int maskFormat;
  void* wireMask;          // pack: written (unless format -1); unpack: read and decoded into mask
  void* wireCounts;        // pack only: counts written `countBytes` wide (null: not sent)
  int countBytes;
  void* values;            // packed values (pack: written; unpack: read)
};

// DES rows (dctDesReduceScatter): a block of R rows of D entries and its
// row flags, a bitmap of maskWords(R) uint32 words (bit r%32 of word r/32
// set when row r is flagged; bits past R are zero). `packed` holds the
// flagged rows back to back in row order, in dtype.
//  * rowFlags:  flags = rows with any entry other than +-0 (NaN/Inf count,
//               -0 does not: the magnitude's bits); count and nonFinite
//               (NaN/Inf entries of flagged rows) come back to the host.
//  * rowGather: packed = the flagged rows.
//  * rowScatter: rows = the flagged rows from packed (denseSource: row r at
//               packed + r * D), zeros elsewhere.
//  * rowAccumulate: rows (accType) += the flagged rows of packed, each sum
//               formed in accType; a null flags adds every row. Flags from
//               the wire are checked first (popcount == count, no bit past
//               R): malformed writes nothing and returns dctInternalError.
struct RowBlockArgs {
  void* rows;
  size_t rowCount;
  size_t rowLength;
  dctDataType_t dtype;        // the packed rows' type (and the rows', but for rowAccumulate)
  uint32_t* flags;
  void* packed;
  uint64_t count = 0;         // flagged rows (rowFlags: out, host)
  uint64_t nonFinite = 0;     // rowFlags: out (host)
  dctDataType_t accType = dctNumTypes;  // rowAccumulate: the rows' type
  bool denseSource = false;   // rowScatter
};

// All pointers handed to one twin live in that twin's memory space (host for
// the CPU twin, device for the CUDA twin); `stream` is a cudaStream_t for the
// CUDA twin and ignored by the CPU twin. Every op is stream-ordered; results
// the host needs (SelectArgs counts, tau) are valid when the op returns.
struct KernelOps {
  const char* name;
  bool device;  // buffers live in device memory
  dctResult_t (*createContext)(KernelContext** ctx);
  void (*destroyContext)(KernelContext* ctx);
  // Memory of this twin's space. copy: non-overlapping, stream-ordered.
  dctResult_t (*allocate)(KernelContext* ctx, void** ptr, size_t bytes);
  void (*release)(KernelContext* ctx, void* ptr);
  dctResult_t (*copy)(KernelContext* ctx, void* dst, const void* src, size_t bytes, void* stream);
  dctResult_t (*synchronize)(KernelContext* ctx, void* stream);
  // Ordering across calls: the context's buffers are reused every call, so
  // a call on `stream` first waits for what the previous call queued on its
  // stream (streamBegin), and marks its own end (streamEnd). The CPU twin
  // runs synchronously: nothing to order.
  dctResult_t (*streamBegin)(KernelContext* ctx, void* stream);
  dctResult_t (*streamEnd)(KernelContext* ctx, void* stream);
  // residual += grad
  dctResult_t (*accumulate)(KernelContext* ctx, void* residual, const void* grad, size_t n,
                            dctDataType_t dtype, void* stream);
  // out = a + b (out may be a): an accumulator built beside the residual
  // it came from. out and a are dtype (fp32/fp64), b is bType (any; a
  // half gradient is widened exactly).
  dctResult_t (*add)(KernelContext* ctx, void* out, const void* a, const void* b, size_t n,
                     dctDataType_t dtype, dctDataType_t bType, void* stream);
  // dst[i] = src[i] * factor, computed in the wider accumulation type and
  // rounded to dstType (IEEE: overflow is Inf; NaN canonical in halves).
  // Any pair of types; dst and src must not overlap unless they are the
  // same pointer with types of equal size.
  dctResult_t (*convert)(KernelContext* ctx, void* dst, dctDataType_t dstType, const void* src,
                         dctDataType_t srcType, size_t n, double factor, void* stream);
  dctResult_t (*selectCompact)(KernelContext* ctx, SelectArgs* args, void* stream);
  // The same selection written densely: outValues[i] = acc_i if selected
  // else 0 (capacity and outIndices unused; nnz = selected). One pass, no
  // compaction: what the dense algorithm sends.
  dctResult_t (*selectDense)(KernelContext* ctx, SelectArgs* args, void* stream);
  // tau such that about density*n entries have |x| >= tau; tau > 0 always
  // (+Inf for n == 0). Both twins return the same tau bit for bit.
  dctResult_t (*threshold)(KernelContext* ctx, ThresholdArgs* args, double* tau, void* stream);
  dctResult_t (*scatterAdd)(KernelContext* ctx, const ScatterArgs* args, void* stream);
  dctResult_t (*packIndices)(KernelContext* ctx, PackArgs* args, void* stream);
  dctResult_t (*lowerBounds)(KernelContext* ctx, const BoundsArgs* args, void* stream);
  // scatterAdd of a message whose `indices` are a packed list of
  // `packedBytes` bytes. Both twins validate the whole list first (sizes,
  // offsets, widths, indices strictly ascending within and across groups and
  // < n: packing::validGroup) and, if anything is malformed, write nothing
  // and return dctInternalError, so every rank and twin fails alike. The CUDA
  // twin reads its count of malformed groups back before scattering (one
  // stream synchronisation per call).
  dctResult_t (*scatterAddPacked)(KernelContext* ctx, const ScatterArgs* args, void* stream);
  // MergeArgs above. A malformed message (the check of scatterAddPacked)
  // returns dctInternalError with args->malformed set; dense is then
  // undefined. The CPU twin checks every message before writing anything.
  dctResult_t (*mergePacked)(KernelContext* ctx, MergeArgs* args, void* stream);
  dctResult_t (*zero)(KernelContext* ctx, void* data, size_t bytes, void* stream);
  dctResult_t (*scale)(KernelContext* ctx, void* data, size_t n, dctDataType_t dtype,
                       double factor, void* stream);
  // DCT-MP rows (RowSelectArgs ... RowWireArgs above).
  dctResult_t (*rowSelect)(KernelContext* ctx, RowSelectArgs* args, void* stream);
  dctResult_t (*rowOffsets)(KernelContext* ctx, RowOffsetsArgs* args, void* stream);
  // rows + mask -> values (+ wireMask, wireCounts): the kept entries in
  // ascending column order per row.
  dctResult_t (*rowPack)(KernelContext* ctx, const RowWireArgs* args, void* stream);
  // values (+ wireMask decoded into mask) -> dense rows, zeros elsewhere.
  // A wire mask is validated first (index lists strictly ascending and < D,
  // bitmaps with popcount = the row's count and no bit >= D): if any row is
  // malformed nothing is written and the op returns dctInternalError.
  dctResult_t (*rowUnpack)(KernelContext* ctx, const RowWireArgs* args, void* stream);
  // DES rows (RowBlockArgs above).
  dctResult_t (*rowFlags)(KernelContext* ctx, RowBlockArgs* args, void* stream);
  dctResult_t (*rowGather)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  dctResult_t (*rowScatter)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  dctResult_t (*rowAccumulate)(KernelContext* ctx, const RowBlockArgs* args, void* stream);
  // --- 1-bit compressed allreduce (onebit_kernels.h: bit layout, the fixed
  // sum-of-squares order, the NaN rule) ---
  dctResult_t (*onebitCompress)(KernelContext* ctx, OnebitCompressArgs* args, void* stream);
  dctResult_t (*onebitAverage)(KernelContext* ctx, const OnebitAverageArgs* args, void* stream);
  dctResult_t (*onebitDecode)(KernelContext* ctx, const OnebitDecodeArgs* args, void* stream);
  // --- end 1-bit ---
};

const KernelOps& cpuKernelOps();
#if DCT_HAVE_CUDA
const KernelOps& cudaKernelOps();  // cuda/: the CUDA twin
#endif

inline size_t dtypeSize(dctDataType_t dtype) {
  switch (dtype) {
    case dctFloat64: return 8;
    case dctFloat16:
    case dctBFloat16: return 2;
    default: return 4;
  }
}

inline const char* dtypeName(dctDataType_t dtype) {
  switch (dtype) {
    case dctFloat32: return "fp32";
    case dctFloat64: return "fp64";
    case dctFloat16: return "fp16";
    case dctBFloat16: return "bf16";
    default: return "unknown";
  }
}

// The type a tensor's sums and error-feedback residual are kept in: fp32
// for the half types, else the tensor's own.
inline dctDataType_t accumulationType(dctDataType_t dtype) {
  return dtype == dctFloat16 || dtype == dctBFloat16 ? dctFloat32 : dtype;
}

// dctConfig_t.wireType left unset resolves to this: "the tensor's own type".
constexpr int kWireTypeOfTensor = -1;

// Deterministic sample positions: splitmix64 stream mapped onto [0, n).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// The sample stream of one step: the same on every run, different every step.
inline uint64_t stepSeed(long long seed, uint64_t step) {
  uint64_t s = static_cast<uint64_t>(seed) ^ (step * 0xd1b54a32d192ed03ull);
  return splitmix64(s);
}
inline size_t samplePosition(uint64_t random, size_t n) {
  return static_cast<size_t>((static_cast<unsigned __int128>(random) * n) >> 64);
}
// Sample size for the sampled estimator: ~256 samples above the kept
// quantile (count noise ~ +-6%, well inside the +-25% drift band), at least
// 4096, at most 2^20 random gathers (5M gathers at density 1e-4 measured 3x
// slower than the dense allreduce). Past n/2 the estimate is exact (n).
inline size_t thresholdSampleSize(size_t n, double density) {
  double s = 256.0 / density;
  if (s < 4096.0) s = 4096.0;
  if (s > 1048576.0) s = 1048576.0;
  return 2.0 * s >= static_cast<double>(n) ? n : static_cast<size_t>(s);
}

}  // namespace dct
