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
//                the CPU twin) or selected from the sum; capacity checked;
//                converted to the datatype, all in scratch; vote; then
//                copies into the caller's buffers, or (allgather) the
//                checked messages merged straight into `dense`
//
// Where every message came in its slot the call is the allgather plan
// without its exchange: the messages are checked and merged before the
// agreement's vote, which is the call's only vote (two collectives in all).
// A size query stops after the header allgather. Nothing reaches the
// caller's buffers before the last vote: a failure anywhere, on any rank,
// leaves them as they were. The plans that build the sum during the
// exchange (split, recursive doubling, dense) build it in scratch and copy
// it; the allgather plan merges after the vote, which on the host twin
// cannot fail once the messages are checked, and so writes `dense` once.
#include "algo/algorithms.h"
#include "algo/agree.h"
#include "algo/gather_slot.h"
#include "algo/packed_message.h"
#include "algo/recursive_doubling.h"
#include "algo/split_allreduce.h"
#include "base/checked_size.h"
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
  bool packed = false;          // this rank's whole message is packed, in c->wire or its slot
  bool inSlot = false;          // in its slot (sendSlot), not in c->wire
  bool tiny = false;            // every rank's message came in its slot: no exchange
  size_t bytes = 0;             // this rank's packed message
  uint64_t total = 0;           // entries over all ranks
  std::vector<uint64_t> nnz{};  // each rank's announced entries
  void* sum = nullptr;          // where the exchange builds the sum
  dctDataType_t sumType = dctFloat32;
  size_t sumBytes = 0;          // count x the sum's type
  size_t accAll = 0;            // COO: count x the accumulation type
  size_t cooIndexBytes = 0;     // COO: room for its indices (8-aligned)
  size_t cooBytes = 0;          // COO: and its values (and them in the datatype)
  size_t cooConverted = 0;      // COO: where its values in the datatype start
  size_t splitBound = 0;        // split: every rank's pieces together, at most
  SplitPieces pieces{};
  PhaseTimer clock{};
  size_t sent = 0, received = 0;
  SelectArgs coo{};             // the sum's nonzeros, in scratch
  // The allgather plan on the host twin's union op: the COO comes from the
  // messages' entries (mergePackedCoo) instead of a select of the dense sum.
  bool unionCoo = false;
  // The allgather plan without a conversion: the dense result is merged
  // after the last vote, straight into `dense` (checked messages cannot
  // fail to merge on the host; a conversion could, so half types don't).
  bool direct = false;
  RecursiveDoubling rd{};
  size_t accBytes() const { return dtypeSize(c->accType); }
  double avgFactor() const { return in.op == dctAvg && comm->size > 1 ? 1.0 / comm->size : 1.0; }
  // The datatype's results differ from the sum's types (half types).
  bool denseConverts() const { return in.dense && sumType != in.dtype; }
  bool cooConverts() const { return in.wantsCoo() && c->accType != in.dtype; }
};

// elems x size, or a clear error: a hashed 64-bit index space (count 2^62)
// must not wrap into a short buffer.
dctResult_t bytesOf(const Call& k, uint64_t elems, size_t size, const char* what, size_t& out) {
  size_t n = 0;
  if (toSize(elems, n) && checkedMul(n, size, out)) return dctSuccess;
  return fail(k.comm, dctInvalidArgument, "%s: %s needs %llu x %zu bytes, more than size_t holds (count %zu)",
              k.in.fn, what, static_cast<unsigned long long>(elems), size, k.in.count);
}

dctResult_t reserve(const Call& k, TwinBuffer& b, size_t bytes, const char* what) {
  return reserveFor(b, bytes, k.comm, k.in.fn, what, k.in.count);
}

bool mayRunAllgather(const Call& k) {
  const int a = k.in.algorithm;
  return (a == dctAlgoAuto || a == dctAlgoAllgather) && packing::fitsOffsets(k.in.count, k.c->indexBytes);
}

// Header flags: recursive doubling cannot run on this rank; its message
// is in its slot.
constexpr int32_t kNoPairExchange = 1;
constexpr int32_t kInSlot = 2;

bool allInSlots(const std::vector<CallHeader>& all) {
  for (const CallHeader& h : all)
    if ((h.flags & kInSlot) == 0) return false;
  return true;
}

