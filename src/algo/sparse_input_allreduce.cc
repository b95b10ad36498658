// dctSparseInputAllreduce: the exact sum of every rank's COO, over the
// allgather, split or dense plan of the DCT-DP allreduce, without its
// compressor (no threshold, no residual). One transaction:
//
//   local work   bind the comm's scratch (kernel context, buffers); pack
//                the message for the allgather plan when it may run
//   agreement    header allgather (args, nnz, packed bytes); the plan from
//                the exact counts; per plan: reserve, cut into pieces, or
//                scatter into zeros; vote
//   exchange     allgatherv + rank-order merge | split | dense allreduce,
//                into the sum buffer (accumulation type; dense: datatype)
//   outputs      the COO selected from the sum into scratch; capacity
//                checked; vote; then dense and COO copied out
//
// A size query stops after the header allgather. Nothing reaches the
// caller's buffers before the last vote except the sum itself when it is
// built in `dense` (fp32/fp64 without a COO), which needs no copy.
#include "algo/algorithms.h"
#include "algo/agree.h"
#include "algo/packed_message.h"
#include "algo/split_allreduce.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/cost_model.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

struct Call {
  const SparseInput& in;
  dctComm_t comm;
  dctCompressor_t c = nullptr;  // the comm's scratch
  dctAlgorithm_t plan = dctAlgoAllgather;
  bool packed = false;          // c->wire holds this rank's whole message
  size_t bytes = 0;             // this rank's packed message
  uint64_t total = 0;           // entries over all ranks
  void* sum = nullptr;          // where the exchange builds the sum
  dctDataType_t sumType = dctFloat32;
  SplitPieces pieces{};
  PhaseTimer clock{};
  size_t sent = 0, received = 0;
  SelectArgs coo{};             // the sum's nonzeros, in scratch
  size_t accBytes() const { return dtypeSize(c->accType); }
  bool sumInDense() const { return sum == in.dense; }
};

bool mayRunAllgather(const Call& k) {
  const int a = k.in.algorithm;
  return (a == dctAlgoAuto || a == dctAlgoAllgather) && packing::fitsOffsets(k.in.count, k.c->indexBytes);
}

// The configured plan, or the cheapest for these exact counts. Packed
// lists have uint32 word offsets: past that size only dense runs.
dctAlgorithm_t choosePlan(const Call& k, const std::vector<CallHeader>& all) {
  if (!packing::fitsOffsets(k.in.count, k.c->indexBytes)) return dctAlgoDense;
  if (k.in.algorithm != dctAlgoAuto) return static_cast<dctAlgorithm_t>(k.in.algorithm);
  std::vector<uint64_t> nnz(all.size());
  for (size_t r = 0; r < all.size(); r++) nnz[r] = all[r].nnz;
  CostInputs inputs{k.comm->size, k.in.count, dtypeSize(k.in.dtype), static_cast<size_t>(k.c->indexBytes),
                    nnz.data(), k.accBytes()};
  return planExactCounts(k.comm, inputs);
}

// This rank's message in the allgather plan's form, in c->wire.
dctResult_t packWhole(Call& k) {
  dctCompressor_t c = k.c;
  const size_t valueBytes = dtypeSize(k.in.dtype);
  DCTCHECK(c->wire.reserve(packedMessageRoom(k.in.nnz, c->indexBytes, valueBytes)));
  DCTCHECK(packMessage(c, k.in.indices, k.in.values, k.in.nnz, valueBytes, 0, c->wire.as<char>(), k.bytes,
                       k.in.stream));
  k.packed = true;
  return dctSuccess;
}

// After the headers: the sum's buffer and what the plan does locally.
dctResult_t prepare(Call& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  k.plan = choosePlan(k, all);
  for (const CallHeader& h : all) k.total += h.nnz;
  k.sumType = k.plan == dctAlgoDense ? in.dtype : c->accType;
  const bool direct = in.dense && k.sumType == in.dtype && !in.wantsCoo();
  if (direct) k.sum = in.dense;
  else {
    DCTCHECK(c->staged.reserve(in.count * dtypeSize(k.sumType)));
    k.sum = c->staged.as();
  }
  const size_t sumBytes = in.count * dtypeSize(k.sumType);
  DCTCHECK(k.comm->transport->prepare(k.comm, k.sum, sumBytes, in.stream));
  if (k.plan == dctAlgoAllgather) {
    size_t gathered = 0;
    for (const CallHeader& h : all) gathered += h.bytes;
    DCTCHECK(c->gathered.reserve(gathered));
    return k.comm->transport->prepare(k.comm, c->gathered.as(), gathered, in.stream);
  }
  if (k.plan == dctAlgoSplit) {
    Message msg;
    msg.indices = const_cast<void*>(in.indices);
    msg.values = const_cast<void*>(in.values);
    msg.nnz = in.nnz;
    return splitPack(c, k.comm, msg, k.pieces, in.stream);
  }
  DCTCHECK(c->ops->zero(c->kernels, k.sum, sumBytes, in.stream));
  ScatterArgs scatter{k.sum, in.count, in.dtype, c->indexBytes, in.indices, in.values, in.nnz, true};
  return c->ops->scatterAdd(c->kernels, &scatter, in.stream);
}

