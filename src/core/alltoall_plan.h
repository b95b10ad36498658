// DCT-MP all-to-all plan: the agreed split, the wire format, and the masks
// of the last committed forward (both sides), which the backward reuses.
#pragma once

#include <cstddef>
#include <vector>

#include "core/twin_buffer.h"
#include "dct/dct.h"
#include "kernels/kernels.h"

namespace dct {

// The rows of one side (what this rank sends, or receives), by peer: peer
// q's rows start at row rowStart[q]; its entry offsets (rows + 1 of them,
// from 0) start at rowStart[q] + q in `offsets`.
struct RowSide {
  std::vector<size_t> rows, rowStart;  // P, P + 1
  size_t offsetsAt(int q) const { return rowStart[q] + q; }
  size_t totalRows() const { return rowStart.back(); }
};

// One forward's masks on one side, in the twin's memory.
struct MaskSet {
  TwinBuffer mask;     // totalRows * maskWords(D) words
  TwinBuffer offsets;  // totalRows + P uint64
  std::vector<uint64_t> entries;  // per peer (host)
};

// Byte layout of one peer's block on the wire: [counts][mask][values], each
// section padded to 8 bytes so every block and section stays aligned.
struct BlockLayout {
  size_t countsAt = 0, maskAt = 0, valuesAt = 0, bytes = 0;
};

// The row wire format a density fixes (also the DES reduce-scatter's
// thinned rows): K kept per row (nominal for dctRowThreshold), the mask
// format (-1 plain rows, 0 bitmap, 1/2/4 index bytes), per-row count width,
// and the type values travel in (config.wireType resolved).
struct RowFormat {
  size_t rowLength = 0;
  dctDataType_t dtype = dctFloat32;
  dctDataType_t valueType = dctFloat32;
  size_t k = 0;
  int maskFormat = -1;
  int countBytes = 1;
};

}  // namespace dct

struct dctAlltoallPlan {
  static constexpr unsigned kMagic = 0xdc7ca2a1u;
  unsigned magic = kMagic;
  dctComm_t comm = nullptr;
  uint64_t id = 0;  // the same on every rank (plans are created collectively)
  dct::RowSide send, recv;
  size_t rowLength = 0;
  dctDataType_t dtype = dctFloat32;
  dctDataType_t wireType = dctFloat32;  // the values on the wire (config.wireType, resolved)
  dctConfig_t config{};
  size_t k = 0;        // entries kept per row (nominal for dctRowThreshold)
  int maskFormat = 0;  // -1 plain rows, 0 bitmap, 1/2/4 index bytes
  int countBytes = 1;  // per-row counts on the wire (rows of varying size)
  // Kernels: bound on the first call, from where the buffers live.
  const dct::KernelOps* ops = nullptr;
  dct::KernelContext* kernels = nullptr;
  // Masks of the committed forward and the spare a forward builds, per side.
  dct::MaskSet sent[2], received[2];
  int committed = 0;
  bool backwardDue = false;  // a forward committed and its backward has not run
  dct::TwinBuffer counts;    // per send row (uint32), this forward
  dct::TwinBuffer wireOut, wireIn;
  int chunks = 0;  // the pipelined forward's (alltoall_call.h: forwardChunks); 0: unchunked
  double tau = 0;  // dctRowThreshold
  bool haveTau = false;
  uint64_t lastEstimate = 0;
  dctAlltoallStats_t stats{};
};

namespace dct {

inline bool validPlan(dctAlltoallPlan_t p) { return p != nullptr && p->magic == dctAlltoallPlan::kMagic; }

// Entries kept per row for a density: ceil(density * D) (a hair under, so
// that 0.03 * 100 is 3, not 4), at least 1, at most D.
size_t rowKeep(double density, size_t rowLength);
// Wire mask format for k of D: -1 plain rows when k >= D, else the smaller
// of the bitmap (ceil(D/8) bytes per row) and k indices of fitted width.
int rowMaskFormat(size_t k, size_t rowLength);
RowFormat rowFormat(double density, size_t rowLength, dctDataType_t dtype);
BlockLayout blockLayout(const RowFormat& f, size_t rows, uint64_t entries, bool withCounts);
BlockLayout blockLayout(const dctAlltoallPlan& p, size_t rows, uint64_t entries, bool withCounts);

// Where a new plan sits: its comm, this rank among `ranks`, and the id
// every rank gave it (plans are created collectively: algo/, which agrees
// on the settings first).
struct PlanPlace {
  dctComm_t comm = nullptr;
  int rank = 0, ranks = 1;
  uint64_t id = 0;
};
// Fills a new plan from settings every rank agreed on; no collective.
void buildAlltoallPlan(dctAlltoallPlan& p, const PlanPlace& at, const size_t* sendRows, const size_t* recvRows,
                       size_t rowLength, dctDataType_t dtype, const dctConfig_t& resolved);
void alltoallPlanDestroy(dctAlltoallPlan_t p);
// Binds the plan's kernels to the twin owning buf (first call; later calls
// must stay in that memory space).
dctResult_t bindPlanTwin(dctAlltoallPlan_t p, const void* buf, const char* fn);
// Binds to an explicit ops table before the first call (tests: failing twins).
dctResult_t bindPlanOps(dctAlltoallPlan_t p, const KernelOps& ops, const char* fn);

}  // namespace dct