// The configured plan, or the cheapest for these exact counts. Packed
// lists have uint32 word offsets: past that size only dense runs.
// Recursive doubling needs every rank able to run it; where one cannot, a
// configured one falls back to dense (which needs no packed message).
dctAlgorithm_t choosePlan(const Call& k, const std::vector<CallHeader>& all) {
  if (!packing::fitsOffsets(k.in.count, k.c->indexBytes)) return dctAlgoDense;
  bool pairs = true;
  for (const CallHeader& h : all) pairs = pairs && (h.flags & kNoPairExchange) == 0;
  if (k.in.algorithm == dctAlgoRecursiveDoubling) return pairs ? dctAlgoRecursiveDoubling : dctAlgoDense;
  if (k.in.algorithm != dctAlgoAuto) return static_cast<dctAlgorithm_t>(k.in.algorithm);
  CostInputs inputs{k.comm->size, k.in.count, dtypeSize(k.in.dtype), static_cast<size_t>(k.c->indexBytes),
                    k.nnz.data(), k.accBytes()};
  const dctAlgorithm_t plan = planExactCounts(k.comm, inputs);
  return plan == dctAlgoRecursiveDoubling && !pairs ? dctAlgoAllgather : plan;
}

// Every message already here: the allgather plan with its exchange done,
// cheaper than any plan auto could price, unless a DCT_TUNE rule names
// another (only auto and allgather pack, so only they get here).
bool takesSlots(const Call& k, const std::vector<CallHeader>& all) {
  if (!allInSlots(all)) return false;
  if (k.in.algorithm != dctAlgoAuto) return true;
  CostInputs inputs{k.comm->size, k.in.count, dtypeSize(k.in.dtype), static_cast<size_t>(k.c->indexBytes),
                    k.nnz.data(), k.accBytes()};
  const dctAlgorithm_t rule = tunedExactCounts(k.comm, inputs);
  return rule == dctAlgoAuto || rule == dctAlgoAllgather;
}

// This rank's message in the allgather plan's form: in its slot where it
// fits (packed there straight when its bound fits), else in c->wire. The
// slot is host memory: a device twin's message never goes there.
dctResult_t packWhole(Call& k) {
  dctCompressor_t c = k.c;
  const size_t valueBytes = dtypeSize(k.in.dtype);
  const size_t slot = c->ops->device ? 0 : k.comm->gatherSlot;
  size_t room = 0;
  if (!checkedMessageRoom(k.in.nnz, c->indexBytes, valueBytes, room))
    return fail(k.comm, dctInvalidArgument, "%s: nnz %zu is too large to pack", k.in.fn, k.in.nnz);
  k.packed = true;
  if (slot > 0 && room <= slot) {
    k.inSlot = true;
    return packMessage(c, k.in.indices, k.in.values, k.in.nnz, valueBytes, 0, sendSlot(k.comm), k.bytes, k.in.stream);
  }
  DCTCHECK(reserve(k, c->wire, room, "the packed message"));
  DCTCHECK(packMessage(c, k.in.indices, k.in.values, k.in.nnz, valueBytes, 0, c->wire.as<char>(), k.bytes,
                       k.in.stream));
  if (slot == 0 || k.bytes > slot) return dctSuccess;
  k.inSlot = true;
  return c->ops->copy(c->kernels, sendSlot(k.comm), c->wire.as(), k.bytes, k.in.stream);
}

// The allgather plan's exchange sends from c->wire: a message packed into
// its slot goes there too where some other rank's did not fit.
dctResult_t wireFromSlot(const Call& k) {
  DCTCHECK(reserve(k, k.c->wire, k.bytes, "the packed message"));
  return k.c->ops->copy(k.c->kernels, k.c->wire.as(), sendSlot(k.comm), k.bytes, k.in.stream);
}

// The bound on the COO's length: its entries are distinct indices < count.
size_t cooBound(const Call& k) { return k.total < k.in.count ? static_cast<size_t>(k.total) : k.in.count; }