dctResult_t exchange(Call& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.plan == dctAlgoAllgather) {
    DCTCHECK(gatherMerged(c, k.comm, all, k.sum, in.stream, k.clock, k.received, in.fn));
    k.sent = k.bytes;
  }
  else if (k.plan == dctAlgoSplit) {
    // The pieces' sizes are known only to their senders: a bound every rank
    // computes alike (P pieces, each at most a whole message's room).
    size_t bound = 0;
    for (const CallHeader& h : all)
      bound += k.comm->size * packedMessageRoom(h.nnz, c->indexBytes, dtypeSize(in.dtype));
    DCTCHECK(splitExchange(c, k.comm, k.pieces, bound, k.sum, in.stream, k.clock, k.sent, k.received));
  }
  else {
    DCTCHECK(k.comm->transport->allreduce(k.comm, k.sum, k.sum, in.count, in.dtype, in.stream));
    k.sent = k.received = in.count * dtypeSize(in.dtype);
    k.clock.lap(dctPhaseExchange);
  }
  if (in.op == dctAvg && k.comm->size > 1) {
    const double factor = 1.0 / k.comm->size;
    if (k.sumType == c->accType) DCTCHECK(c->ops->scale(c->kernels, k.sum, in.count, k.sumType, factor, in.stream));
    else DCTCHECK(c->ops->convert(c->kernels, k.sum, k.sumType, k.sum, k.sumType, in.count, factor, in.stream));
  }
  return dctSuccess;
}

// The sum's nonzeros (NaN and Inf too: the select keeps !(|x| < tau)) as
// COO in c->selection, values in the accumulation type. The sum survives:
// the select writes what it leaves behind into the spare residual buffer.
dctResult_t selectCoo(Call& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  const size_t bound = k.total < in.count ? k.total : in.count;
  const void* acc = k.sum;
  if (k.sumType != c->accType) {  // a half dense-plan sum: widened exactly
    DCTCHECK(c->residuals[1].reserve(in.count * k.accBytes()));
    DCTCHECK(c->ops->convert(c->kernels, c->residuals[1].as(), c->accType, k.sum, k.sumType, in.count, 1.0,
                             in.stream));
    acc = c->residuals[1].as();
  }
  DCTCHECK(c->residuals[0].reserve(in.count * k.accBytes()));
  const size_t indexBytes = alignedIndexBytes(bound, c->indexBytes);
  DCTCHECK(c->selection.reserve(indexBytes + bound * k.accBytes()));
  SelectArgs& sel = k.coo;
  sel.grad = nullptr;
  sel.residualIn = acc;
  sel.residual = c->residuals[0].as();
  sel.n = in.count;
  sel.dtype = c->accType;
  sel.indexBytes = c->indexBytes;
  sel.tau = tauFloor(c);
  sel.capacity = bound;
  sel.outIndices = c->selection.as();
  sel.outValues = c->selection.as<char>() + indexBytes;
  DCTCHECK(c->ops->selectCompact(c->kernels, &sel, in.stream));
  if (sel.selected > in.outCapacity)
    return fail(k.comm, dctInvalidArgument, "%s: the sum has %zu nonzeros, outCapacity is %zu", in.fn, sel.selected,
                in.outCapacity);
  return dctSuccess;
}

// Copies the voted result into the caller's buffers.
dctResult_t deliver(Call& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (in.dense && !k.sumInDense()) {
    if (k.sumType == in.dtype)
      DCTCHECK(c->ops->copy(c->kernels, in.dense, k.sum, in.count * dtypeSize(in.dtype), in.stream));
    else DCTCHECK(c->ops->convert(c->kernels, in.dense, in.dtype, k.sum, k.sumType, in.count, 1.0, in.stream));
  }
  if (in.wantsCoo()) {
    const SelectArgs& sel = k.coo;
    DCTCHECK(c->ops->copy(c->kernels, in.outIndices, sel.outIndices, sel.nnz * c->indexBytes, in.stream));
    DCTCHECK(c->ops->convert(c->kernels, in.outValues, in.dtype, sel.outValues, c->accType, sel.nnz, 1.0, in.stream));
  }
  return c->ops->streamEnd(c->kernels, in.stream);
}

