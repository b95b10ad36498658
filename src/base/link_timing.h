// What a comm measured of its transport's dense allreduce when it was made
// (transport/link_probe.h): the cost model's starting point for this
// machine's links (core/cost_model.h), identical on every rank.
#pragma once

#include <cstddef>

namespace dct {

struct LinkTiming {
  size_t smallBytes = 0, largeBytes = 0;
  double smallUs = 0, largeUs = 0;  // the best rank's best time at each size
  // Usable: noise can still invert the two on oversubscribed cores (the
  // model then keeps its defaults, on every rank alike).
  bool measured() const { return smallUs > 0 && largeUs > smallUs && largeBytes > smallBytes; }
  // Measured up to `bytes`: beyond, a dense allreduce leaves the caches (on
  // shared memory 64 MiB ran at a third of 1 MiB's rate), and the fit would
  // send auto on probes of dense and split that lose.
  bool covers(size_t bytes) const { return measured() && bytes <= largeBytes; }
};

}  // namespace dct
