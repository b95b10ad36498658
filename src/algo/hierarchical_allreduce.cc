// Hierarchical DCT-DP allreduce (DCT_HIERARCHY): dense inside a node,
// sparse between nodes, as one transaction over every rank:
//
//   agreement        header allgather + vote over the whole comm (arguments,
//                    config, room)
//   node reduce      the node's tensors summed on its leader (dense)
//   leaders' step    sparseAllreduce among the leaders on their sums, nested:
//                    it stops short of its commit
//   node broadcast   the leader's result to its node, then a summary
//                    (status, algorithm, tau) for the others' stats
//   vote             over the whole comm: every rank's outcome
//   copy-out         in-place results leave the buffer that held them
//                    until the vote (voted on when some rank's copy can
//                    fail: a device copy)
//   commit           leaders commit their step
//
// Shapes never depend on an outcome: once the ranks have agreed, they run
// the reduce and the broadcast whatever happened (a failed leader
// broadcasts junk that nobody keeps), so no rank waits on one that gave up,
// and the vote carries any failure to every rank before anything commits.
#include "algo/agree.h"
#include "algo/gather_slot.h"
#include "algo/algorithms.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

// What a leader tells its node with the result.
struct Summary {
  int32_t status = dctSuccess;
  int32_t algorithm = dctAlgoDense;
  double threshold = 0;
};

struct Hier {
  const void* send;
  void* recv;
  size_t count;
  dctDataType_t dtype;
  dctCompressor_t c;
  dctComm_t comm;
  void* stream;
  const char* fn;
  bool leader;
  bool inPlace;
  bool nodeResultShared = false;  // the broadcast and vote ran
  bool lateVote = false;  // agreed: some rank's copy-out can fail
  Summary summary{};

  size_t bytes() const { return count * dtypeSize(dtype); }
  // Where the result waits for the vote: in place, sendbuf must survive a
  // failed step.
  void* resultUntilVote() const {
    if (!inPlace || count == 0) return recv;
    return leader ? c->nodeSum.as() : c->staged.as();
  }
};

// Room for the step, before the node agreement reports it.
dctResult_t reserve(Hier& h) {
  if (h.leader) DCTCHECK(h.c->nodeSum.reserve(h.bytes()));
  else if (h.inPlace) DCTCHECK(h.c->staged.reserve(h.bytes()));
  return h.comm->node->transport->prepare(h.comm->node, h.send, h.bytes(), h.stream);
}

// The result to the node, the summary, and the vote over every rank.
dctResult_t shareNodeResult(Hier& h, dctResult_t mine, PhaseTimer& clock) {
  h.nodeResultShared = true;
  dctComm_t node = h.comm->node;
  const Transport* t = node->transport;
  dctResult_t res = t->broadcast(node, h.resultUntilVote(), h.bytes(), 0, h.stream);
  if (mine == dctSuccess) mine = res;
  clock.lap(dctPhaseExchange);
  if (h.leader) h.summary.status = mine;
  // Into the node comm's reserved header room: nothing allocates after the agreement.
  static_assert(sizeof(Summary) <= dctComm::kHeaderRoomBytes, "a summary fits the header room");
  const Summary* all = node->headerRoom.as<Summary>();
  res = t->allgather(node, &h.summary, node->headerRoom.as(), sizeof(Summary), h.stream);
  if (mine == dctSuccess) mine = res;
  if (mine == dctSuccess && !h.leader) {
    h.summary = all[0];
    if (h.summary.status != dctSuccess)
      mine = fail(h.comm, dctInvalidUsage, "%s: this node's leader failed (%s)", h.fn,
                  dctGetErrorString(static_cast<dctResult_t>(h.summary.status)));
  }
  res = vote(h.comm, mine, h.stream, h.fn, "hierarchical step");
  clock.lap(dctPhaseAgree);
  return res;
}

// In the header's flags: this rank's copy-out can fail.
constexpr int32_t kLateCopy = 1;

