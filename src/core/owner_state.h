// What a range owner keeps between global top-k steps (dctAlgoGlobalTopk):
// the part of its range's sum it did not deliver, double-buffered like the
// compressor's residual so a failed step changes nothing, and the owner's
// own threshold schedule (its tau is on the reduced values, not on any
// rank's accumulator).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/twin_buffer.h"

namespace dct {

struct OwnerState {
  TwinBuffer residuals[2];  // `length` values of the accumulation type
  int committed = 0;
  // The tensor's entries the committed residual stands for: [begin, begin +
  // length). A step owning another range (another comm, or a plan other
  // than global top-k) first folds it into the worker residual.
  size_t begin = 0, length = 0;
  bool zero = true;  // the committed residual is all zeros (or there is none)
  double tau = 0;
  bool haveTau = false;
  uint64_t lastEstimateStep = 0;
  // The fixed-capacity step's schedule (stream_args.h): the last count left
  // the drift band, so the next step estimates first.
  bool driftPending = false;

  void* residual() const { return residuals[committed].as(); }
  void* spare() const { return residuals[1 - committed].as(); }
};

// One global top-k step's owner outcome, committed with the step.
struct OwnerDraft {
  bool active = false;  // the step ran global top-k: the spare holds the new residual
  size_t begin = 0, length = 0;
  double tau = 0;
  bool estimated = false;
  uint64_t kept = 0;  // entries delivered from this rank's range
  double mass = 0;    // sum of |new residual|
};

}  // namespace dct
