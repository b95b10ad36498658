#include "transport/mpi_post_fault.h"

#include <atomic>

namespace dct {
namespace {
// Posts left before the failing one; UINT64_MAX: none armed. Production
// pays one relaxed load per post.
std::atomic<uint64_t> postsLeft{UINT64_MAX};
}  // namespace

void armMpiPostFault(uint64_t after) { postsLeft.store(after, std::memory_order_relaxed); }
bool mpiPostFaultArmed() { return postsLeft.load(std::memory_order_relaxed) != UINT64_MAX; }

bool mpiPostFaultHit() {
  const uint64_t left = postsLeft.load(std::memory_order_relaxed);
  if (left == UINT64_MAX) return false;
  postsLeft.store(left == 0 ? UINT64_MAX : left - 1, std::memory_order_relaxed);
  return left == 0;
}

}  // namespace dct
