// DES reduce-scatter plan: the agreed row split, and the row flags of the
// last committed forward (which of this rank's partial rows went to each
// owner, and which rows each peer sent this rank), which the backward uses
// as its routes. With config->density < 1 the non-zero rows sent to peers
// are thinned to their per-row top-K in DCT-MP's row format, and the
// forward's entry masks join the row flags.
#pragma once

#include <cstddef>
#include <vector>

#include "core/alltoall_plan.h"
#include "core/twin_buffer.h"
#include "dct/dct.h"
#include "kernels/kernels.h"

namespace dct {

// One forward's row flags. sent: one block per owner q (its rows[q] rows of
// this rank's partials) at word sentAt[q]; received: one block per peer of
// this rank's own rows, maskWords(rows[me]) words each. Thinned plans add
// the entry masks of the flagged rows that travelled, peer by peer in rank
// order (flaggedSide), as the DCT-MP plan keeps them.
struct DesMasks {
  TwinBuffer sent, received;
  std::vector<uint64_t> sentRows, receivedRows;  // flagged rows per peer (host)
  MaskSet sentEntries, receivedEntries;
  // flaggedSide of sentRows and of receivedRows, filled as those are known
  // (receivedSide into room reserved before the agreement): the thinned
  // steps read them and allocate nothing after it.
  RowSide sentSide, receivedSide;
};

// The flagged rows that travel, by peer: this rank's own count left out.
RowSide flaggedSide(const std::vector<uint64_t>& flagged, int me);
// The same into `side`: allocates nothing where side has room for
// flagged.size() peers (reserveSide, which throws).
void fillFlaggedSide(const std::vector<uint64_t>& flagged, int me, RowSide& side);
void reserveSide(RowSide& side, size_t peers);

}  // namespace dct

struct dctDesPlan {
  static constexpr unsigned kMagic = 0xdc7cde51u;
  unsigned magic = kMagic;
  dctComm_t comm = nullptr;
  int rank = 0;     // this rank in comm
  uint64_t id = 0;  // the same on every rank (plans are created collectively)
  std::vector<size_t> rows, rowStart;  // P, P + 1
  std::vector<size_t> sentAt;          // P + 1: word offsets of the sent blocks
  size_t rowLength = 0;
  dctDataType_t dtype = dctFloat32;
  // Kernels: bound on the first call, from where the buffers live.
  const dct::KernelOps* ops = nullptr;
  dct::KernelContext* kernels = nullptr;
  dct::DesMasks masks[2];  // committed, and the spare a forward builds
  int committed = 0;
  bool backwardDue = false;  // a forward committed and its backward has not run
  dct::TwinBuffer wireOut, wireIn, acc;
  dctAlltoallStats_t stats{};
  // Thinning (config->density < 1; maskFormat -1: exact). tau and the
  // selection's scratch as in the DCT-MP plan; stage holds flagged rows
  // in dense form on their way to or from the wire.
  dctConfig_t config{};
  dct::RowFormat format;
  double tau = 0;
  bool haveTau = false;
  uint64_t lastEstimate = 0;
  dct::TwinBuffer stage, counts;

  bool thinned() const { return format.maskFormat >= 0; }

  size_t mine() const { return rows[rank]; }
  size_t totalRows() const { return rowStart.back(); }
};

namespace dct {

inline bool validPlan(dctDesPlan_t p) { return p != nullptr && p->magic == dctDesPlan::kMagic; }

// Fills a new plan from settings every rank agreed on (algo/ agrees on
// them); no collective. resolved.density 1 is the exact plan.
void buildDesPlan(dctDesPlan& p, const PlanPlace& at, const size_t* rowsPerRank, size_t rowLength,
                  dctDataType_t dtype, const dctConfig_t& resolved);
void desPlanDestroy(dctDesPlan_t p);
// Binds the plan's kernels to the twin owning buf (first call; later calls
// must stay in that memory space).
dctResult_t bindDesTwin(dctDesPlan_t p, const void* buf, const char* fn);
// Binds to an explicit ops table before the first call (tests: failing twins).
dctResult_t bindDesOps(dctDesPlan_t p, const KernelOps& ops, const char* fn);

}  // namespace dct
