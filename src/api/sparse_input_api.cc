// dctSparseInputAllreduce: local checks, then the transaction
// (algo/sparse_input_allreduce.cc). A rank with a bad argument still takes
// part in the agreement so that no other rank is left waiting.
#include <cstring>

#include "algo/algorithms.h"
#include "api/checks.h"
#include "api/guard.h"
#include "base/dtype.h"
#include "transport/comm.h"

using namespace dct;

namespace {

dctResult_t checkOutputs(dctComm_t comm, const SparseInput& in, size_t valueBytes, int indexBytes) {
  const char* fn = in.fn;
  if (in.outNnz == nullptr) return fail(comm, dctInvalidArgument, "%s: outNnz is NULL", fn);
  if (in.query()) return dctSuccess;
  if (in.dense) DCTCHECK(checkBuffer(comm, in.dense, in.count, valueBytes, "dense", fn));
  if ((in.outIndices == nullptr) != (in.outValues == nullptr))
    return fail(comm, dctInvalidArgument, "%s: give both outIndices and outValues or neither", fn);
  if (in.outIndices == nullptr) return dctSuccess;
  if (in.outCapacity == 0) return fail(comm, dctInvalidArgument, "%s: outCapacity is 0 with a COO asked for", fn);
  DCTCHECK(checkBuffer(comm, in.outIndices, in.outCapacity, indexBytes, "outIndices", fn));
  return checkBuffer(comm, in.outValues, in.outCapacity, valueBytes, "outValues", fn);
}

// Every buffer in one memory space, which the comm's transport moves.
dctResult_t checkSpaces(dctComm_t comm, const SparseInput& in) {
  const void* first = nullptr;
  for (const void* p : std::initializer_list<const void*>{in.indices, in.values, in.dense, in.outIndices, in.outValues}) {
    if (p == nullptr) continue;
    if (first && twinFor(p).device != twinFor(first).device)
      return fail(comm, dctInvalidArgument, "%s: the buffers are in different memory spaces", in.fn);
    if (!first) first = p;
  }
  return checkTransportSpace(comm, first, in.fn);
}

dctResult_t checkInput(dctComm_t comm, const SparseInput& in) {
  const char* fn = in.fn;
  DCTCHECK(checkDatatype(comm, in.dtype, fn));
  DCTCHECK(checkOp(comm, in.op, fn));
  const int algorithm = in.algorithm;
  if (algorithm < 0 || algorithm >= dctNumAlgorithms)
    return fail(comm, dctInvalidArgument, "%s: algorithm %d is not a dctAlgorithm_t", fn, algorithm);
  if (algorithm == dctAlgoGlobalTopk)
    return fail(comm, dctInvalidArgument, "%s: dctAlgoGlobalTopk drops entries; this allreduce is lossless", fn);
  if (in.count == 0) return fail(comm, dctInvalidArgument, "%s: count is 0", fn);
  const size_t valueBytes = dtypeSize(in.dtype);
  const int indexBytes = in.count > 0xffffffffull ? 8 : 4;
  DCTCHECK(checkBuffer(comm, in.values, in.nnz, valueBytes, "values", fn));
  DCTCHECK(checkBuffer(comm, in.indices, in.nnz, indexBytes, "indices", fn));
  if (in.nnz > in.count) return fail(comm, dctInvalidArgument, "%s: nnz %zu > count %zu", fn, in.nnz, in.count);
  DCTCHECK(checkOutputs(comm, in, valueBytes, indexBytes));
  DCTCHECK(checkSpaces(comm, in));
  return checkIndexList(comm, in.indices, in.nnz, indexBytes, in.count, fn, in.stream, nullptr, true);
}

}  // namespace

extern "C" dctResult_t dctSparseInputAllreduce(const void* indices, const void* values, size_t nnz, size_t count,
                                               dctDataType_t datatype, dctRedOp_t op, dctAlgorithm_t algorithm,
                                               void* dense, void* outIndices, void* outValues, size_t outCapacity,
                                               size_t* outNnz, dctSparseInputInfo_t* info, dctComm_t comm,
                                               void* stream) {
  const char* fn = "dctSparseInputAllreduce";
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "%s: invalid comm", fn);
  return guarded(comm, fn, [&] {
    SparseInput in{indices,   values,    nnz,         count,  dctFloat32, dctSum, rawEnum(algorithm), dense,
                   outIndices, outValues, outCapacity, outNnz, info,       stream, fn};
    // The enums' raw bits: a C caller may pass any int (loading one as the
    // enum type is undefined); checkInput reads them raw too.
    std::memcpy(&in.dtype, &datatype, sizeof(in.dtype));
    std::memcpy(&in.op, &op, sizeof(in.op));
    // An exception in the checks still goes on to the agreement.
    const dctResult_t local = caught(comm, fn, [&] { return checkInput(comm, in); });
    return sparseInputAllreduce(comm, in, local);
  });
}
