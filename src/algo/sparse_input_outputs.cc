// dctSparseInputAllreduce's outputs in scratch, after the exchange and
// before the vote (sparse_input_allreduce.cc): the COO by the plan's own
// path where it has one (the allgather plan's union, split's ranges,
// recursive doubling's sparse result), else selected from the sum; both
// results in the datatype.
#include <cmath>

#include "algo/coo_merge.h"
#include "algo/packed_message.h"
#include "algo/sparse_input_call.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

// The COO in scratch against the caller's room for it.
dctResult_t fitsOutCapacity(const SparseInputCall& k) {
  if (k.coo.selected <= k.in.outCapacity) return dctSuccess;
  return fail(k.comm, dctInvalidArgument, "%s: the sum has %zu nonzeros, outCapacity is %zu", k.in.fn, k.coo.selected,
              k.in.outCapacity);
}

// A plan's own COO (not selected from the sum): k.coo, against the room.
dctResult_t listed(SparseInputCall& k, void* indices, void* values, size_t nnz) {
  SelectArgs& sel = k.coo;
  sel.outIndices = indices;
  sel.outValues = values;
  sel.nnz = sel.selected = nnz;
  return fitsOutCapacity(k);
}

// The sum's nonzeros (NaN and Inf too: the select keeps !(|x| < tau)) as
// COO in c->selection, values in the accumulation type. The sum survives:
// the select writes what it leaves behind into the spare residual buffer.
dctResult_t selectCoo(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  const void* acc = k.sum;
  if (k.sumType != c->accType) {  // a half dense-plan sum: widened exactly
    DCTCHECK(c->ops->convert(c->kernels, c->residuals[1].as(), c->accType, k.sum, k.sumType, in.count, 1.0,
                             in.stream));
    acc = c->residuals[1].as();
  }
  DCTCHECK(selectNonzeros(c, acc, c->residuals[0].as(), in.count, cooBound(k), c->selection.as(),
                          c->selection.as<char>() + k.cooIndexBytes, k.coo, in.stream));
  return fitsOutCapacity(k);
}

// The allgather plan's COO from the gathered messages' entries, as
// selectCoo would select it from their dense sum (averaged as exchange()
// averages it): the same entries and bits, without the count-sized passes.
dctResult_t unionCoo(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  const std::vector<PackedMessage>& messages = c->rankArrays.messages;
  MergeCooArgs merge{messages.data(), static_cast<int>(messages.size()), in.count, c->accType, in.dtype,
                     c->indexBytes, k.avgFactor(), tauFloor(c), c->selection.as(),
                     c->selection.as<char>() + k.cooIndexBytes, cooBound(k)};
  merge.checked = true;  // by exchange(), before its merge or as gatherPacked's check, or by viewSlots
  if (dctResult_t res = c->ops->mergePackedCoo(c->kernels, &merge, in.stream); res != dctSuccess) {
    if (res == dctOutOfMemory) return fail(k.comm, res, "%s: out of memory for the union of the messages", in.fn);
    return fail(k.comm, res, "%s: the union of the messages failed", in.fn);
  }
  return listed(k, merge.outIndices, merge.outValues, merge.nnz);
}

// Split's COO from its gathered ranges, as selectCoo would select it from
// their written and averaged sum.
dctResult_t rangesCoo(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  RangesCoo coo{k.avgFactor(), c->selection.as(), c->selection.as<char>() + k.cooIndexBytes, cooBound(k)};
  DCTCHECK(splitRangesCoo(c, k.comm, k.sum, coo, k.in.stream));
  return listed(k, coo.outIndices, coo.outValues, coo.nnz);
}

// Recursive doubling's COO alone from its sparse result, as selectCoo would
// select it from the result densified (+0 + each value) and averaged (the
// scale op's multiply): the same entries and bits, without the count-sized
// passes.
dctResult_t partialCoo(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const RdSparse sum = rdSparseResult(k.rd);
  void* const indices = c->selection.as();
  void* const values = c->selection.as<char>() + k.cooIndexBytes;
  const double factor = k.avgFactor();
  size_t kept = 0;
  coo::withTypes(c->indexBytes, c->accType, [&](auto i, auto v) {
    using I = decltype(i);
    using V = decltype(v);
    const I* idx = static_cast<const I*>(sum.indices);
    const V* val = static_cast<const V*>(sum.values);
    I* outIdx = static_cast<I*>(indices);
    V* outVal = static_cast<V*>(values);
    const V f = static_cast<V>(factor), tau = static_cast<V>(tauFloor(c));
    for (uint64_t j = 0; j < sum.nnz; j++) {  // kept <= j < the COO's bound: written whatever the test says
      V x = V(0) + val[j];
      if (factor != 1.0) x *= f;
      outIdx[kept] = idx[j];
      outVal[kept] = x;
      kept += !(std::fabs(x) < tau);  // NaN stays
    }
    return 0;
  });
  return listed(k, indices, values, kept);
}

}  // namespace

dctResult_t buildCoo(SparseInputCall& k) {
  return k.unionCoo ? unionCoo(k) : k.rangeCoo ? rangesCoo(k) : sparseRd(k) ? partialCoo(k) : selectCoo(k);
}

dctResult_t convertOutputs(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.denseConverts())
    DCTCHECK(c->ops->convert(c->kernels, c->residuals[1].as(), in.dtype, k.sum, k.sumType, in.count, 1.0,
                             in.stream));
  if (k.cooConverts())
    DCTCHECK(c->ops->convert(c->kernels, c->selection.as<char>() + k.cooConverted, in.dtype, k.coo.outValues,
                             c->accType, k.coo.nnz, 1.0, in.stream));
  return dctSuccess;
}

}  // namespace dct
