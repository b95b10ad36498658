/*
 * libdct — error-compensated compressed collectives for distributed training.
 * Core C API. Compiles as C99 and C++; pulls in neither MPI nor CUDA.
 * It includes dct_alltoall.h (DCT-MP and DES plans) and dct_sparse_input.h
 * (the lossless sparse-input allreduce); transport-specific entry points
 * live in dct_mpi.h (and dct_nccl.h).
 */
#ifndef DCT_H_
#define DCT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Public symbols stay visible when the library builds with hidden visibility. */
#if defined(__GNUC__)
#define DCT_EXPORT __attribute__((visibility("default")))
#else
#define DCT_EXPORT
#endif

#define DCT_MAJOR 0
#define DCT_MINOR 4
#define DCT_PATCH 0
#define DCT_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define DCT_VERSION_CODE DCT_VERSION(DCT_MAJOR, DCT_MINOR, DCT_PATCH)

typedef enum {
  dctSuccess = 0,
  dctInvalidArgument = 1, /* a bad pointer, enum, count or value on this rank */
  dctInvalidUsage = 2,    /* calls that disagree across ranks, or wrong call order */
  dctSystemError = 3,     /* the OS or a thread failed */
  dctInternalError = 4,   /* a libdct bug: please report it */
  dctTransportError = 5,  /* MPI or NCCL reported an error */
  dctCudaError = 6,
  dctNotSupported = 7,    /* valid request this build cannot serve (yet) */
  dctOutOfMemory = 8,
  dctNumResults = 9
} dctResult_t;

/* Half types (fp16, bf16) are accepted by every call that takes a
 * datatype: buffers hold that type; compressors keep their error-feedback
 * residual in fp32; sparse sums (allgather algorithm, scatter-add) are
 * formed in fp32 and rounded once to the half type, while the dense
 * algorithm reduces in the wire type (one rounding per reduction step, as
 * NCCL's half allreduce does). Conversions round to nearest even, overflow
 * to Inf, and write one canonical quiet NaN; fp64 reaches the half types
 * through fp32. */
typedef enum {
  dctFloat32 = 0,
  dctFloat64 = 1,
  dctFloat16 = 2,  /* IEEE binary16 */
  dctBFloat16 = 3, /* bfloat16 (the top half of an fp32) */
  dctNumTypes = 4
} dctDataType_t;

typedef enum { dctSum = 0, dctAvg = 1, dctNumOps = 2 } dctRedOp_t;

typedef enum {
  dctThresholdSampled = 0, /* k-th largest |x| of a PRNG sample (default) */
  dctThresholdExact = 1,   /* exact k-th largest |x| (nth_element) */
  dctThresholdBisect = 2,  /* MSTopK: bisection between mean and max of |x|,
                              a fixed number of counting passes */
  dctNumThresholdMethods = 3
} dctThresholdMethod_t;

typedef enum {
  dctAlgoAuto = 0,      /* alpha-beta cost model over the global counts */
  dctAlgoAllgather = 1, /* allgatherv the COO messages, scatter-add in rank order */
  dctAlgoDense = 2,     /* scatter into zeros, dense allreduce */
  dctAlgoSplit = 3,     /* index space cut in P ranges: alltoallv each range to its
                           owner, who sums it in rank order; allgatherv the summed
                           ranges, each sparse or dense, whichever is smaller */
  dctAlgoGlobalTopk = 4, /* split whose owners keep only their range's share of a
                           global top-k of the sum (density * range entries);
                           the rest waits in an owner residual for the next
                           step. Traffic ~2k entries per rank at any rank count,
                           but the result changes: opt-in, auto's pick only
                           with config.autoGlobalTopk */
  dctAlgoRecursiveDoubling = 5, /* dctSparseInputAllreduce only: log2 P pairwise rounds
                           merging sorted partial sums, dense once past the
                           break-even fill (SparCML); host buffers */
  dctNumAlgorithms = 6
} dctAlgorithm_t;

/* What a compressor does to a tensor (dctSparseAllreduce). */
typedef enum {
  dctCompressorTopk = 0,   /* DCT-DP: threshold selection, sparse messages (default) */
  dctCompressorOnebit = 1, /* 1-bit Adam's compressed allreduce: sign bits + one
                              scale per chunk, worker and server error feedback;
                              see dctSparseAllreduce. dctCompress: dctInvalidUsage */
  dctNumCompressorKinds = 2
} dctCompressorKind_t;

