#include "algo/packed_message.h"

#include "base/debug.h"

namespace dct {

dctResult_t packMessage(dctCompressor_t c, const void* indices, const void* values, size_t nnz, size_t valueBytes,
                        uint64_t base, char* out, size_t& bytes, void* stream) {
  PackArgs packed{indices, nnz, c->indexBytes, out};
  packed.base = base;
  DCTCHECK(c->ops->packIndices(c->kernels, &packed, stream));
  const size_t v = nnz * valueBytes, padded = packing::pad8(v);
  DCTCHECK(c->ops->copy(c->kernels, out + packed.bytes, values, v, stream));
  if (padded > v) DCTCHECK(c->ops->zero(c->kernels, out + packed.bytes + v, padded - v, stream));
  bytes = packed.bytes + padded;  // packed.bytes is a multiple of 8
  return dctSuccess;
}

}  // namespace dct
