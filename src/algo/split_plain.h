// Split's plain range form (host twin): the owner's union as it came, nnz
// indices relative to the range (c->indexBytes each, padded to 8 bytes),
// then nnz values in the accumulation type. Bigger on the wire than the
// packed form, but every rank reads it with one pass and no decoding:
// where bytes are cheap (shared memory), that pass is what the call costs.
// Announced as nnz | kSplitPlainBit (split_allreduce.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "dct/dct.h"

namespace dct {

size_t plainFormBytes(uint64_t nnz, int indexBytes, size_t sumBytes);

// The union's COO at `coo` (indices, then values at valuesAt) made a plain
// form in place: the values move down behind the padded indices.
void compactPlainForm(void* coo, size_t valuesAt, uint64_t nnz, int indexBytes, size_t sumBytes);

// A plain form checked (indices strictly ascending and below `length`)
// and, where `range` is set, written: the range +0, then +0 + each value
// (the packed form's bits). False when malformed, with nothing written.
bool writePlainRange(const void* form, uint64_t nnz, uint64_t length, int indexBytes, dctDataType_t acc,
                     void* range);

// A plain form's COO: base + index, x = +0 + value (x *= factor where
// factor != 1, as the scale op), kept where !(|x| < tau), as
// mergePackedCoo lists a packed form. Checked as it is read: false when
// malformed (what was written is then left behind, not counted).
bool listPlainRange(const void* form, uint64_t nnz, uint64_t length, uint64_t base, int indexBytes,
                    dctDataType_t acc, double factor, double tau, void* outIndices, void* outValues, size_t& kept);

}  // namespace dct
