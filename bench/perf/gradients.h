// Benchmark input: a stream of gradient-like tensors (or uniform noise),
// cheap enough to redraw every iteration at 64 MiB without dominating the
// run, and seeded per rank so runs repeat exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dct/dct.h"

namespace dctbench {

class GradientSource {
 public:
  // uniform: i.i.d. values in [-1, 1). Otherwise gradient-like: a per-element
  // scale fixed for the source's lifetime (log-normal, sigma 1: some
  // coordinates always get larger gradients) times fresh Student-t(3) noise
  // (heavy tails). The error-feedback residual then grows for a few dozen
  // steps, so the first tau goes stale and drift re-estimation runs; later
  // the selection settles. (A decaying global magnitude was tried: it makes
  // the count fall below k/4 and re-estimate every step, unlike training.)
  GradientSource(uint64_t seed, bool uniform);

  // Next draw of `count` elements into out (float or double). Restarts the
  // stream (new scales) when count changes.
  void fill(void* out, size_t count, dctDataType_t dtype);

 private:
  uint64_t next();
  void resize(size_t count);
  template <typename T>
  void fillTyped(T* out);

  uint64_t seed_, state_;
  bool uniform_;
  size_t count_ = 0;
  std::vector<float> scale_;  // per element
  std::vector<float> noise_;  // 65536 Student-t(3) draws, picked at random
};

}  // namespace dctbench
