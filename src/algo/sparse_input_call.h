// One dctSparseInputAllreduce call as its two halves share it:
// sparse_input_prepare.cc decides the plan from the gathered headers and
// sizes, reserves and does the call's local work before the agreement's
// vote; sparse_input_allreduce.cc runs the transaction, the exchange and
// the outputs.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/recursive_doubling.h"
#include "algo/split_allreduce.h"
#include "base/dtype.h"
#include "base/phase_timer.h"
#include "core/compressor.h"

namespace dct {

struct SparseInputCall {
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
  // The allgather or split plan without a conversion: the dense result is
  // written after the last vote, straight into `dense` (checked messages
  // cannot fail to merge on the host; a conversion could, so half types
  // don't). Split keeps its own range's sum in scratch until then.
  bool direct = false;
  // Split's COO alone on the host twin: from the gathered ranges
  // (splitRangesCoo) instead of a select of the written sum.
  bool rangeCoo = false;
  RecursiveDoubling rd{};
  size_t accBytes() const { return dtypeSize(c->accType); }
  double avgFactor() const { return in.op == dctAvg && comm->size > 1 ? 1.0 / comm->size : 1.0; }
  // The datatype's results differ from the sum's types (half types).
  bool denseConverts() const { return in.dense && sumType != in.dtype; }
  bool cooConverts() const { return in.wantsCoo() && c->accType != in.dtype; }
};

// Header flags: recursive doubling cannot run on this rank (kInSlotFlag,
// gather_slot.h: its message is in its slot); this rank wants the COO
// alone (the plans' costs count it where every rank does).
constexpr int32_t kNoPairExchange = 1;
constexpr int32_t kCooAloneFlag = 1 << 1;

// The bound on the COO's length: its entries are distinct indices < count.
inline size_t cooBound(const SparseInputCall& k) { return k.total < k.in.count ? static_cast<size_t>(k.total) : k.in.count; }


// Whether the call builds the sum in scratch: all but the union COO alone
// and the allgather plan's direct dense result.
inline bool needsSum(const SparseInputCall& k) {
  return !(k.direct && k.plan == dctAlgoAllgather) && !(k.unionCoo && !k.in.dense);
}


// Recursive doubling's result stayed sparse (the COO alone was asked for):
// no sum was built.
inline bool sparseRd(const SparseInputCall& k) {
  return k.plan == dctAlgoRecursiveDoubling && k.rd.keepSparse && !k.rd.dense;
}

// The outputs in scratch, before the exchange vote (sparse_input_outputs.cc):
// the sum's COO in c->selection (k.coo) by the plan's path, capacity
// checked; then both results in the datatype where it is not the sum's.
// Every step that can fail comes before the vote.
dctResult_t buildCoo(SparseInputCall& k);
dctResult_t convertOutputs(SparseInputCall& k);

// Whether the allgather plan may run: this rank packs its message for it.
bool mayRunAllgather(const SparseInputCall& k);

// This rank's message in the allgather plan's form: in its slot where it
// fits (packed there straight when its bound fits), else in c->wire.
dctResult_t packWhole(SparseInputCall& k);

// Every rank's announced nnz checked, into k.nnz, their sum into k.total.
dctResult_t checkCounts(SparseInputCall& k, const std::vector<CallHeader>& all);

// After the headers: the plan, every buffer of the call, and what the plan
// does locally, before the agreement's vote.
dctResult_t prepare(SparseInputCall& k, const std::vector<CallHeader>& all);

}  // namespace dct
