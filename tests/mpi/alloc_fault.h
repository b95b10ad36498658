// Test-only allocation fault seam: alloc_fault.cc replaces the global
// operator new / new[] (every variant) of the test executable, so the
// library's containers and Buffer::reserve (new (std::nothrow)) go through
// it. Armed, it counts allocations on every thread and fails the n-th once:
// a throwing new throws std::bad_alloc, a nothrow new returns nullptr.
// Production never links it. Device allocations (cudaMalloc) do not pass
// here; MPI's own (malloc) neither.
#pragma once

#include <cstdint>

namespace dcttest::alloc {

// Counts allocations from now on; the failAt-th (0-based) fails once.
// failAt < 0: count only.
void arm(long long failAt);
// Stops counting; returns how many allocations were made since arm().
long long disarm();
// Whether the armed failure happened since the last arm().
bool fired();

// Armed for a scope: disarmed (and counted) when it ends.
class Armed {
 public:
  explicit Armed(long long failAt) { arm(failAt); }
  ~Armed() { stop(); }
  long long stop() {
    if (!stopped_) count_ = disarm();
    stopped_ = true;
    return count_;
  }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;

 private:
  long long count_ = 0;
  bool stopped_ = false;
};

}  // namespace dcttest::alloc
