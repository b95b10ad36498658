/* libdct: plans for model-parallel row exchanges: the sparse all-to-all
 * (DCT-MP) and DES partial-result aggregation. Included by dct.h. */
#ifndef DCT_ALLTOALL_H_
#define DCT_ALLTOALL_H_

#include "dct/dct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* DCT-MP traffic of an all-to-all plan. Bytes are payload bytes this rank
 * sent to / received from the other ranks (its own rows excluded); "dense"
 * is what MPI_Alltoallv of the full rows would move. */
typedef struct {
  uint64_t forwardSteps;
  uint64_t backwardSteps;
  uint64_t forwardBytesSent;      /* last forward */
  uint64_t forwardBytesReceived;
  uint64_t backwardBytesSent;     /* last backward */
  uint64_t backwardBytesReceived;
  uint64_t denseBytesSent;        /* per call, either direction */
  uint64_t denseBytesReceived;
  uint64_t keptEntries;           /* entries this rank kept in its last forward */
  uint64_t nonFinite;             /* NaN/Inf among them (always kept) */
  double density;                 /* keptEntries / (rows sent * rowLength) */
  double threshold;               /* tau in use (dctRowThreshold), else 0 */
  int maskFormat;                 /* wire mask: 0 bitmap, 1/2/4 index bytes, -1 none (K >= rowLength) */
  uint64_t totalBytesSent;        /* both directions, since creation */
  uint64_t totalBytesReceived;
  uint64_t totalDenseBytes;       /* what dense would have sent */
} dctAlltoallStats_t;

/* --- DCT-MP: sparse all-to-all at a model-parallel boundary ---
 * A plan fixes the split: rank p sends sendRows[q] rows to each rank q and
 * receives recvRows[q] rows from it (uneven and zero splits allowed; every
 * rank's sendRows[q] must equal rank q's recvRows[p]). Rows are rowLength
 * elements, laid out as in MPI_Alltoallv: sendbuf holds the rows for rank 0,
 * then those for rank 1, ...; recvbuf likewise by source rank.
 * Forward keeps K = ceil(density * rowLength) entries per row
 * (config.rowSelection; NaN/Inf always kept) and sends them as (index,
 * value), indices 1, 2 or 4 bytes wide as rowLength needs, or as a
 * rowLength-bit bitmap plus values when that is smaller, or as plain rows
 * when K >= rowLength (lossless). The receiver writes dense rows, zeros
 * elsewhere. Backward sends the gradient of the received rows back along the
 * reverse route, values only at the forward's kept positions (no indices);
 * the original sender gets dense gradient rows, zeros off the mask.
 * config.wireType narrower than the rows (fp32/fp64 rows as fp16/bf16
 * values, fp64 as fp32) sends every value, both ways, rounded once to it
 * (to nearest even; fp64 reaches the half types through fp32, a double
 * rounding) and widened back exactly: half the value bytes of fp32 rows.
 * The masks are chosen on the rows as given. Magnitudes past the type's
 * range arrive as +-Inf (fp16: |x| >= 65520), below its subnormals as
 * +-0, NaN as NaN; fp16 keeps 11 significant bits (relative error
 * <= 2^-11), bf16 8 (<= 2^-8) with fp32's range. The wire type is part of
 * the plan and must match on every rank; the stats count bytes in it.
 * There is no error feedback: activations belong to one sample and step,
 * so the rounding and the mask are the only losses.
 * Plan creation and both calls are collective; arguments that disagree
 * across ranks give an error on every rank. A failed call changes nothing
 * (the previous forward's masks stay in effect). Host buffers use the CPU
 * kernels; device buffers (stream = cudaStream_t) the CUDA ones. */
DCT_EXPORT dctResult_t dctAlltoallPlanCreate(dctComm_t comm, const size_t* sendRows,
                                  const size_t* recvRows, size_t rowLength,
                                  dctDataType_t datatype, const dctConfig_t* config,
                                  dctAlltoallPlan_t* plan);
DCT_EXPORT dctResult_t dctAlltoallPlanDestroy(dctAlltoallPlan_t plan);
DCT_EXPORT dctResult_t dctAlltoallPlanGetStats(dctAlltoallPlan_t plan, dctAlltoallStats_t* stats);
/* Forward: recvbuf = the masked rows from every rank. Not in place. */
DCT_EXPORT dctResult_t dctSparseAlltoall(dctAlltoallPlan_t plan, const void* sendbuf, void* recvbuf,
                              void* stream);
