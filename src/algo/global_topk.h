// Global top-k (dctAlgoGlobalTopk, after Ok-Topk and gTop-k): the split
// algorithm (split_allreduce.h), except that each range's owner, once it
// has summed the ranks' pieces in rank order, adds its owner residual and
// delivers only the entries with |x| >= tau_owner, tau_owner estimated on
// that sum so its range keeps about kOwnerTargetScale * density * range
// entries (core/owner_target.h: the tensor about 4k). The rest becomes the
// new owner residual. The allgather of the ranges then carries about 4k
// entries in all instead of the union of every rank's selection, which
// fills the tensor as ranks are added.
//
// Nothing is lost: summed over ranks, delivered results + worker residuals
// + owner residuals = all gradients, exactly where the arithmetic is exact.
#pragma once

#include <cstddef>

#include "core/compressor.h"

namespace dct {

// Before a step: an owner residual this step will not read (the plan is not
// global top-k, or this rank owns [begin, begin + length) now, another
// range) moves into the committed worker residual, which covers the whole
// tensor. The sum over ranks of every residual is unchanged, so the move
// needs no commit: a step that fails afterwards leaves an equivalent state.
dctResult_t foldOwnerResidual(dctCompressor_t c, size_t begin, size_t length, void* stream);

// The owner's selection: acc = range (the summed pieces, accType) + the
// committed owner residual; tau_owner on acc every L steps by the config's
// method; a stale tau_owner that selects nothing is starved (drain.h) and
// estimated again at once, aimed at k, or, with nothing summed into the
// range (inflow: the pieces' entries), at more as the owner residual drains;
// exactly (the aim-th largest) whenever the count leaves the compressor's
// drift band around its aim, then selected again in the same step (a range
// is 1/P of the tensor); the entries with !(|acc| < tau_owner) into sel
// (c->selection: indices relative to the range, values in accType), the
// rest into the spare owner residual. The range itself is left as it was.
// Records the outcome in `draft`.
dctResult_t ownerSelect(dctCompressor_t c, const void* range, size_t begin, size_t length, uint64_t inflow,
                        SelectArgs& sel, OwnerDraft& draft, void* stream);

// With the step's commit: the spare owner residual becomes the committed
// one (without error feedback the rest is dropped, as the worker's is; with
// config.ownerReturn it was returned), and the owner's stats.
void commitOwner(dctCompressor_t c, const OwnerDraft& draft);

// config.ownerReturn (Ok-Topk's residual): what an owner does not select
// goes back to the ranks that sent it. keepSent copies this rank's COO
// (compressStep's msg) into c->sent before the exchange, whose owner
// select reuses c->selection; once the ranges are in `result`, each sent
// entry that reads +-0 there (no owner delivered it) is added back into
// the spare worker residual. Summed over ranks the returns are the owners'
// unselected sums, so the owners keep nothing. An index whose sum is 0
// (ranks' entries cancel) returns too: its mass is 0, but its entries stay.
// returnUndelivered runs only where returnsUndelivered (keepSent checks).
bool returnsUndelivered(dctCompressor_t c, const Message& msg);
dctResult_t keepSent(dctCompressor_t c, const Message& msg, void* stream);
dctResult_t returnUndelivered(dctCompressor_t c, const Message& msg, const void* result, dctDataType_t resultType,
                              void* stream);

}  // namespace dct
