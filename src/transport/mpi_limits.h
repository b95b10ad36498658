// MPI's int counts: the largest piece one MPI call moves. A test seam can
// lower it so the split paths run at small sizes (tests/unit, tests/mpi).
#pragma once

#include <cstddef>

namespace dct {

size_t mpiCountLimit();
// 0 restores INT_MAX (also the most it can be). Not thread-safe; for tests only.
void setMpiCountLimitForTesting(size_t limit);

}  // namespace dct
