// dctSparseInputAllreduce's agreement half (sparse_input_call.h): this
// rank's message packed for the allgather plan before the header
// allgather; from the gathered headers, the plan (configured, the tiny
// path's slots, or auto's from the exact counts), every size checked and
// every buffer reserved, and the plan's local work, all before the vote.
#include "algo/gather_slot.h"
#include "algo/packed_message.h"
#include "algo/sparse_input_call.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "core/cost_model.h"
#include "kernels/index_packing.h"
#include "transport/comm.h"

namespace dct {
namespace {

// elems x size, or a clear error: a hashed 64-bit index space (count 2^62)
// must not wrap into a short buffer.
dctResult_t bytesOf(const SparseInputCall& k, uint64_t elems, size_t size, const char* what, size_t& out) {
  size_t n = 0;
  if (toSize(elems, n) && checkedMul(n, size, out)) return dctSuccess;
  return fail(k.comm, dctInvalidArgument, "%s: %s needs %llu x %zu bytes, more than size_t holds (count %zu)",
              k.in.fn, what, static_cast<unsigned long long>(elems), size, k.in.count);
}

dctResult_t reserve(const SparseInputCall& k, TwinBuffer& b, size_t bytes, const char* what) {
  return reserveFor(b, bytes, k.comm, k.in.fn, what, k.in.count);
}

// The call's counts as the cost model takes them, alike on every rank.
CostInputs costInputs(const SparseInputCall& k, const std::vector<CallHeader>& all) {
  CostInputs inputs{k.comm->size, k.in.count, dtypeSize(k.in.dtype), static_cast<size_t>(k.c->indexBytes),
                    k.nnz.data(), k.accBytes()};
  inputs.unions = k.c->ops->mergePackedCoo != nullptr;
  inputs.cooAlone = true;
  for (const CallHeader& h : all) inputs.cooAlone = inputs.cooAlone && (h.flags & kCooAloneFlag) != 0;
  return inputs;
}

// The configured plan, or the cheapest for these exact counts. Packed
// lists have uint32 word offsets: past that size only dense runs.
// Recursive doubling needs every rank able to run it; where one cannot, a
// configured one falls back to dense (which needs no packed message).
dctAlgorithm_t choosePlan(const SparseInputCall& k, const std::vector<CallHeader>& all) {
  if (!packing::fitsOffsets(k.in.count, k.c->indexBytes)) return dctAlgoDense;
  bool pairs = true;
  for (const CallHeader& h : all) pairs = pairs && (h.flags & kNoPairExchange) == 0;
  if (k.in.algorithm == dctAlgoRecursiveDoubling) return pairs ? dctAlgoRecursiveDoubling : dctAlgoDense;
  if (k.in.algorithm != dctAlgoAuto) return static_cast<dctAlgorithm_t>(k.in.algorithm);
  const dctAlgorithm_t plan = planExactCounts(k.comm, costInputs(k, all));
  return plan == dctAlgoRecursiveDoubling && !pairs ? dctAlgoAllgather : plan;
}

// Every message already here: the allgather plan with its exchange done,
// cheaper than any plan auto could price, unless a DCT_TUNE rule names
// another (only auto and allgather pack, so only they get here).
bool takesSlots(const SparseInputCall& k, const std::vector<CallHeader>& all) {
  if (!allInSlots(all)) return false;
  if (k.in.algorithm != dctAlgoAuto) return true;
  const dctAlgorithm_t rule = tunedExactCounts(k.comm, costInputs(k, all));
  return rule == dctAlgoAuto || rule == dctAlgoAllgather;
}

// The allgather plan's exchange sends from c->wire: a message packed into
// its slot goes there too where some other rank's did not fit.
dctResult_t wireFromSlot(const SparseInputCall& k) {
  DCTCHECK(reserve(k, k.c->wire, k.bytes, "the packed message"));
  return k.c->ops->copy(k.c->kernels, k.c->wire.as(), sendSlot(k.comm), k.bytes, k.in.stream);
}
// Every count-sized product of the call, checked before anything is reserved.
dctResult_t sizeCall(SparseInputCall& k) {
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
dctResult_t reserveOutputs(const SparseInputCall& k) {
  dctCompressor_t c = k.c;
  const SparseInput& in = k.in;
  if (k.denseConverts())  // sumType is the wider accumulation type: this fits
    DCTCHECK(reserve(k, c->residuals[1], in.count * dtypeSize(in.dtype), "the result in its datatype"));
  if (!in.wantsCoo()) return dctSuccess;
  if (k.unionCoo || k.rangeCoo) return reserve(k, c->selection, k.cooBytes, "the sum's COO");  // no select
  if (k.sumType != c->accType) DCTCHECK(reserve(k, c->residuals[1], k.accAll, "the widened sum"));
  DCTCHECK(reserve(k, c->residuals[0], k.accAll, "the selection's remainder"));
  return reserve(k, c->selection, k.cooBytes, "the sum's COO");
}

// Recursive doubling: its sum with a message header's room before it, the
// rounds' bounds and buffers, this rank's input as its first partial sum.
dctResult_t prepareRecursiveDoubling(SparseInputCall& k) {
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
  rd.keepSparse = k.in.dense == nullptr && k.in.wantsCoo();  // the COO alone: from the sparse result
  return rdPrepare(rd, k.nnz.data(), k.in.indices, k.in.values, k.in.nnz, k.in.dtype, k.in.stream);
}

}  // namespace

bool mayRunAllgather(const SparseInputCall& k) {
  const int a = k.in.algorithm;
  return (a == dctAlgoAuto || a == dctAlgoAllgather) && packing::fitsOffsets(k.in.count, k.c->indexBytes);
}

// This rank's message in the allgather plan's form: in its slot where it
// fits (packed there straight when its bound fits), else in c->wire. The
// slot is host memory: a device twin's message never goes there.
dctResult_t packWhole(SparseInputCall& k) {
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

// Every rank's announced nnz (strictly ascending indices below count: at
// most count each; a rank checked its own, so more is a corrupt header),
// into k.nnz, and their sum, into k.total.
dctResult_t checkCounts(SparseInputCall& k, const std::vector<CallHeader>& all) {
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

// After the headers: every buffer of the call, and what the plan does locally.
dctResult_t prepare(SparseInputCall& k, const std::vector<CallHeader>& all) {
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
  // Split writes its dense result alone after the vote, or takes its COO
  // alone from the gathered ranges; both together come from a written sum.
  if (k.plan == dctAlgoSplit) {
    k.direct = in.dense != nullptr && in.dtype == c->accType && !in.wantsCoo();
    k.rangeCoo = in.dense == nullptr && in.wantsCoo() && c->ops->mergePackedCoo != nullptr;
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
}  // namespace dct