// Every count-sized product of the call, checked before anything is reserved.
dctResult_t sizeCall(Call& k) {
  const SparseInput& in = k.in;
  DCTCHECK(bytesOf(k, in.count, dtypeSize(k.sumType), "the sum", k.sumBytes));
  if (!in.wantsCoo()) return dctSuccess;
  const size_t bound = cooBound(k);
  size_t values = 0;
  DCTCHECK(bytesOf(k, in.count, k.accBytes(), "the sum's selection", k.accAll));
  DCTCHECK(bytesOf(k, bound, k.accBytes(), "the sum's nonzeros", values));
  DCTCHECK(bytesOf(k, bound, k.c->indexBytes, "the sum's indices", k.cooIndexBytes));
  size_t converted = 0;  // the values once more in the datatype, narrower: fits where they do
  if (k.cooConverts()) converted = bound * dtypeSize(in.dtype);
  if (!checkedAdd(k.cooIndexBytes, 7, k.cooIndexBytes) ||
      !checkedAdd(k.cooIndexBytes & ~size_t(7), values, k.cooConverted) ||
      !checkedAdd(k.cooConverted, 7, k.cooConverted) ||
      !checkedAdd(k.cooConverted & ~size_t(7), converted, k.cooBytes))
    return fail(k.comm, dctInvalidArgument, "%s: the sum's COO needs more than size_t holds", in.fn);
  k.cooIndexBytes &= ~size_t(7);  // alignedIndexBytes
  k.cooConverted &= ~size_t(7);
  return dctSuccess;
}

// The outputs' scratch. c->residuals[1] holds the sum in the other of the
// two types: widened for the select (a half dense-plan sum) or narrowed
// for `dense` (a half sum in fp32), never both. The COO: what the select
// leaves behind, and its output in c->selection.
dctResult_t reserveOutputs(const Call& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.denseConverts())  // sumType is the wider accumulation type: this fits
    DCTCHECK(reserve(k, c->residuals[1], in.count * dtypeSize(in.dtype), "the result in its datatype"));
  if (!in.wantsCoo()) return dctSuccess;
  if (k.unionCoo) return reserve(k, c->selection, k.cooBytes, "the sum's COO");
  if (k.sumType != c->accType) DCTCHECK(reserve(k, c->residuals[1], k.accAll, "the widened sum"));
  DCTCHECK(reserve(k, c->residuals[0], k.accAll, "the selection's remainder"));
  return reserve(k, c->selection, k.cooBytes, "the sum's COO");
}

// Every rank's announced nnz (strictly ascending indices below count: at
// most count each; a rank checked its own, so more is a corrupt header),
// into k.nnz, and their sum, into k.total.
dctResult_t checkCounts(Call& k, const std::vector<CallHeader>& all) {
  k.total = 0;
  k.nnz.assign(all.size(), 0);
  for (size_t r = 0; r < all.size(); r++) {
    size_t total = 0;
    if (all[r].nnz > k.in.count || !checkedAdd(k.total, all[r].nnz, total))
      return fail(k.comm, dctInternalError, "%s: rank %zu announced %llu entries for count %zu", k.in.fn, r,
                  static_cast<unsigned long long>(all[r].nnz), k.in.count);
    k.total = total;
    k.nnz[r] = all[r].nnz;
  }
  return dctSuccess;
}

// Recursive doubling: its sum with a message header's room before it, the
// rounds' bounds and buffers, this rank's input as its first partial sum.
dctResult_t prepareRecursiveDoubling(Call& k) {
  dctCompressor_t c = k.c;
  size_t room = 0;
  if (!checkedAdd(k.sumBytes, 8, room))
    return fail(k.comm, dctInvalidArgument, "%s: the sum needs more than size_t holds", k.in.fn);
  DCTCHECK(reserve(k, c->staged, room, "the sum"));
  k.sum = c->staged.as<char>() + 8;
  RecursiveDoubling& rd = k.rd;
  rd.c = c;
  rd.comm = k.comm;
  rd.count = k.in.count;
  rd.sum = static_cast<char*>(k.sum);
  rd.fn = k.in.fn;
  return rdPrepare(rd, k.nnz.data(), k.in.indices, k.in.values, k.in.nnz, k.in.dtype, k.in.stream);
}

// Whether the call builds the sum in scratch: all but the union COO alone
// and the direct dense result.
bool needsSum(const Call& k) { return !k.direct && !(k.unionCoo && !k.in.dense); }

