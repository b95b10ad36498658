// Arguments of the ops on COO messages (kernels.h): scatter-add, the merge
// of packed messages, index packing and the cut of a list into ranges.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"
#include "dct/dct.h"

namespace dct {

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
  // Set (sortedUnique only): entry j is skipped where unlessNonzero[indices[j]]
  // (floats of unlessBytes bytes, 2, 4 or 8) is not +-0: global top-k's
  // return of what no owner delivered (config.ownerReturn).
  const void* unlessNonzero = nullptr;
  size_t unlessBytes = 0;
};

// x[i] (a float of `bytes` bytes, 2, 4 or 8) is not +-0 (NaN included).
DCT_HOST_DEVICE bool nonzeroAt(const void* x, size_t bytes, size_t i) {
  if (bytes == 2) return (static_cast<const uint16_t*>(x)[i] & 0x7fffu) != 0;
  if (bytes == 4) return (static_cast<const uint32_t*>(x)[i] & 0x7fffffffu) != 0;
  return (static_cast<const uint64_t*>(x)[i] & 0x7fffffffffffffffull) != 0;
}

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
  bool checkOnly = false;  // validate every message (and reserve), write nothing
  bool checked = false;    // the same messages passed a checkOnly call: not validated again
  double factor = 1.0;     // != 1: each element of the sum times dtype(factor), as the scale op
};

// The sum of several packed messages as COO, without a dense buffer: every
// index present in some message, ascending, with v_0(i) + v_1(i) + ... in
// message order from +0 in dtype (the accumulation type), times factor when
// factor != 1 (as the scale op: x *= dtype(factor)), kept where
// !(|x| < tau) (NaN and Inf too): the same entries and bits as mergePacked,
// scale and a select of that dense sum. capacity >= the messages' entries
// together (the union's bound); nnz (out) the entries written.
struct MergeCooArgs {
  const PackedMessage* messages;
  int count;
  uint64_t n;
  dctDataType_t dtype;      // outValues' (the accumulation type)
  dctDataType_t valueType;  // the messages' values
  int indexBytes;
  double factor;
  double tau;
  void* outIndices;
  void* outValues;
  size_t capacity;
  size_t nnz = 0;
  int malformed = -1;  // out: the first message failing packing::validGroup
  bool checked = false;  // the messages passed a checkOnly mergePacked: not validated again
  uint64_t indexBase = 0;  // added to every index written (a range of a larger index space)
};

// A dense array's nonzeros as COO: x = in[i] (times factor when factor != 1,
// as the scale op: x *= dtype(factor)), kept where !(|x| < tau) (NaN and
// Inf too), ascending, as indexBase + i: the same entries and bits as the
// scale op and a select of the array, from one read of it and one write of
// the COO (the select also writes what it leaves behind, and compacts
// through per-worker scratch). More entries than capacity: refused.
struct DenseCooArgs {
  const void* in;
  uint64_t n;
  dctDataType_t dtype;  // in's and outValues' (fp32 or fp64)
  int indexBytes;
  double factor;
  double tau;
  void* outIndices;
  void* outValues;
  size_t capacity;
  size_t nnz = 0;          // out: the entries written
  uint64_t indexBase = 0;  // added to every index written
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

}  // namespace dct