/* DCT-MP row selection (dctSparseAlltoall). */
typedef enum {
  dctRowTopK = 0,      /* each row keeps its K largest |x| (ties: lower column first) */
  dctRowThreshold = 1, /* |x| >= tau, tau re-estimated every L steps so that about K
                          entries per row pass on average (rows vary) */
  dctNumRowSelections = 2
} dctRowSelection_t;

typedef struct dctComm* dctComm_t;
typedef struct dctCompressor* dctCompressor_t;
typedef struct dctAlltoallPlan* dctAlltoallPlan_t;

/* Configuration. Always start from DCT_CONFIG_INITIALIZER: fields left at
 * their "undefined" value take the DCT_* environment variable as the comm
 * read it at its creation, else the built-in default (documented per
 * field). density, warmupSteps, algorithm, wireType, compressor,
 * autoGlobalTopk, capacityFactor and ownerReturn must be the same on every rank: a step whose ranks differ fails
 * on all of them
 * with dctInvalidUsage. */
#define DCT_CONFIG_MAGIC 0xdc7c0f19u
#define DCT_CONFIG_UNDEF_INT (-2147483647 - 1)
#define DCT_CONFIG_UNDEF_DOUBLE (-1.0e300)
typedef struct {
  size_t size;             /* sizeof(dctConfig_t), set by the initializer */
  unsigned int magic;      /* DCT_CONFIG_MAGIC */
  unsigned int version;    /* DCT_VERSION_CODE */
  double density;          /* fraction kept, in (0,1]; default 0.01 (DCT_DENSITY) */
  int thresholdInterval;   /* L: steps between tau estimates; 1000 (DCT_THRESHOLD_INTERVAL) */
  int errorFeedback;       /* 0/1; default 1 (DCT_ERROR_FEEDBACK) */
  int warmupSteps;         /* dense steps first; default 0 (DCT_WARMUP_STEPS) */
  int thresholdMethod;     /* dctThresholdMethod_t; sampled (DCT_THRESHOLD_METHOD) */
  int algorithm;           /* dctAlgorithm_t; auto (DCT_ALGORITHM) */
  long long seed;          /* sample PRNG seed, >= 0; default 0 (DCT_SEED) */
  int rowSelection;        /* dctRowSelection_t (all-to-all); top-K (DCT_ROW_SELECTION) */
  int wireType;            /* dctDataType_t the selected values travel in: the
                              tensor's own type (default), or a narrower one,
                              e.g. fp32 gradients as fp16/bf16 values with the
                              rounding error kept in the residual; the
                              all-to-all's values too, forward and backward
                              (no residual there; dctSparseAlltoall). A type
                              wider than the data is refused. DES ignores it
                              (DCT_WIRE_TYPE = fp32|fp64|fp16|bf16) */
  int compressor;          /* dctCompressorKind_t; top-K (DCT_COMPRESSOR = topk|onebit) */
  int autoGlobalTopk;      /* 0/1: auto may choose dctAlgoGlobalTopk by the cost
                              model, which changes the result (owners hold part
                              of the sum back); default 0 (DCT_AUTO_GLOBAL_TOPK) */
  double capacityFactor;   /* 0: messages as large as the selection (default);
                              c >= 1: the fixed-capacity mode, every rank's
                              message c * k entries (k = density * count), the
                              selection past it kept in the residual; no sizes
                              are exchanged and on a device nothing waits for
                              the host (dctSparseAllreduce). algorithm auto or
                              allgather: one slot per rank, allgathered;
                              globaltopk: fixed pieces per range owner (about
                              c * k / P each, alltoall) and fixed owner slots
                              (about 4 c k / P, allgathered), overflow kept in
                              the worker or owner residual. Agreed across
                              ranks (DCT_CAPACITY_FACTOR) */
  int ownerReturn;         /* global top-k, what a range's owner does not
                              select: 0 (default) kept in its owner residual
                              and offered again with the next step's sum;
                              1 returned, each rank's sent entries to its own
                              residual, as Ok-Topk does (the owner keeps
                              nothing). Variable sizes only (capacityFactor
                              0). Agreed across ranks (DCT_OWNER_RETURN) */
} dctConfig_t;

