// The -c 1 check of dctSparseAllreduce. Replaying the timed compressor's
// history is impractical, so two fresh compressors with the same config see
// the same gradients: A runs dctSparseAllreduce, B runs dctCompress (the
// same DCT-DP step, uncapped). B's COO messages from all ranks, scatter-added
// in rank order, are the reference for A's output; under global top-k, for
// what A's output and its owners' residuals split between them.
#pragma once

#include "gradients.h"
#include "harness.h"

namespace dctbench {

// Runs `steps` checked steps; returns this rank's count of wrong elements
// (plus 1 per step whose output differs across ranks, counted on rank 0),
// or -1 when a call failed. Collective.
long long checkSparseAllreduce(const Options& opt, dctComm_t comm, MPI_Comm mpi, size_t count,
                               GradientSource& source, int steps);

}  // namespace dctbench
