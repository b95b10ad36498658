// dctSparseInputAllreduce: the exact sum of every rank's COO, over the
// allgather, split or dense plan of the DCT-DP allreduce, without its
// compressor (no threshold, no residual). One transaction:
//
//   local work   bind the comm's scratch (kernel context, buffers); pack
//                the message for the allgather plan when it may run
//   agreement    header allgather (args, nnz, packed bytes, and each
//                rank's message where it fits its slot: gather_slot.h);
//                the plan from the exact counts; every size checked (count
//                2^62 wraps size_t) and every buffer reserved; per plan:
//                cut into pieces or scatter into zeros; vote
//   exchange     allgatherv, the messages checked | split | recursive
//                doubling (recursive_doubling.h) | dense allreduce, into
//                the sum in scratch (accumulation type; dense: datatype)
//   outputs      the COO: the union of the gathered messages (allgather on
//                the CPU twin), split's gathered ranges (CPU twin, COO
//                alone), recursive doubling's result where it stayed
//                sparse (COO alone) or selected from the sum; capacity checked;
//                converted to the datatype, all in scratch; vote; then
//                copies into the caller's buffers, or (allgather) the
//                checked messages merged straight into `dense`
//
// Where every message came in its slot the call is the allgather plan
// without its exchange: the messages are checked and merged before the
// agreement's vote, which is the call's only vote (two collectives in all).
// A size query stops after the header allgather. Nothing reaches the
// caller's buffers before the last vote: a failure anywhere, on any rank,
// leaves them as they were. Recursive doubling (but for its sparse COO
// alone) and dense build the sum in scratch and copy it. The allgather plan merges after the vote, which on
// the host twin cannot fail once the messages are checked, and so writes
// `dense` once; split checks its gathered ranges before the vote and
// writes them after it (splitWriteRanges), its own range from scratch.
// The agreement's half (plan, sizes, buffers, local work) is
// sparse_input_prepare.cc; the outputs in scratch, sparse_input_outputs.cc;
// the state they share, sparse_input_call.h.
#include "algo/agree.h"
#include "algo/gather_slot.h"
#include "algo/packed_message.h"
#include "algo/sparse_input_call.h"
#include "base/caught.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

// The sum averaged where the op asks for it.
dctResult_t average(SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (const double factor = k.avgFactor(); factor != 1.0) {
    if (k.sumType == c->accType) DCTCHECK(c->ops->scale(c->kernels, k.sum, in.count, k.sumType, factor, in.stream));
    else DCTCHECK(c->ops->convert(c->kernels, k.sum, k.sumType, k.sum, k.sumType, in.count, factor, in.stream));
  }
  return dctSuccess;
}

// The messages from the slots summed as exchange() sums the gathered ones.
dctResult_t mergeSlots(SparseInputCall& k, const std::vector<CallHeader>& all) {
  k.sent = k.bytes;
  if (!needsSum(k)) return dctSuccess;
  DCTCHECK(mergeGathered(k.c, k.comm, all, k.sum, k.in.stream, k.in.fn, false));
  return average(k);
}

dctResult_t exchange(SparseInputCall& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.tiny) return mergeSlots(k, all);
  if (k.plan == dctAlgoAllgather) {
    k.sent = k.bytes;
    if (!needsSum(k)) return gatherPacked(c, k.comm, all, in.stream, k.clock, k.received, in.fn, true);
    DCTCHECK(gatherMerged(c, k.comm, all, k.sum, in.stream, k.clock, k.received, in.fn));
  }
  else if (k.plan == dctAlgoRecursiveDoubling) {
    DCTCHECK(rdExchange(k.rd, k.sent, k.received, in.stream));
    k.clock.lap(dctPhaseExchange);
    if (sparseRd(k)) return dctSuccess;  // no sum: partialCoo() averages
  }
  else if (k.plan == dctAlgoSplit) {
    DCTCHECK(splitExchange(c, k.comm, k.pieces, k.splitBound, k.sum, in.stream, k.clock, k.sent, k.received,
                           nullptr, k.rangeCoo ? SplitRanges::kLeave : k.direct ? SplitRanges::kCheck : SplitRanges::kWrite));
    if (k.direct || k.rangeCoo) return dctSuccess;  // averaged by deliver() or rangesCoo()
  }
  else {
    DCTCHECK(k.comm->transport->allreduce(k.comm, k.sum, k.sum, in.count, in.dtype, in.stream));
    k.sent = k.received = k.sumBytes;  // the dense plan sums in the datatype
    k.clock.lap(dctPhaseExchange);
  }
  return average(k);
}

// The direct dense result, after the vote: the allgather plan's checked
// messages merged into `dense`, or split's checked ranges written there,
// then averaged. Nothing here allocates or fails on the host twin.
dctResult_t mergeDirect(SparseInputCall& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.plan == dctAlgoSplit) DCTCHECK(splitWriteRanges(c, k.comm, k.sum, in.dense, in.stream));
  else DCTCHECK(mergeGathered(c, k.comm, all, in.dense, in.stream, in.fn, true));
  if (const double factor = k.avgFactor(); factor != 1.0)
    DCTCHECK(c->ops->scale(c->kernels, in.dense, in.count, c->accType, factor, in.stream));
  return dctSuccess;
}

