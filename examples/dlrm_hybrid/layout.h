// How the global batch and the embedding rows are laid out across ranks.
//
// Data parallel split: the global batch of B samples is cut into P
// contiguous slices, rank q training on samples [offset(q), offset(q) +
// count(q)), count(q) = B / P, plus one for the first B % P ranks.
//
// Model parallel split: table t lives on rank t % P, as local table
// j = t / P of that rank (EmbeddingShard). The owner looks up the rows of
// its tables for the whole global batch and the all-to-all hands each rank
// the rows of its own samples. With b_q = count(q) and n_q = number of
// tables rank q owns, MPI_Alltoallv order (one block per peer rank):
//
//   send buffer of rank p, block for destination q (sendRows[q] = n_p b_q):
//     for local table j = 0 .. n_p - 1 (global table p + j P):
//       for sample i = 0 .. b_q - 1: the row of sample offset(q) + i
//   receive buffer of rank p, block from source q (recvRows[q] = n_q b_p):
//     for local table j of q = 0 .. n_q - 1 (global table q + j P):
//       for sample i = 0 .. b_p - 1: the row of sample offset(p) + i
//
// i.e. row (q, j, i) of the send buffer is at sendOffset(q) + j b_q + i and
// table t's row for local sample i of the receive buffer is at
// recvOffset(t % P) + (t / P) b_p + i. The backward pass uses the same
// layouts in reverse: gradients of the receive buffer go back, and the
// owner gets them in send-buffer order, ready for its sparse update.
#pragma once

#include <cstddef>
#include <vector>

namespace dlrm {

struct Split {
  Split(int total, int ranks) : counts(ranks), offsets(ranks + 1, 0) {
    for (int q = 0; q < ranks; q++) {
      counts[q] = total / ranks + (q < total % ranks ? 1 : 0);
      offsets[q + 1] = offsets[q] + counts[q];
    }
  }
  int ranks() const { return static_cast<int>(counts.size()); }
  int total() const { return offsets.back(); }
  std::vector<int> counts;   // samples per rank
  std::vector<int> offsets;  // first sample of each rank (ranks + 1 entries)
};

// Tables owned by rank q among T tables over P ranks.
inline int tablesOwned(int q, int T, int P) { return q < T ? (T - q + P - 1) / P : 0; }

// Row counts and offsets (in rows) of the all-to-all blocks of rank `me`.
struct RowLayout {
  RowLayout(const Split& split, int tables, int me) {
    const int P = split.ranks();
    for (int q = 0; q < P; q++) {
      sendRows.push_back(static_cast<size_t>(tablesOwned(me, tables, P)) * split.counts[q]);
      recvRows.push_back(static_cast<size_t>(tablesOwned(q, tables, P)) * split.counts[me]);
    }
    sendOffsets.assign(P + 1, 0);
    recvOffsets.assign(P + 1, 0);
    for (int q = 0; q < P; q++) {
      sendOffsets[q + 1] = sendOffsets[q] + sendRows[q];
      recvOffsets[q + 1] = recvOffsets[q] + recvRows[q];
    }
  }
  size_t sendTotal() const { return sendOffsets.back(); }
  size_t recvTotal() const { return recvOffsets.back(); }
  std::vector<size_t> sendRows, recvRows, sendOffsets, recvOffsets;
};

}  // namespace dlrm