#define DCT_CONFIG_INITIALIZER                                                 \
  {                                                                            \
    sizeof(dctConfig_t), DCT_CONFIG_MAGIC, DCT_VERSION_CODE,                   \
        DCT_CONFIG_UNDEF_DOUBLE, DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT,   \
        DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT,      \
        DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT,      \
        DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_INT, DCT_CONFIG_UNDEF_DOUBLE,   \
        DCT_CONFIG_UNDEF_INT                                                   \
  }

/* Where a dctSparseAllreduce step's time went on this rank (dctStats_t
 * phaseUs): host wall time in microseconds, the phases summing to the
 * call's time. With device buffers kernels and NCCL calls are queued on the
 * stream, so a phase holds its launch time unless it waits (the agreement
 * waits on the stream before it reads the header). */
typedef enum {
  dctPhaseCompress = 0, /* error feedback, threshold, selection, index packing
                           (1-bit: the worker's compression) */
  dctPhaseAgree = 1,    /* planning, the header allgather, votes (this rank
                           waiting for the slowest one lands here) */
  dctPhaseExchange = 2, /* the data collective: allgatherv or dense allreduce
                           (1-bit: both sign exchanges) */
  dctPhaseReduce = 3,   /* building the sum: the merge of all messages,
                           averaging (1-bit: the server's average and
                           re-compression, the decode) */
  dctPhaseOther = 4,    /* staging copies and conversions, commit */
  dctNumPhases = 5
} dctPhase_t;

/* What the last step did, plus totals since creation. Bytes are payload
 * bytes this rank put on / took off the wire (headers excluded). */
typedef struct {
  uint64_t step;           /* steps completed */
  double threshold;        /* tau used in the last step; 0 when none was:
                              warm-up, density 1, and steps of the dense
                              algorithm, auto's included (every entry is
                              sent). 1-bit: see dctSparseAllreduce */
  uint64_t nnz;            /* entries this rank sent in the last step */
  uint64_t nonFinite;      /* NaN/Inf among them (always sent) */
  uint64_t bytesSent;      /* last step */
  uint64_t bytesReceived;  /* last step */
  uint64_t denseBytes;     /* count * sizeof(dtype): what dense would send */
  int algorithm;           /* dctAlgorithm_t used in the last step */
  int indexBytes;          /* 4, or 8 when count >= 2^32 */
  uint64_t thresholdEstimates; /* tau estimates so far (scheduled + drift) */
  uint64_t totalBytesSent;
  uint64_t totalBytesReceived;
  uint64_t totalDenseBytes;
  double phaseUs[dctNumPhases];      /* last step, by dctPhase_t */
  double totalPhaseUs[dctNumPhases]; /* since creation */
  uint64_t ownerKept;        /* dctAlgoGlobalTopk: entries this rank's range
                                delivered in the last step */
  double ownerThreshold;     /* ... the tau it kept them by */
  double ownerResidualMass;  /* sum of |owner residual| this rank holds for
                                its range after the last step (0 when none) */
} dctStats_t;

/* --- errors and version --- */
DCT_EXPORT const char* dctGetErrorString(dctResult_t result);
/* Message of the last failure on comm (thread-local last failure if NULL). */
DCT_EXPORT const char* dctGetLastError(dctComm_t comm);
DCT_EXPORT dctResult_t dctGetVersion(int* version);

/* --- bring your own transport ---
 * A dctComm_t over a communicator the caller already has (a framework's
 * process group, Gloo, UCC, Horovod): the caller supplies blocking
 * collectives over all `nranks` ranks, libdct brings compression, the
 * algorithms and the failure contract. Each callback returns 0 on success
 * and anything else on failure, and a rank whose callback fails must still
 * have taken part in the collective (peers never wait on it): libdct then
 * fails the step on every rank and commits nothing. Every callback takes
 * host buffers (libdct's own headers and votes are host memory); with
 * deviceBuffers set they also take device buffers, and `stream` is the
 * caller's (else NULL). Sizes are in bytes except count. Start from
 * DCT_CALLBACKS_INITIALIZER; the struct is copied. */
