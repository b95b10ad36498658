#include "transport/mpi_half.h"

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "base/half_bulk.h"

#include "base/half_types.h"

namespace dct {
namespace {

template <typename H>
void halfSum(void* in, void* inout, int* len, MPI_Datatype*) {
  if constexpr (std::is_same_v<H, Half>) {
    auto* b = static_cast<uint16_t*>(inout);
    halfSumBulk(static_cast<const uint16_t*>(in), b, b, static_cast<size_t>(*len));
  } else {
    const H* a = static_cast<const H*>(in);
    H* b = static_cast<H*>(inout);
    for (int i = 0; i < *len; i++) b[i] = Value<H>::store(Value<H>::load(a[i]) + Value<H>::load(b[i]));
  }
}

}  // namespace

int mpiHalfSum(MpiHalfOps& ops, dctDataType_t datatype, MPI_Op* op) {
  const bool fp16 = datatype == dctFloat16;
  MPI_Op& slot = fp16 ? ops.fp16Sum : ops.bf16Sum;
  if (slot == MPI_OP_NULL) {
    int err = MPI_Op_create(fp16 ? halfSum<Half> : halfSum<BFloat16>, 1 /* commutative */, &slot);
    if (err != MPI_SUCCESS) return err;
  }
  *op = slot;
  return MPI_SUCCESS;
}

void mpiHalfOpsFree(MpiHalfOps& ops) {
  for (MPI_Op* op : {&ops.fp16Sum, &ops.bf16Sum})
    if (*op != MPI_OP_NULL) MPI_Op_free(op);
}

}  // namespace dct
