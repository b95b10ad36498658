// Arguments of the row ops (kernels.h): DCT-MP's per-row selection and
// wire form, DES's row flags.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "dct/dct.h"

namespace dct {

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
//  * k == 0 (threshold): keeps { j : !(|x_j| < tau) } (NaN included), x_j
//    and tau in T's accumulation type (fp32 for fp16/bf16).
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
// Values travel as valueType, no wider than dtype: pack rounds each value
// to it (nearest even, past its range to Inf, NaN stays NaN), unpack
// widens it back exactly; the same type moves the bits unchanged.
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
  dctDataType_t valueType = dctNumTypes;  // dctNumTypes: dtype
  dctDataType_t valueT() const { return valueType == dctNumTypes ? dtype : valueType; }
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

}  // namespace dct