typedef struct {
  size_t size;            /* sizeof(dctCallbacks_t) */
  unsigned int magic;     /* DCT_CALLBACKS_MAGIC */
  unsigned int version;   /* DCT_VERSION_CODE */
  int rank;               /* this rank, in [0, nranks) */
  int nranks;
  int deviceBuffers;      /* 1: the callbacks also take device buffers */
  void* context;          /* handed to every callback */
  /* recv = every rank's `bytes` from send, in rank order. */
  int (*allgather)(const void* send, void* recv, size_t bytes, void* context, void* stream);
  /* Rank q's sendBytes land at recv + recvOffsets[q] (recvBytes[q] long). */
  int (*allgatherv)(const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                    const size_t* recvOffsets, void* context, void* stream);
  /* Rank q gets sendBytes[q] from send + sendOffsets[q]; this rank gets
   * recvBytes[q] from rank q at recv + recvOffsets[q]. */
  int (*alltoallv)(const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                   const size_t* recvBytes, const size_t* recvOffsets, void* context, void* stream);
  /* recv = elementwise sum over ranks of send (send may equal recv), in an
   * order the same on every rank so that all hold identical bits. */
  int (*allreduceSum)(const void* send, void* recv, size_t count, dctDataType_t datatype, void* context,
                      void* stream);
  /* Optional: *max = the largest `mine` over ranks (host values). A rank
   * that fails contributes dctTransportError instead of `mine`, so that
   * every rank learns of it. NULL: libdct votes with allgather, and a vote
   * that fails on one rank alone can then leave the others going on. */
  int (*voteMax)(int32_t mine, int32_t* max, void* context);
} dctCallbacks_t;
#define DCT_CALLBACKS_MAGIC 0xdc7cca11u
#define DCT_CALLBACKS_INITIALIZER \
  { sizeof(dctCallbacks_t), DCT_CALLBACKS_MAGIC, DCT_VERSION_CODE, -1, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL }
/* Collective over the callbacks' ranks, like dctCommInitMpi (settings
 * agreed, links probed). Hierarchical steps (DCT_HIERARCHY) are not
 * available: the callbacks cannot split. */
DCT_EXPORT dctResult_t dctCommInitCallbacks(const dctCallbacks_t* callbacks, dctComm_t* comm);

/* --- communicators (created by dctCommInitMpi / dctCommInitNccl / dctCommInitCallbacks) --- */
DCT_EXPORT dctResult_t dctCommDestroy(dctComm_t comm);
DCT_EXPORT dctResult_t dctCommRank(dctComm_t comm, int* rank);
DCT_EXPORT dctResult_t dctCommSize(dctComm_t comm, int* size);
/* The error of a fixed-capacity step that failed after its call returned
 * (device buffers: see dctSparseAllreduce), or dctSuccess. Does not wait
 * for any stream: a step still queued may fail later. Once set it stays
 * set: the comm's later steps change nothing; save the compressors' state
 * (their last committed steps) and continue on a new comm. */
DCT_EXPORT dctResult_t dctCommGetAsyncError(dctComm_t comm, dctResult_t* asyncError);

/* --- compressor: per-tensor error-feedback state --- */
DCT_EXPORT dctResult_t dctCompressorCreate(dctComm_t comm, size_t count, dctDataType_t datatype,
                                const dctConfig_t* config, dctCompressor_t* compressor);
DCT_EXPORT dctResult_t dctCompressorDestroy(dctCompressor_t compressor);
/* A fixed-capacity compressor's steps write their statistics on the device:
 * GetStats then waits for the stream of its last step (a synchronization). */
DCT_EXPORT dctResult_t dctCompressorGetStats(dctCompressor_t compressor, dctStats_t* stats);
/* The configuration in effect after env vars and defaults were applied. */
DCT_EXPORT dctResult_t dctCompressorGetConfig(dctCompressor_t compressor, dctConfig_t* config);

