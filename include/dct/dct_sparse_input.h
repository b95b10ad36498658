/* libdct: the lossless allreduce of data that is already sparse
 * (SparCML's primitive). Included by dct.h. */
#ifndef DCT_SPARSE_INPUT_H_
#define DCT_SPARSE_INPUT_H_

#include "dct/dct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a dctSparseInputAllreduce call did on this rank. */
typedef struct {
  int algorithm;          /* dctAlgorithm_t that ran (auto resolved) */
  uint64_t inputNnz;      /* sum over ranks of the input nnz */
  uint64_t resultNnz;     /* nonzero entries of the sum (the COO's length; 0
                             when no COO was asked for); a size query: its
                             bound, min(count, inputNnz) */
  uint64_t bytesSent;     /* payload bytes this rank put on the wire */
  uint64_t bytesReceived; /* and took off it */
  uint64_t denseBytes;    /* count * sizeof(datatype): what dense would send
                             (UINT64_MAX past 2^64) */
} dctSparseInputInfo_t;

/* Lossless sparse-input allreduce (SparCML's primitive): each rank gives
 * nnz (index, value) pairs, indices strictly ascending and < count, uint32_t
 * (uint64_t when count >= 2^32); every rank gets their exact sum (dctAvg:
 * divided by the rank count). No threshold, no residual: nothing is
 * dropped. The result comes as:
 *  * dense (count elements of datatype, zeros off the sum's support), and/or
 *  * COO: the sum's nonzero entries (NaN/Inf included; entries that cancel
 *    to 0 are left out), ascending, at most outCapacity, in outIndices
 *    (index width as the input's) and outValues; *outNnz = their number.
 * Size query: dense, outIndices and outValues all NULL: *outNnz = an upper
 * bound on the COO's length, min(count, sum of the ranks' nnz), from one
 * small allgather (the exact length needs the exchange itself). A fetch
 * whose COO would pass outCapacity fails on every rank.
 * algorithm: dctAlgoAllgather (every rank merges every message in rank
 * order), dctAlgoSplit (reduce-scatter of index ranges + allgather of the
 * summed ranges, each sparse or dense), dctAlgoDense (scatter into zeros +
 * dense allreduce), dctAlgoRecursiveDoubling (pairwise merges in ceil(log2 P)
 * rounds; host buffers on every rank, else the dense algorithm runs), or
 * dctAlgoAuto: the alpha-beta cost model over the
 * exact counts, the same choice on every rank. A small call (auto or
 * allgather, host buffers) whose every packed message fits the comm's
 * gather slot runs the allgather plan in two collectives: the messages
 * ride in the header allgather (the slot follows the last calls' largest
 * message, within a bound priced from the comm's link probe). Sums:
 * rank order from +0 in
 * fp32 for half types (fp64 for fp64), rounded once (allgather, split;
 * recursive doubling sums in pairs, the lower ranks' partial sum first:
 * the same bits as rank order where the sums are exact); the dense algorithm reduces in the datatype as the transport's allreduce
 * does. Every rank ends with bit-identical results. Unsorted or duplicate
 * indices, an index >= count, NULL or misaligned buffers with entries, or
 * arguments that differ across ranks (count, datatype, op, algorithm) fail
 * every rank with nothing written. The allgather plan on host buffers
 * builds the COO from the messages' entries and merges an fp32/fp64 dense
 * result straight into `dense`; the other plans, half types and device
 * buffers need count-sized scratch (the sum). A count whose bytes pass
 * size_t (a hashed 64-bit index space) fails every rank with
 * dctInvalidArgument, scratch that cannot be had with dctOutOfMemory. info
 * may be NULL. Collective. */
DCT_EXPORT dctResult_t dctSparseInputAllreduce(const void* indices, const void* values, size_t nnz,
                                               size_t count, dctDataType_t datatype, dctRedOp_t op,
                                               dctAlgorithm_t algorithm, void* dense, void* outIndices,
                                               void* outValues, size_t outCapacity, size_t* outNnz,
                                               dctSparseInputInfo_t* info, dctComm_t comm, void* stream);

#ifdef __cplusplus
}
#endif
#endif /* DCT_SPARSE_INPUT_H_ */
