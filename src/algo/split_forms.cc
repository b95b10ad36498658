// The owner's range forms of the split plan (split_forms.h).
#include "algo/split_forms.h"

#include "algo/global_topk.h"
#include "algo/packed_message.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "core/cost_model.h"
#include "transport/comm.h"

namespace dct {
namespace {

dctResult_t malformedPiece(const Split& s, dctResult_t res, int malformed) {
  return malformed < 0 ? res : fail(s.comm, res, "%s: malformed piece from rank %d", kSplitFn, malformed);
}

// The smaller of the owner's selection packed into c->wire and its range
// dense. Dense, the range is written whole from the packed copy (+0 + x is
// x, +0 elsewhere: the bits of the merged range), whatever it held.
dctResult_t smallerForm(const Split& s, const SelectArgs& sel, const void*& form, uint64_t& bytes, uint64_t& nnz) {
  dctCompressor_t c = s.c;
  const size_t length = s.length(s.me), denseBytes = length * s.sumBytes;
  DCTCHECK(c->wire.reserve(packedMessageRoom(sel.nnz, c->indexBytes, s.sumBytes)));
  size_t packed = 0;
  DCTCHECK(packMessage(c, sel.outIndices, sel.outValues, sel.nnz, s.sumBytes, 0, c->wire.as<char>(), packed, s.stream));
  if (packed < denseBytes) {
    form = c->wire.as();
    bytes = packed;
    nnz = sel.nnz;
    return dctSuccess;
  }
  PackedMessage own = packedView(c->wire.as<char>(), packed, sel.nnz, s.sumBytes);
  MergeArgs fill{s.range(s.me), length, c->accType, c->accType, c->indexBytes, &own, 1};
  DCTCHECK(c->ops->mergePacked(c->kernels, &fill, s.stream));
  form = s.range(s.me);
  bytes = denseBytes;
  nnz = kSplitDenseForm;
  return dctSuccess;
}

}  // namespace

const std::vector<PackedMessage>& pieceViews(const Split& s, const char* gathered, const std::vector<uint64_t>& theirs,
                                             const std::vector<size_t>& offsets) {
  std::vector<PackedMessage>& pieces = s.c->rankArrays.messages;  // reserved by splitPack
  pieces.assign(s.P, PackedMessage{});
  for (int r = 0; r < s.P; r++) pieces[r] = packedView(gathered + offsets[r], theirs[2 * r], theirs[2 * r + 1], s.wireBytes);
  return pieces;
}

dctResult_t mergeRange(const Split& s, const std::vector<PackedMessage>& pieces) {
  dctCompressor_t c = s.c;
  MergeArgs merge{s.range(s.me), s.length(s.me), c->accType, c->wireType, c->indexBytes, pieces.data(), s.P};
  const dctResult_t res = c->ops->mergePacked(c->kernels, &merge, s.stream);
  return res == dctSuccess ? res : malformedPiece(s, res, merge.malformed);
}

// The owner's range in its smaller form: its nonzeros (NaN and Inf too: the
// select keeps !(|x| < tau)) packed into c->wire, or the dense range itself.
// Selecting in place zeroes the range; a dense form restores it from the
// packed copy (+0 + x is x: the same bits). `bound` caps the nonzeros (the
// pieces' entries): buffers sized by it hold all of them.
dctResult_t reduceForm(const Split& s, uint64_t bound, const void*& form, uint64_t& bytes, uint64_t& nnz) {
  dctCompressor_t c = s.c;
  const size_t length = s.length(s.me);
  form = s.range(s.me);
  bytes = 0;
  nnz = 0;
  if (length == 0 || bound == 0) return dctSuccess;  // nothing summed: the range is all +0
  if (bound > length) bound = length;
  const size_t indexBytes = alignedIndexBytes(bound, c->indexBytes);
  DCTCHECK(c->selection.reserve(indexBytes + bound * s.sumBytes));
  SelectArgs sel;
  DCTCHECK(selectNonzeros(c, s.range(s.me), s.range(s.me), length, bound, c->selection.as(),
                          c->selection.as<char>() + indexBytes, sel, s.stream));
  return smallerForm(s, sel, form, bytes, nnz);
}

// Pieces this sparse for their range (kSplitUnionFill, cost_model.h) are
// summed as their union, not merged dense and selected (at 1% from four
// ranks: 10K entries walked against two passes over 256K elements). The
// union's walk costs 5-10 ns an entry, the two passes 1-2 ns an element.
bool unionsRange(const Split& s, uint64_t bound, const OwnerDraft* owner) {
  return owner == nullptr && s.c->ops->mergePackedCoo != nullptr && bound <= s.length(s.me) / kSplitUnionFill;
}

// The owner's range in its smaller form from the pieces' union
// (mergePackedCoo): the entries and bits reduceForm selects from the
// merged range. The range in the target is written only where it travels
// dense.
dctResult_t unionForm(const Split& s, const std::vector<PackedMessage>& pieces, uint64_t bound, const void*& form,
                      uint64_t& bytes, uint64_t& nnz) {
  dctCompressor_t c = s.c;
  form = s.range(s.me);
  bytes = nnz = 0;
  if (s.length(s.me) == 0 || bound == 0) return dctSuccess;  // an empty packed form: all +0
  const size_t indexBytes = alignedIndexBytes(bound, c->indexBytes);
  DCTCHECK(c->selection.reserve(indexBytes + bound * s.sumBytes));
  SelectArgs sel;
  sel.outIndices = c->selection.as();
  sel.outValues = c->selection.as<char>() + indexBytes;
  MergeCooArgs merge{pieces.data(), s.P, s.length(s.me), c->accType, c->wireType, c->indexBytes, 1.0, tauFloor(c),
                     sel.outIndices, sel.outValues, bound};
  if (dctResult_t res = c->ops->mergePackedCoo(c->kernels, &merge, s.stream); res != dctSuccess)
    return malformedPiece(s, res, merge.malformed);
  sel.nnz = merge.nnz;
  return smallerForm(s, sel, form, bytes, nnz);
}

// Global top-k: the owner's kept entries (global_topk.h) in the smaller of
// packed and dense form; the range becomes zeros + those entries (dense) or
// zeros, its entries written with everyone else's from the gathered form.
dctResult_t ownerForm(const Split& s, uint64_t inflow, OwnerDraft& draft, const void*& form, uint64_t& bytes,
                      uint64_t& nnz) {
  dctCompressor_t c = s.c;
  const size_t length = s.length(s.me);
  SelectArgs sel;
  DCTCHECK(ownerSelect(c, s.range(s.me), s.begin(s.me), length, inflow, sel, draft, s.stream));
  form = s.range(s.me);
  bytes = nnz = 0;
  if (length == 0) return dctSuccess;
  DCTCHECK(c->ops->zero(c->kernels, s.range(s.me), length * s.sumBytes, s.stream));
  if (sel.nnz == 0) return dctSuccess;
  return smallerForm(s, sel, form, bytes, nnz);
}

}  // namespace dct