/* The committed error-feedback residual (a 1-bit compressor's worker
 * error; its server error is not included; global top-k's owner residual
 * is, added in at its range, and Set clears it): `count` elements of the
 * accumulation type, fp64 for fp64 tensors, else fp32. For checking that
 * nothing was dropped (checkpoints that continue bit for bit need the
 * schedule too: dctCompressorSaveState). The buffer lives where the
 * compressor's steps run (host or device); a compressor that has not run a
 * step takes that memory space from this buffer and holds zeros. Set
 * replaces the residual (finite values only: NaN/Inf are rejected for host
 * buffers). Not collective; not while a step on this compressor runs. */
DCT_EXPORT dctResult_t dctCompressorGetResidual(dctCompressor_t compressor, void* residual, void* stream);
DCT_EXPORT dctResult_t dctCompressorSetResidual(dctCompressor_t compressor, const void* residual,
                                                void* stream);

/* dctAlgoGlobalTopk: the owner residual this rank holds, the part of its
 * range's sum not delivered yet: the tensor's entries [*begin, *begin +
 * *length) in the accumulation type, copied into residual (memory where the
 * compressor's steps run; NULL: the range only). *length 0: none.
 * dctCompressorGetResidual already includes it: summed over ranks,
 * delivered results + those residuals = all gradients. Not collective; not
 * while a step on this compressor runs. */
DCT_EXPORT dctResult_t dctCompressorGetOwnerResidual(dctCompressor_t compressor, void* residual, size_t* begin,
                                                     size_t* length, void* stream);

/* dctCompressorOnebit: the server error this rank holds, for the chunk of
 * the tensor it serves: entries [*begin, *begin + *length) in the
 * accumulation type, copied into error (host memory; NULL: the range only).
 * Zeros before the first 1-bit step. Nothing is lost: with P ranks, a
 * step's P x (dctAvg result) = the sum of the ranks' inputs minus what it
 * added to E = (the ranks' worker errors summed) + P x (the server errors,
 * chunks side by side), up to the accumulation type's rounding. Another
 * compressor kind: dctInvalidUsage. Not collective; not while a step on
 * this compressor runs. */
DCT_EXPORT dctResult_t dctCompressorGetServerError(dctCompressor_t compressor, void* error, size_t* begin,
                                                   size_t* length, void* stream);

/* dctCompressorOnebit: a scale per segment of the tensor instead of one for
 * the whole of it, so a flat buffer of several tensors (an optimizer's
 * parameters side by side) keeps a scale per tensor in one exchange: one
 * tensor with large entries no longer sets the step size of all the others.
 * offsets: nsegments + 1 element offsets, offsets[0] = 0, offsets[nsegments]
 * = count, non-decreasing (segment s is [offsets[s], offsets[s + 1]); an
 * empty segment is allowed and has no scale). Each rank's worker sends a
 * scale per segment, ||x_s||_2 / sqrt(len_s) (x = sendbuf + worker error
 * on the segment); the server of chunk j one per piece (a segment within
 * chunk j) of the average plus its server error; each element is sent, its
 * errors formed, and recvbuf decoded with its own segment's (piece's)
 * scale. One segment is the unsegmented compressor, bit for bit. The
 * scales ride in front of the sign words as before: each message carries
 * K scales, K = the most segments one chunk meets, so a step sends 2 (P -
 * 1) (K - 1) x 4 bytes (8 for fp64 tensors) more per rank than with one
 * segment. Every rank must set the same segments: they are agreed with
 * each step's call, and a rank whose segments differ fails the step on
 * every rank (dctInvalidUsage, nothing changed). Segments are fixed before
 * the compressor's first step (later, or after a LoadState of a stepped
 * state: dctInvalidUsage); dctCompressorSaveState carries them with the
 * per-segment scales, and LoadState restores them (a state saved with one
 * segment restores one segment). With more than one segment a device step
 * stays synchronous (the segments' scales are read back each step) instead
 * of being queued on the stream. Bad offsets: dctInvalidArgument; another
 * compressor kind: dctInvalidUsage; nothing changed on failure. Not
 * collective. */
DCT_EXPORT dctResult_t dctCompressorSetSegments(dctCompressor_t compressor, const size_t* offsets, int nsegments);

