// Held-out evaluation; see eval.h.
#include "eval.h"

#include <mpi.h>

#include "check.h"
#include "metrics.h"

namespace dlrm {
namespace {

// Every rank's (score, label) pairs, rank after rank, on every rank.
Metrics gatherMetrics(const std::vector<float>& scores, const std::vector<float>& labels) {
  int P = 0;
  DLRM_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &P));
  const int mine = static_cast<int>(scores.size());
  std::vector<int> counts(P), displs(P, 0);
  DLRM_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD));
  for (int q = 1; q < P; q++) displs[q] = displs[q - 1] + counts[q - 1];
  const size_t total = static_cast<size_t>(displs[P - 1]) + counts[P - 1];
  std::vector<float> allScores(total), allLabels(total);
  DLRM_MPI_CHECK(MPI_Allgatherv(scores.data(), mine, MPI_FLOAT, allScores.data(), counts.data(), displs.data(),
                                MPI_FLOAT, MPI_COMM_WORLD));
  DLRM_MPI_CHECK(MPI_Allgatherv(labels.data(), mine, MPI_FLOAT, allLabels.data(), counts.data(), displs.data(),
                                MPI_FLOAT, MPI_COMM_WORLD));
  return {logLoss(allScores.data(), allLabels.data(), total), rocAuc(allScores.data(), allLabels.data(), total)};
}

}  // namespace

HeldOut makeHeldOut(const Generator& generator, int samples, const Split& split, int rank) {
  HeldOut h;
  const int B = split.total();
  for (int first = 0; first < samples; first += B) {
    h.chunks.emplace_back();
    generator.generate(kHeldOutStream, first, B, split.offsets[rank], split.offsets[rank + 1], &h.chunks.back());
  }
  return h;
}

Metrics evaluate(const HeldOut& heldOut, const Forward& forward) {
  std::vector<float> scores, labels;
  for (const Batch& chunk : heldOut.chunks) {
    const float* logits = forward(chunk);
    scores.insert(scores.end(), logits, logits + (chunk.hi - chunk.lo));
    labels.insert(labels.end(), chunk.labels.begin(), chunk.labels.end());
  }
  return gatherMetrics(scores, labels);
}

Metrics teacherMetrics(const HeldOut& heldOut) {
  std::vector<float> scores, labels;
  for (const Batch& chunk : heldOut.chunks) {
    scores.insert(scores.end(), chunk.teacherLogits.begin(), chunk.teacherLogits.end());
    labels.insert(labels.end(), chunk.labels.begin(), chunk.labels.end());
  }
  return gatherMetrics(scores, labels);
}

}  // namespace dlrm
