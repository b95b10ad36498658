// Argument checks shared by the entry points. Each returns dctSuccess or a
// recorded failure; none has side effects beyond the error message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/local_context.h"
#include "base/checked_size.h"
#include "base/components.h"
#include "base/debug.h"
#include "core/compressor.h"
#include "dct/dct.h"
#include "kernels/kernels.h"
#include "transport/comm.h"

namespace dct {

// A C caller may pass any int as an enum; loading an out-of-range value as
// the C++ enum type is undefined, so unchecked enums are read as raw ints.
template <typename E>
int rawEnum(const E& e) {
  int v;
  static_assert(sizeof(E) == sizeof(int));
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

inline dctResult_t checkDatatype(dctComm_t comm, const dctDataType_t& type, const char* fn) {
  int t = rawEnum(type);
  if (t >= 0 && t < dctNumTypes) return dctSuccess;
  return fail(comm, dctInvalidArgument, "%s: datatype %d is not a dctDataType_t", fn, t);
}

inline dctResult_t checkOp(dctComm_t comm, const dctRedOp_t& redOp, const char* fn) {
  int op = rawEnum(redOp);
  if (op == dctSum || op == dctAvg) return dctSuccess;
  return fail(comm, dctInvalidArgument, "%s: op %d is not a dctRedOp_t", fn, op);
}

// Null with elements to hold, not aligned to its element size, or larger
// than memory can be (elems x elemBytes past SIZE_MAX).
inline dctResult_t checkBuffer(dctComm_t comm, const void* p, size_t elems, size_t elemBytes,
                               const char* name, const char* fn) {
  if (elems == 0) return dctSuccess;
  size_t bytes;
  if (!checkedMul(elems, elemBytes, bytes))
    return fail(comm, dctInvalidArgument, "%s: %s of %zu elements of %zu bytes exceeds the address space", fn, name,
                elems, elemBytes);
  if (p == nullptr) return fail(comm, dctInvalidArgument, "%s: %s is NULL with %zu elements", fn, name, elems);
  if (reinterpret_cast<uintptr_t>(p) % elemBytes != 0)
    return fail(comm, dctInvalidArgument, "%s: %s (%p) is not aligned to %zu bytes", fn, name, p, elemBytes);
  return dctSuccess;
}

// Per-rank row counts of rowLength elements each (P of them): their total
// rows x rowLength x the widest element (8 bytes) must fit size_t, so that
// no later product of rows, rowLength and an element or index size wraps.
inline dctResult_t checkRowCounts(dctComm_t comm, const size_t* rows, size_t rowLength, const char* name,
                                  const char* fn) {
  if (rows == nullptr) return fail(comm, dctInvalidArgument, "%s: %s is NULL", fn, name);
  size_t total = 0, bytes = 0;
  if (!checkedSum(rows, comm->size, total) || !checkedMul(total, rowLength, bytes) || !checkedMul(bytes, 8, bytes))
    return fail(comm, dctInvalidArgument, "%s: %s x rowLength %zu x 8 bytes exceeds the address space", fn, name,
                rowLength);
  return dctSuccess;
}

// The comm's transport must move buffers of this memory space.
inline dctResult_t checkTransportSpace(dctComm_t comm, const void* buf, const char* fn) {
  if (buf == nullptr) return dctSuccess;  // nothing to move
  const KernelOps& twin = twinFor(buf);
  if (&twin == &missingDeviceOps())
    return fail(comm, dctNotSupported, "%s: the buffers are device memory but %s", fn, deviceComponentError());
  const bool device = twin.device;
  if (device ? comm->transport->deviceBuffers : comm->transport->hostBuffers) return dctSuccess;
  return fail(comm, dctInvalidArgument, "%s: the %s transport cannot move %s buffers", fn, comm->transport->name,
              device ? "device" : "host");
}

// Range check of indices `indexBytes` (4 or 8) wide; *ascending (when
// given) tells whether they are strictly ascending, which lets scatter-add
// split them in parallel, and `strict` makes anything else an error.
// Device-resident indices are copied to the host (after the caller's stream)
// to be checked there; a device-side check would save the copy.
inline dctResult_t checkIndexList(dctComm_t comm, const void* indices, size_t nnz, int indexBytes, size_t count,
                                  const char* fn, void* stream, bool* ascending = nullptr, bool strict = false) {
  std::vector<char> staged;
  const KernelOps& twin = twinFor(indices);
  if (twin.device && nnz > 0) {
    staged.resize(nnz * indexBytes);
    dctResult_t res = withLocalContext(twin, [&](KernelContext* ctx) {
      dctResult_t r = twin.copy(ctx, staged.data(), indices, staged.size(), stream);
      return r == dctSuccess ? twin.synchronize(ctx, stream) : r;
    });
    if (res != dctSuccess) {
      const std::string why = threadLastErrorMessage();
      return fail(comm, res, "%s: cannot read the device indices to check them (%s)", fn, why.c_str());
    }
    indices = staged.data();
  }
  auto at = [&](size_t j) -> uint64_t {
    if (indexBytes == 8) return static_cast<const uint64_t*>(indices)[j];
    return static_cast<const uint32_t*>(indices)[j];
  };
  bool up = true;
  for (size_t j = 0; j < nnz; j++) {
    const uint64_t i = at(j);
    if (i >= count)
      return fail(comm, dctInvalidArgument, "%s: indices[%zu] = %llu is out of range (count %zu)", fn, j,
                  static_cast<unsigned long long>(i), count);
    if (j == 0 || i > at(j - 1)) continue;
    if (strict)
      return fail(comm, dctInvalidArgument, "%s: indices[%zu] = %llu follows %llu: not strictly ascending", fn, j,
                  static_cast<unsigned long long>(i), static_cast<unsigned long long>(at(j - 1)));
    up = false;
  }
  if (ascending) *ascending = up;
  return dctSuccess;
}

inline dctResult_t checkIndices(dctComm_t comm, const uint32_t* idx, size_t nnz, size_t count, const char* fn,
                                void* stream, bool* ascending = nullptr) {
  return checkIndexList(comm, idx, nnz, sizeof(uint32_t), count, fn, stream, ascending);
}

}  // namespace dct