/* A compressor's whole state as a host byte string, for checkpoints that
 * continue training bit for bit in a fresh process: the statistics (step
 * counter and totals), the threshold schedule (tau, the step the sampled
 * estimator's per-step PRNG and the L-step schedule run on, drift, tie and
 * starvation state), the worker residual (a 1-bit compressor's as the x its
 * error is formed from, with its scale), the 1-bit server error and its
 * pending scale, global top-k's owner residual with its own schedule, and
 * the message counts auto forecasts from. Auto's tuner (its measured
 * correction of the cost model) is not included: a restored compressor
 * keeps its own and re-learns, so with dctAlgoAuto it may pick another
 * algorithm than the original would have (and the result's bits follow the
 * algorithm); every fixed algorithm continues bit for bit. The string is
 * versioned (magic, format version, checksum), holds the compressor's
 * count, datatype, comm size, rank and the resolved config fields that
 * shape results, and is in the host's byte order; arrays are in the
 * accumulation type, copied off the device (on `stream`, then
 * synchronized) when the compressor's steps run there.
 * Save: state NULL: *bytes = the size needed. Otherwise *bytes in = the
 * buffer's size (too small: dctInvalidArgument, nothing written), out = the
 * bytes written. state is host memory.
 * Not collective; not while a step on this compressor runs. */
DCT_EXPORT dctResult_t dctCompressorSaveState(dctCompressor_t compressor, void* state, size_t* bytes, void* stream);
/* Replaces the compressor's state with one saved by dctCompressorSaveState
 * from a compressor of the same count, datatype, comm size, rank and
 * resolved config (density, thresholdInterval, errorFeedback, warmupSteps,
 * thresholdMethod, algorithm, seed, wireType, compressor, autoGlobalTopk;
 * rowSelection is not compared). Anything else, or a string that is
 * truncated, corrupted (checksum), of another format version or byte
 * order, or holds NaN/Inf in an array: dctInvalidArgument naming what is
 * wrong (dctGetLastError), nothing changed. All or nothing: the arrays go
 * into spare buffers and are swapped in once all arrived. A compressor that
 * has not run a step takes the statistics and schedule at once and holds
 * the arrays (host) until its first step (or Get/SetResidual) binds it to
 * where its buffers live, and applies them then; until then SaveState
 * returns the loaded string. Not collective; not while a step on this
 * compressor runs. */
DCT_EXPORT dctResult_t dctCompressorLoadState(dctCompressor_t compressor, const void* state, size_t bytes,
                                              void* stream);

/* DCT-DP: recvbuf = sum (or mean) over ranks of each rank's compressed
 * (sendbuf + residual). Collective; in place allowed; every rank ends with a
 * bit-identical recvbuf. count 0 is a no-op (buffers may be NULL).
 *
 * With a dctCompressorOnebit compressor the same call is the 1-bit
 * compressed allreduce of 1-bit Adam (one stateful handle per tensor, one
 * call, so training code and the drop-in shims switch with DCT_COMPRESSOR=
 * onebit): each rank sends the sign bits of x = sendbuf + worker error and
 * one scale ||x||_2 / sqrt(count) (one per segment with
 * dctCompressorSetSegments); rank j averages chunk j over the ranks,
 * adds its server error and re-compresses it the same way; the chunks'
 * scales and bits are allgathered. About count/8 bytes per phase instead of
 * 4*count. recvbuf is the average by construction (dctSum multiplies it by
 * the rank count); sums in fp32 (fp64 for fp64 tensors), rounded once to the
 * tensor's type. A NaN/Inf in any rank's input makes this step's recvbuf NaN
 * everywhere and leaves both errors as they were (a loss scaler skips the
 * step; the next one is unaffected). config.warmupSteps dense steps come
 * first. Stats: nnz = count, threshold = this rank's worker scale (its largest segment's; 0 in
 * warm-up), nonFinite = 1 when its input was not finite, algorithm =
 * dctAlgoDense in warm-up else dctNumAlgorithms, bytes = sign words and
 * scales this rank sent to / received from the others. With device
 * buffers its sizes are fixed, so after its first 1-bit step (synchronous:
 * it agrees the call across ranks and sets up the buffers) each step is
 * queued on `stream` and the call returns without waiting, as the
 * fixed-capacity step below (its asynchronous outcome, the comm's
 * asynchronous error, CUDA graph capture and replay, lazily read stats;
 * no phase times); recvbuf is written only by a committed step. Warm-up
 * steps and host buffers stay synchronous. After the first step every
 * rank must pass the same count and op: a device step does not compare
 * the ranks' calls.
 *
 * The fixed-capacity mode (config.capacityFactor c >= 1, top-K
 * compressors): every rank's message is a slot of ceil(c * k) entries, the
 * selection past it kept in the residual, and a step is one allgather of
 * the slots and one vote. The first step past the warm-up agrees the slots
 * across ranks and is synchronous; after it, with device buffers, the step
 * (threshold estimate, selection, exchange, merge, vote, commit) is queued
 * on `stream` and the call returns without waiting: a CUDA graph may
 * capture and replay it, each replay one step. Its outcome is asynchronous:
 * a step that fails on any rank (arguments or settings that differ across
 * ranks, a peer's corrupt slot, a transport error) changes no rank's state
 * and sets the comm's asynchronous error (dctCommGetAsyncError); every later
 * step on the comm still runs its collectives, so no peer waits, but
 * changes nothing and returns that error. With host buffers the step is
 * synchronous and fails like any other call. The threshold is re-estimated
 * every thresholdInterval steps and after a step whose count left the drift
 * band (the estimate is sampled: thresholdMethod must be sampled). Steps
 * run the allgather plan over the whole comm (no DCT_HIERARCHY), or, with
 * algorithm globaltopk, global top-k with fixed sizes: each rank cuts its
 * selection by the P owner ranges into pieces of a fixed capacity (one
 * alltoall), each owner sums its range in rank order with its owner
 * residual and selects its share into a fixed slot (one allgather); what
 * overflows a piece stays in the worker residual, what overflows or misses
 * an owner's slot in the owner residual. Reading
 * the state (dctCompressorGetStats, Get/SetResidual, Save/LoadState) waits
 * for the last step's stream, which must still exist. Stats: bytes are the
 * slots' (or pieces') sizes whatever they hold; phase times are not
 * measured. */
