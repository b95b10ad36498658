// The COO of split's result straight from its gathered ranges (the
// sparse-input allreduce's COO on the host twin): range after range, a
// packed range's entries through mergePackedCoo, a dense range's through
// denseCoo, scaled and thresholded as the select of the whole sum would
// scale and keep them. The same entries and bits as selecting the
// written and averaged count-sized sum, without writing or reading it.
#include "algo/packed_message.h"
#include "algo/split_allreduce.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr const char* kFn = "dctSparseInputAllreduce";

}  // namespace

dctResult_t splitRangesCoo(dctCompressor_t c, dctComm_t comm, void* sum, RangesCoo& coo, void* stream) {
  const int P = comm->size;
  const size_t accBytes = dtypeSize(c->accType), indexBytes = static_cast<size_t>(c->indexBytes);
  const RankArrays& a = c->rankArrays;
  char* gathered = c->gathered.as<char>();
  coo.nnz = 0;
  for (int q = 0; q < P; q++) {
    const size_t begin = splitRangeBegin(c->count, P, q), length = splitRangeBegin(c->count, P, q + 1) - begin;
    if (length == 0) continue;
    char* indices = static_cast<char*>(coo.outIndices) + coo.nnz * indexBytes;
    char* values = static_cast<char*>(coo.outValues) + coo.nnz * accBytes;
    const size_t room = coo.capacity - coo.nnz;
    if (a.forms[2 * q + 1] != kSplitDenseForm) {
      PackedMessage m = packedView(gathered + a.formOffsets[q], a.formBytes[q], a.forms[2 * q + 1], accBytes);
      MergeCooArgs merge{&m, 1, length, c->accType, c->accType, c->indexBytes, coo.factor, tauFloor(c), indices,
                         values, room};
      merge.indexBase = begin;  // checked as it is read: the exchange left the ranges unchecked
      if (c->ops->mergePackedCoo(c->kernels, &merge, stream) != dctSuccess) {
        if (merge.malformed >= 0) return fail(comm, dctInternalError, "%s: malformed range from rank %d", kFn, q);
        return fail(comm, dctInternalError, "%s: range %d holds more entries than the inputs", kFn, q);
      }
      coo.nnz += merge.nnz;
      continue;
    }
    // This rank's dense range stays in the exchange's sum; the others' came gathered.
    const char* range = q == comm->rank ? static_cast<char*>(sum) + begin * accBytes : gathered + a.formOffsets[q];
    DenseCooArgs dense{range, length, c->accType, c->indexBytes, coo.factor, tauFloor(c), indices, values, room};
    dense.indexBase = begin;
    if (c->ops->denseCoo(c->kernels, &dense, stream) != dctSuccess)
      return fail(comm, dctInternalError, "%s: range %d holds more entries than the inputs", kFn, q);
    coo.nnz += dense.nnz;
  }
  return dctSuccess;
}

}  // namespace dct
