// The owner's range forms of the split plan (split_forms.cc): its range of
// the pieces summed, merged dense and selected or walked as their union,
// then packed or left dense, whichever is smaller. split_allreduce.cc
// exchanges the pieces and the forms.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/split_allreduce.h"
#include "core/compressor.h"
#include "kernels/message_args.h"

namespace dct {

struct OwnerDraft;

constexpr const char* kSplitFn = "dctSparseAllreduce";

// One call's view of the ranges: range q of `target` is this rank's when q == me.
struct Split {
  dctCompressor_t c;
  dctComm_t comm;
  void* target;
  void* stream;
  int P, me;
  size_t sumBytes, wireBytes;  // a reduced value (accType), a sent value (wireType)
  size_t begin(int q) const { return splitRangeBegin(c->count, P, q); }
  size_t length(int q) const { return begin(q + 1) - begin(q); }
  char* range(int q) const { return static_cast<char*>(target) + begin(q) * sumBytes; }
};

// Views of the gathered pieces for range `me`, in rank order. theirs[2 r],
// theirs[2 r + 1]: bytes and nnz of rank r's piece.
const std::vector<PackedMessage>& pieceViews(const Split& s, const char* gathered, const std::vector<uint64_t>& theirs,
                                             const std::vector<size_t>& offsets);

// Sums range `me` of the pieces in rank order into the target.
dctResult_t mergeRange(const Split& s, const std::vector<PackedMessage>& pieces);

// Whether range `me` is better made from the pieces' union (unionForm) than
// merged (mergeRange, then reduceForm): `bound` entries came for it.
bool unionsRange(const Split& s, uint64_t bound, const OwnerDraft* owner);

// This rank's range form: bytes and nnz (kSplitDenseForm: dense), and where
// it lies (packed in c->wire, or the range itself). From the pieces' union;
// from the merged range's nonzeros; or global top-k's owner selection.
dctResult_t unionForm(const Split& s, const std::vector<PackedMessage>& pieces, uint64_t bound, const void*& form,
                      uint64_t& bytes, uint64_t& nnz);
dctResult_t reduceForm(const Split& s, uint64_t bound, const void*& form, uint64_t& bytes, uint64_t& nnz);
dctResult_t ownerForm(const Split& s, uint64_t inflow, OwnerDraft& draft, const void*& form, uint64_t& bytes,
                      uint64_t& nnz);

}  // namespace dct