DCT_EXPORT dctResult_t dctSparseAllreduce(const void* sendbuf, void* recvbuf, size_t count,
                               dctDataType_t datatype, dctRedOp_t op,
                               dctCompressor_t compressor, dctComm_t comm, void* stream);

/* Local compression for users with their own transport: one DCT-DP step
 * (EF, threshold schedule) of sendbuf into COO. indices are uint32_t, or
 * uint64_t when the compressor's count >= 2^32 (stats.indexBytes), ascending;
 * values are in the compressor's wireType (the tensor's type by default).
 * At most `capacity` entries are written; the rest stay in the residual
 * (nothing is lost). Not collective. */
DCT_EXPORT dctResult_t dctCompress(dctCompressor_t compressor, const void* sendbuf, void* indices,
                        void* values, size_t capacity, size_t* nnz, void* stream);

/* dense[indices[j]] += values[j], j < nnz (uint32 indices, each < count).
 * Half types: each sum is formed in fp32 and rounded once. */
DCT_EXPORT dctResult_t dctScatterAdd(void* dense, size_t count, const uint32_t* indices,
                          const void* values, size_t nnz, dctDataType_t datatype,
                          void* stream);

/* Sparse allgather of explicit COO: each rank gives nnz (value, index) pairs
 * with indices < count; every rank receives all pairs in rank order and
 * recvCounts[r] (size = comm size). Two-phase: with recvValues and
 * recvIndices both NULL only recvCounts and *total are filled (collective on
 * every rank). Out-of-range indices or too little recvCapacity are rejected
 * on every rank before anything is written. A peer whose data arrives
 * corrupt (an index out of range) fails every rank after the exchange:
 * recvValues and recvIndices are then undefined. */
DCT_EXPORT dctResult_t dctSparseAllgather(const void* values, const uint32_t* indices, size_t nnz,
                               size_t count, void* recvValues, uint32_t* recvIndices,
                               size_t recvCapacity, size_t* recvCounts, size_t* total,
                               dctDataType_t datatype, dctComm_t comm, void* stream);

#ifdef __cplusplus
}
#endif

/* The plan-based row exchanges (DCT-MP, DES) and the sparse-input allreduce. */
#include "dct/dct_alltoall.h"
#include "dct/dct_sparse_input.h"

#endif /* DCT_H_ */