// After the headers: every buffer of the call, and what the plan does locally.
dctResult_t prepare(Call& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  DCTCHECK(checkCounts(k, all));
  k.tiny = takesSlots(k, all);
  k.plan = k.tiny ? dctAlgoAllgather : choosePlan(k, all);
  k.sumType = k.plan == dctAlgoDense ? in.dtype : c->accType;
  if (k.plan == dctAlgoAllgather) {
    // The union's bound is the entries themselves where they fit the count.
    k.unionCoo = in.wantsCoo() && c->ops->mergePackedCoo != nullptr && k.total <= in.count;
    k.direct = in.dense != nullptr && in.dtype == c->accType && (k.unionCoo || !in.wantsCoo());
  }
  DCTCHECK(sizeCall(k));
  DCTCHECK(reserveOutputs(k));
  if (k.plan == dctAlgoRecursiveDoubling) return prepareRecursiveDoubling(k);
  if (needsSum(k)) {
    DCTCHECK(reserve(k, c->staged, k.sumBytes, "the sum"));
    k.sum = c->staged.as();
    if (!k.tiny) DCTCHECK(k.comm->transport->prepare(k.comm, k.sum, k.sumBytes, in.stream));
  }
  // Checked here unless the merge into the sum checks them as it goes.
  if (k.tiny) return viewSlots(c, k.comm, all, in.stream, k.received, in.fn, !needsSum(k));
  if (k.plan == dctAlgoAllgather) {
    if (k.inSlot) DCTCHECK(wireFromSlot(k));
    size_t gathered = 0;
    DCTCHECK(checkAnnounced(k.comm, all, in.count, dtypeSize(in.dtype), c->indexBytes, gathered, in.fn));
    DCTCHECK(reserve(k, c->gathered, gathered, "the gathered messages"));
    return k.comm->transport->prepare(k.comm, c->gathered.as(), gathered, in.stream);
  }
  if (k.plan == dctAlgoSplit) {
    // The pieces' sizes are known only to their senders: a bound every rank
    // computes alike (P pieces, each at most a whole message's room).
    for (const CallHeader& h : all) {
      size_t room = 0;
      if (!checkedMessageRoom(h.nnz, c->indexBytes, dtypeSize(in.dtype), room) ||
          !checkedMulAdd(room, static_cast<size_t>(k.comm->size), k.splitBound, k.splitBound))
        return fail(k.comm, dctInvalidArgument, "%s: the split plan's bound on its pieces overflows size_t", in.fn);
    }
    Message msg;
    msg.indices = const_cast<void*>(in.indices);
    msg.values = const_cast<void*>(in.values);
    msg.nnz = in.nnz;
    return splitPack(c, k.comm, msg, k.pieces, in.stream);
  }
  DCTCHECK(c->ops->zero(c->kernels, k.sum, k.sumBytes, in.stream));
  ScatterArgs scatter{k.sum, in.count, in.dtype, c->indexBytes, in.indices, in.values, in.nnz, true};
  return c->ops->scatterAdd(c->kernels, &scatter, in.stream);
}

// The sum averaged where the op asks for it.
dctResult_t average(Call& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (const double factor = k.avgFactor(); factor != 1.0) {
    if (k.sumType == c->accType) DCTCHECK(c->ops->scale(c->kernels, k.sum, in.count, k.sumType, factor, in.stream));
    else DCTCHECK(c->ops->convert(c->kernels, k.sum, k.sumType, k.sum, k.sumType, in.count, factor, in.stream));
  }
  return dctSuccess;
}

// The messages from the slots summed as exchange() sums the gathered ones.
dctResult_t mergeSlots(Call& k, const std::vector<CallHeader>& all) {
  k.sent = k.bytes;
  if (!needsSum(k)) return dctSuccess;
  DCTCHECK(mergeGathered(k.c, k.comm, all, k.sum, k.in.stream, k.in.fn, false));
  return average(k);
}

dctResult_t exchange(Call& k, const std::vector<CallHeader>& all) {
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
  }
  else if (k.plan == dctAlgoSplit) {
    DCTCHECK(splitExchange(c, k.comm, k.pieces, k.splitBound, k.sum, in.stream, k.clock, k.sent, k.received));
  }
  else {
    DCTCHECK(k.comm->transport->allreduce(k.comm, k.sum, k.sum, in.count, in.dtype, in.stream));
    k.sent = k.received = k.sumBytes;  // the dense plan sums in the datatype
    k.clock.lap(dctPhaseExchange);
  }
  return average(k);
}

// The COO in scratch against the caller's room for it.
dctResult_t fitsOutCapacity(const Call& k) {
  if (k.coo.selected <= k.in.outCapacity) return dctSuccess;
  return fail(k.comm, dctInvalidArgument, "%s: the sum has %zu nonzeros, outCapacity is %zu", k.in.fn, k.coo.selected,
              k.in.outCapacity);
}