/* Backward, once per forward: gradSendbuf is shaped like the forward's
 * recvbuf (gradients of the received rows), gradRecvbuf like its sendbuf.
 * Before any forward, or a second time: dctInvalidUsage on every rank. */
DCT_EXPORT dctResult_t dctSparseAlltoallBackward(dctAlltoallPlan_t plan, const void* gradSendbuf,
                                      void* gradRecvbuf, void* stream);

/* --- DES: partial-result aggregation of rows that are already sparse --- */
/* DES (Distributed Equivalent Substitution) partial-result aggregation: a
 * sparse reduce-scatter of rows. Every rank holds one partial row (rowLength
 * elements) for every sample of the global batch, laid out by owner: the
 * rowsPerRank[0] rows of rank 0's samples, then rank 1's, ...; the forward
 * gives rank q the sum over ranks of the partials of its rowsPerRank[q]
 * rows, sending only non-zero rows (a row bitmap plus their values): exact
 * and lossless unless thinned (below). The backward sends the gradient of
 * the summed rows back to exactly the ranks whose partial row was non-zero
 * (values only, the forward's row masks); rows whose partial was zero get
 * zeros. For a
 * sum-pooled embedding bag sharded by rows this is the forward and backward
 * of the pooling. rowsPerRank (comm size entries, zeros allowed) must be the
 * same on every rank. A row is non-zero when any entry is other than +-0
 * (NaN and Inf count); a rank's own rows never go on the wire, and a peer
 * with no non-zero row for an owner sends it nothing. config may be NULL:
 * exact. An explicit config->density < 1 (lossy, off by default;
 * DCT_DENSITY does not apply) also thins every non-zero row sent to a peer
 * to K = ceil(density * rowLength) entries chosen as dctSparseAlltoall
 * chooses them (config.rowSelection: top-K, or tau re-estimated every
 * thresholdInterval steps on the rows this rank sends; NaN/Inf always
 * kept) and sends them in its wire format after the row bitmap (entry
 * indices or a bitmap, per-row counts only when rows differ from K); the
 * owner adds each peer's kept entries, zeros elsewhere, and its own rows
 * whole (they never travel); the backward returns gradient values only at
 * the kept entries. density and rowSelection must match on every rank.
 * Plan creation and both calls are collective: a rank whose arguments are
 * bad returns dctInvalidArgument and every other rank dctInvalidUsage
 * (arguments that disagree across ranks: dctInvalidUsage everywhere), with
 * nothing written; a failed call changes nothing (the previous forward's
 * row flags stay in effect); host buffers use the CPU kernels, device
 * buffers (stream = cudaStream_t) the CUDA ones. dctAlltoallStats_t
 * reports the traffic (keptEntries: entries this rank sent to peers, whole
 * non-zero rows or their kept entries; nonFinite: NaN/Inf among them;
 * density: keptEntries over the entries of every row bound for a peer;
 * threshold: tau in use (thinned dctRowThreshold), else 0; maskFormat: the
 * entry mask format as the all-to-all's, -1 exact; dense bytes: what a
 * dense reduce-scatter of the same rows would move). */
typedef struct dctDesPlan* dctDesPlan_t;
DCT_EXPORT dctResult_t dctDesPlanCreate(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength,
                                        dctDataType_t datatype, const dctConfig_t* config, dctDesPlan_t* plan);
DCT_EXPORT dctResult_t dctDesPlanDestroy(dctDesPlan_t plan);
DCT_EXPORT dctResult_t dctDesPlanGetStats(dctDesPlan_t plan, dctAlltoallStats_t* stats);
/* Forward: summed = the sum over ranks of their partial rows of this rank's
 * samples (rowsPerRank[me] rows). Sums as dctSparseInputAllreduce's: rank
 * order from +0, fp32 for half types, rounded once. Not in place. */
DCT_EXPORT dctResult_t dctDesReduceScatter(dctDesPlan_t plan, const void* partials, void* summed, void* stream);
/* Backward, once per forward: gradSummed is shaped like summed, gradPartials
 * like partials (the gradient rows, zeros where this rank's forward partial
 * row was zero, and for thinned rows off their kept entries). Before any
 * forward, or a second time: dctInvalidUsage. */
DCT_EXPORT dctResult_t dctDesReduceScatterBackward(dctDesPlan_t plan, const void* gradSummed, void* gradPartials,
                                                   void* stream);

#ifdef __cplusplus
}
#endif
#endif /* DCT_ALLTOALL_H_ */
