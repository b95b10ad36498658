// fp16 and bf16 sums for MPI_Allreduce: MPI has no standard half type, so
// the elements travel as MPI_UINT16_T and a user-defined, commutative op
// adds each pair in fp32 and rounds once to the half type (what NCCL's
// half allreduce does per reduction step).
#pragma once

#include <mpi.h>

#include "dct/dct.h"

namespace dct {

struct MpiHalfOps {
  MPI_Op fp16Sum = MPI_OP_NULL;
  MPI_Op bf16Sum = MPI_OP_NULL;
};

// The op for a half datatype, created on first use (MPI_Op_create).
int mpiHalfSum(MpiHalfOps& ops, dctDataType_t datatype, MPI_Op* op);
// Frees what was created; call only while MPI is still initialised.
void mpiHalfOpsFree(MpiHalfOps& ops);

}  // namespace dct
