// One dctSparseAllreduce call's working state, shared by the unchunked
// transaction (sparse_allreduce.cc) and its pipelined form (pipeline.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "algo/agree.h"
#include "algo/algorithms.h"
#include "algo/split_allreduce.h"
#include "algo/split_halving.h"
#include "base/phase_timer.h"

namespace dct {

struct Step {
  const void* send;
  void* recv;
  void* target;  // where the result is built (recv, or c->staged)
  dctDataType_t targetType;  // what the target holds once the exchange is done
  dctRedOp_t op;
  dctCompressor_t c;
  dctComm_t comm;
  void* stream;
  Plan plan;
  bool sendGradientAsIs = false;  // dense plan, zero residual: send the gradient as is
  StepDraft draft{};
  Message msg{};
  size_t bytes = 0;     // this rank's message on the wire
  size_t received = 0;  // bytes from other ranks
  bool tiny = false;    // every rank's message came in its gather slot: no allgatherv, one vote
  PhaseTimer clock{};
  int averageOver = 1;  // dctAvg's divisor: the ranks whose tensors are summed
  const Nesting* nesting = nullptr;  // set inside a hierarchical step
  SplitPieces pieces{};  // split plans: this rank's message cut by range
  OwnerDraft owner{};    // global top-k: this rank's range owner's outcome
  SplitHalving halving{};  // split plans with plan.halving: the rounds
  // Pipelined attempts: elements per chunk (0: unchunked), and the bytes
  // every rank's chunks needed ([chunk * ranks + rank]), kept on commit.
  size_t chunkElems = 0;
  std::vector<uint64_t> chunkNeeds{};
};

// dctAvg's 1/P where the allgather plan's merge applies it as it builds the
// result (block by block, in cache: the scale op's bits, one pass over the
// tensor fewer), else 1: a result built in recvbuf, or finished in place in
// its staging buffer, in the tensor's type.
double mergeFactor(const Step& s);

// Elements per chunk if this step runs pipelined, else 0. Reads committed
// state and configuration only, so every rank in step decides alike (and
// the header's `chunks` double-checks it).
size_t pipelineChunkElems(const Step& s);

// The allgather plan chunk by chunk: the header agreement, then for each
// chunk its selection and a nonblocking allgather of every rank's packed
// chunk in a slot sized from the last attempt, overlapping the next chunk's
// selection and the previous chunks' merges, then the exchange vote. On
// dctSuccess either the result is in the target and `all` holds every
// rank's nnz and bytes, or `fallback` is set on every rank: a chunk did not
// fit its slot or compressStep would have re-estimated tau on drift, and
// the caller runs the unchunked step (which recomputes everything). Any
// failure on any rank: every rank returns an error.
dctResult_t pipelinedStep(Step& s, CallHeader& mine, std::vector<CallHeader>& all, bool& fallback, const char* fn);

}  // namespace dct