// The voted result into the caller's buffers: copies, or the direct plan's
// merge (on the host twin neither can fail; a device twin's is voted by the
// caller).
dctResult_t deliver(SparseInputCall& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  const size_t valueBytes = dtypeSize(in.dtype);
  if (k.direct) {
    DCTCHECK(mergeDirect(k, all));
  } else if (in.dense) {
    const void* dense = k.denseConverts() ? c->residuals[1].as() : k.sum;
    DCTCHECK(c->ops->copy(c->kernels, in.dense, dense, in.count * valueBytes, in.stream));
  }
  if (in.wantsCoo()) {
    const SelectArgs& sel = k.coo;
    const void* values = k.cooConverts() ? c->selection.as<char>() + k.cooConverted : sel.outValues;
    DCTCHECK(c->ops->copy(c->kernels, in.outIndices, sel.outIndices, sel.nnz * c->indexBytes, in.stream));
    DCTCHECK(c->ops->copy(c->kernels, in.outValues, values, sel.nnz * valueBytes, in.stream));
  }
  return c->ops->streamEnd(c->kernels, in.stream);
}

void report(const SparseInputCall& k, uint64_t resultNnz) {
  *k.in.outNnz = resultNnz;
  if (!k.in.info) return;
  dctSparseInputInfo_t& info = *k.in.info;
  info.algorithm = k.plan;
  info.inputNnz = k.total;
  info.resultNnz = resultNnz;
  info.bytesSent = k.sent;
  info.bytesReceived = k.received;
  size_t denseBytes = 0;  // past size_t (a hashed index space): the largest value
  info.denseBytes = checkedMul(k.in.count, dtypeSize(k.in.dtype), denseBytes) ? denseBytes : UINT64_MAX;
}

}  // namespace

dctResult_t sparseInputAllreduce(dctComm_t comm, const SparseInput& in, dctResult_t localError) {
  const char* fn = in.fn;
  SparseInputCall k{in, comm};
  CallHeader mine = allreduceHeader(localError, in.count, in.dtype, in.op);
  mine.nnz = in.nnz;
  mine.configured = in.algorithm;
  mine.mode = in.query() ? 1 : 0;
  if (mine.localError == dctSuccess && !in.query()) {
    mine.localError = sparseInputScratch(comm, in, k.c);
    if (mine.localError == dctSuccess) mine.localError = k.c->rankArrays.reserve(comm->size);  // gatherMerged's
    if (mine.localError == dctSuccess) mine.localError = k.c->ops->streamBegin(k.c->kernels, in.stream);
    if (mine.localError == dctSuccess && mayRunAllgather(k)) mine.localError = packWhole(k);
    if (mine.localError == dctSuccess && !recursiveDoublingAvailable(k.c, comm)) mine.flags |= kNoPairExchange;
    if (mine.localError == dctSuccess && k.inSlot) mine.flags |= kInSlotFlag;
    if (in.dense == nullptr && in.wantsCoo()) mine.flags |= kCooAloneFlag;
    mine.bytes = k.bytes;
  }
  k.clock.lap(dctPhaseCompress);
  // The tiny path (decided in prepare()) merges before the agreement's
  // vote and has no other.
  std::vector<CallHeader> all;
  dctResult_t res = agreeOrSlots(comm, mine, all, in.stream, fn, k.tiny,
                                 [&] { return in.query() ? checkCounts(k, all) : prepare(k, all); });
  if (!k.tiny) DCTCHECK(res);
  k.clock.lap(dctPhaseAgree);
  if (in.query()) {
    k.plan = dctAlgoAuto;
    report(k, k.total < in.count ? k.total : in.count);
    return dctSuccess;
  }
  if (res == dctSuccess) res = exchange(k, all);
  if (res == dctSuccess && in.wantsCoo()) res = buildCoo(k);
  if (res == dctSuccess) res = convertOutputs(k);
  k.clock.lap(dctPhaseReduce);
  DCTCHECK(vote(comm, res, in.stream, fn, k.tiny ? "agreement" : "exchange"));
  // Alike on every rank: the same headers and plan.
  if (k.plan == dctAlgoAllgather) learnGatherSlot(comm, all);
  else learnNoSlotCall(comm);
  res = deliver(k, all);
  // Host copies cannot fail; a device twin's can, and every rank learns it.
  if (k.c->ops->device) DCTCHECK(vote(comm, res, in.stream, fn, "copy of the result"));
  report(k, in.wantsCoo() ? k.coo.nnz : 0);
  k.clock.lap(dctPhaseOther);
  DCT_TRACE("%s: plan %d%s, nnz %llu of %llu; ms: local %.2f agree %.2f exchange %.2f reduce %.2f deliver %.2f", fn,
            static_cast<int>(k.plan), k.tiny ? " (slots)" : "", static_cast<unsigned long long>(k.total),
            static_cast<unsigned long long>(in.count), k.clock.us(dctPhaseCompress) * 1e-3,
            k.clock.us(dctPhaseAgree) * 1e-3, k.clock.us(dctPhaseExchange) * 1e-3, k.clock.us(dctPhaseReduce) * 1e-3,
            k.clock.us(dctPhaseOther) * 1e-3);
  return res;
}

}  // namespace dct