// The sum's nonzeros (NaN and Inf too: the select keeps !(|x| < tau)) as
// COO in c->selection, values in the accumulation type. The sum survives:
// the select writes what it leaves behind into the spare residual buffer.
dctResult_t selectCoo(Call& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  const void* acc = k.sum;
  if (k.sumType != c->accType) {  // a half dense-plan sum: widened exactly
    DCTCHECK(c->ops->convert(c->kernels, c->residuals[1].as(), c->accType, k.sum, k.sumType, in.count, 1.0,
                             in.stream));
    acc = c->residuals[1].as();
  }
  SelectArgs& sel = k.coo;
  sel.grad = nullptr;
  sel.residualIn = acc;
  sel.residual = c->residuals[0].as();
  sel.n = in.count;
  sel.dtype = c->accType;
  sel.indexBytes = c->indexBytes;
  sel.tau = tauFloor(c);
  sel.capacity = cooBound(k);
  sel.outIndices = c->selection.as();
  sel.outValues = c->selection.as<char>() + k.cooIndexBytes;
  DCTCHECK(c->ops->selectCompact(c->kernels, &sel, in.stream));
  return fitsOutCapacity(k);
}

// The allgather plan's COO from the gathered messages' entries, as
// selectCoo would select it from their dense sum (averaged as exchange()
// averages it): the same entries and bits, without the count-sized passes.
dctResult_t unionCoo(Call& k) {
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
  SelectArgs& sel = k.coo;
  sel.outIndices = merge.outIndices;
  sel.outValues = merge.outValues;
  sel.nnz = sel.selected = merge.nnz;
  return fitsOutCapacity(k);
}

// The results in the datatype, in scratch: every step that can fail comes
// before the exchange vote.
dctResult_t convertOutputs(Call& k) {
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

// The direct allgather plan's dense result, after the vote: the checked
// messages merged into `dense`, then averaged. Nothing here allocates or
// fails on the host twin.
dctResult_t mergeDirect(Call& k, const std::vector<CallHeader>& all) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  DCTCHECK(mergeGathered(c, k.comm, all, in.dense, in.stream, in.fn, true));
  if (const double factor = k.avgFactor(); factor != 1.0)
    DCTCHECK(c->ops->scale(c->kernels, in.dense, in.count, c->accType, factor, in.stream));
  return dctSuccess;
}

// The voted result into the caller's buffers: copies, or the direct plan's
// merge (on the host twin neither can fail; a device twin's is voted by the
// caller).
dctResult_t deliver(Call& k, const std::vector<CallHeader>& all) {
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

void report(const Call& k, uint64_t resultNnz) {
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
    if (mine.localError == dctSuccess && !recursiveDoublingAvailable(k.c, comm)) mine.flags |= kNoPairExchange;
    if (mine.localError == dctSuccess && k.inSlot) mine.flags |= kInSlot;
    mine.bytes = k.bytes;
  }
  k.clock.lap(dctPhaseCompress);
  // agree() spelled out: the tiny path (decided in prepare() from the
  // gathered headers, alike on every rank whose gather succeeded) merges
  // before the agreement's vote and has no other. A rank that failed
  // before deciding votes here too, and every rank stops at this vote.
  std::vector<CallHeader> all;
  dctResult_t res = gatherHeadersAndSlots(comm, mine, all, in.stream, fn);
  if (res == dctSuccess) res = checkHeaders(comm, mine, all, fn);
  if (res == dctSuccess) res = caught(comm, fn, [&] { return in.query() ? checkCounts(k, all) : prepare(k, all); });
  if (!k.tiny) DCTCHECK(vote(comm, res, in.stream, fn, "agreement"));
  k.clock.lap(dctPhaseAgree);
  if (in.query()) {
    k.plan = dctAlgoAuto;
    report(k, k.total < in.count ? k.total : in.count);
    return dctSuccess;
  }
  if (res == dctSuccess) res = exchange(k, all);
  if (res == dctSuccess && in.wantsCoo()) res = k.unionCoo ? unionCoo(k) : selectCoo(k);
  if (res == dctSuccess) res = convertOutputs(k);
  k.clock.lap(dctPhaseReduce);
  DCTCHECK(vote(comm, res, in.stream, fn, k.tiny ? "agreement" : "exchange"));
  if (k.plan == dctAlgoAllgather) learnGatherSlot(comm, all);  // alike on every rank: the same headers and plan
  res = deliver(k, all);
  // Host copies cannot fail; a device twin's can, and every rank learns it.
  if (k.c->ops->device) DCTCHECK(vote(comm, res, in.stream, fn, "copy of the result"));
  report(k, in.wantsCoo() ? k.coo.nnz : 0);
  return res;
}

}  // namespace dct