// After the whole comm's vote, before any commit: an in-place result out of
// the buffer that held it until the vote, voted on where some rank's copy
// can fail.
dctResult_t copyOut(Hier& h) {
  const dctResult_t res =
      h.inPlace ? h.c->ops->copy(h.c->kernels, h.recv, h.resultUntilVote(), h.bytes(), h.stream) : dctSuccess;
  return h.lateVote ? vote(h.comm, res, h.stream, h.fn, "copy of the result") : res;
}

// A leader: its node's sum through the leaders' step, nested.
dctResult_t lead(Hier& h, const dctRedOp_t& op, dctResult_t status, PhaseTimer& clock) {
  Nesting nest;
  nest.averageOver = h.comm->size;
  nest.clock = clock;
  nest.beforeCommit = [&](dctResult_t finished, dctAlgorithm_t algorithm, double threshold, PhaseTimer& laps) {
    h.summary.algorithm = algorithm;
    h.summary.threshold = threshold;
    DCTCHECK(shareNodeResult(h, finished, laps));
    return copyOut(h);
  };
  void* nodeSum = h.c->nodeSum.as();
  dctResult_t res = sparseAllreduce(nodeSum, h.inPlace ? nodeSum : h.recv, h.count, h.dtype, op, h.c,
                                    h.comm->leaders, h.stream, status, h.fn, &nest);
  if (!h.nodeResultShared) return shareNodeResult(h, res, clock);
  return res;
}

// A rank that is not a leader: the result, and its stats from the summary.
dctResult_t follow(Hier& h, dctResult_t status, PhaseTimer& clock) {
  dctCompressor_t c = h.c;
  DCTCHECK(shareNodeResult(h, status, clock));
  DCTCHECK(copyOut(h));
  StepDraft draft{};
  draft.tau = c->tau;
  draft.threshold = h.summary.threshold;
  commitStep(c, draft, 0, 0, static_cast<dctAlgorithm_t>(h.summary.algorithm));
  clock.lap(dctPhaseOther);
  clock.record(c->stats.phaseUs, c->stats.totalPhaseUs);
  return dctSuccess;
}

}  // namespace

dctResult_t hierarchicalAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                                  const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                                  dctResult_t localError, const char* fn) {
  dctComm_t node = comm->node;
  const bool leader = comm->leaders != nullptr;
  const unsigned long long failures = threadFailureCount();
  PhaseTimer clock;
  Hier h{sendbuf, recvbuf, count, dtype, c, comm, stream, fn, leader, sendbuf == recvbuf};
  CallHeader mine = allreduceHeader(localError, count, dtype, op);
  if (mine.localError == dctSuccess && count) {
    stampConfig(mine, c->config, kPathHierarchical);
    mine.localError = reserve(h);
    if (h.inPlace && c->ops->device) mine.flags |= kLateCopy;  // a host copy cannot fail
  }
  // Over the whole comm, like the flat and 1-bit paths' first exchange: a
  // rank whose compressor differs or is missing meets the others in the
  // same collective, whichever path it took.
  // The leaders' nested step starts from this clock: auto does not count
  // the wait here for the comm's late ranks.
  std::vector<CallHeader> all;
  dctResult_t res = agree(comm, mine, all, stream, fn, [&] {
    clock.lapWaiting();
    return dctSuccess;
  });
  for (const CallHeader& other : all) h.lateVote = h.lateVote || (other.flags & kLateCopy);
  clock.lap(dctPhaseAgree);
  if (res == dctSuccess) {
    dctResult_t reduced = dctSuccess;
    if (count) reduced = node->transport->reduce(node, sendbuf, leader ? c->nodeSum.as() : nullptr, count, dtype, 0, stream);
    clock.lap(dctPhaseReduce);
    if (leader) res = lead(h, op, reduced, clock);
    else res = count ? follow(h, reduced, clock) : shareNodeResult(h, reduced, clock);  // count 0: no step to count
  }
  // Messages recorded on the node or leader comms belong to the caller's.
  if (res != dctSuccess && threadFailureCount() != failures) comm->setLastError(threadLastErrorMessage());
  if (res == dctSuccess) learnNoSlotCall(comm);  // every rank alike: its headers carried the slot for nothing
  return res;
}

}  // namespace dct