void report(const Call& k, uint64_t resultNnz) {
  *k.in.outNnz = resultNnz;
  if (!k.in.info) return;
  dctSparseInputInfo_t& info = *k.in.info;
  info.algorithm = k.plan;
  info.inputNnz = k.total;
  info.resultNnz = resultNnz;
  info.bytesSent = k.sent;
  info.bytesReceived = k.received;
  info.denseBytes = k.in.count * dtypeSize(k.in.dtype);
}

// The buffer that tells the twin: every buffer of a call is in one space.
const void* sample(const SparseInput& in) {
  for (const void* p : std::initializer_list<const void*>{in.indices, in.dense, in.outIndices, in.values, in.outValues})
    if (p) return p;
  return nullptr;
}

}  // namespace

dctResult_t sparseInputScratch(dctComm_t comm, const SparseInput& in, dctCompressor_t& c) {
  c = comm->sparseInput;
  const bool device = twinFor(sample(in)).device;
  if (c && c->count == in.count && c->dtype == in.dtype && c->ops && c->ops->device == device) return dctSuccess;
  if (c) compressorDestroy(c);
  comm->sparseInput = c = nullptr;
  // A config of its own: the comm's DCT_* defaults shape nothing here.
  dctConfig_t exact = DCT_CONFIG_INITIALIZER;
  exact.density = 1;
  exact.thresholdInterval = 1;
  exact.errorFeedback = 0;
  exact.warmupSteps = 0;
  exact.thresholdMethod = dctThresholdExact;
  exact.algorithm = dctAlgoAuto;
  exact.seed = 0;
  exact.rowSelection = dctRowTopK;
  exact.wireType = kWireTypeOfTensor;
  exact.compressor = dctCompressorTopk;
  DCTCHECK(compressorCreate(comm, comm->size, in.count, in.dtype, exact, &c, comm->rank));
  if (dctResult_t res = bindOps(c, twinFor(sample(in)), in.fn, false); res != dctSuccess) {
    compressorDestroy(c);
    c = nullptr;
    return res;
  }
  comm->sparseInput = c;
  return dctSuccess;
}

dctResult_t sparseInputAllreduce(dctComm_t comm, const SparseInput& in, dctResult_t localError) {
  const char* fn = in.fn;
  Call k{in, comm};
  CallHeader mine = allreduceHeader(localError, in.count, in.dtype, in.op);
  mine.nnz = in.nnz;
  mine.configured = in.algorithm;
  mine.mode = in.query() ? 1 : 0;
  if (mine.localError == dctSuccess && !in.query()) {
    mine.localError = sparseInputScratch(comm, in, k.c);
    if (mine.localError == dctSuccess) mine.localError = k.c->rankArrays.reserve(comm->size);  // gatherMerged's
    if (mine.localError == dctSuccess) mine.localError = k.c->ops->streamBegin(k.c->kernels, in.stream);
    if (mine.localError == dctSuccess && mayRunAllgather(k)) mine.localError = packWhole(k);
    mine.bytes = k.bytes;
  }
  k.clock.lap(dctPhaseCompress);
  std::vector<CallHeader> all;
  DCTCHECK(agree(comm, mine, all, in.stream, fn, [&] { return in.query() ? dctSuccess : prepare(k, all); }));
  k.clock.lap(dctPhaseAgree);
  if (in.query()) {
    for (const CallHeader& h : all) k.total += h.nnz;
    k.plan = dctAlgoAuto;
    report(k, k.total < in.count ? k.total : in.count);
    return dctSuccess;
  }
  dctResult_t res = exchange(k, all);
  if (res == dctSuccess && in.wantsCoo()) res = selectCoo(k);
  k.clock.lap(dctPhaseReduce);
  DCTCHECK(vote(comm, res, in.stream, fn, "exchange"));
  res = deliver(k);
  // Host copies cannot fail; a device twin's can, and every rank learns it.
  if (k.c->ops->device) DCTCHECK(vote(comm, res, in.stream, fn, "copy of the result"));
  report(k, in.wantsCoo() ? k.coo.nnz : 0);
  return res;
}

}  // namespace dct
