#include "transport/mpi_limits.h"

#include <climits>

namespace dct {
namespace {
size_t countLimit = INT_MAX;
}

size_t mpiCountLimit() { return countLimit; }
void setMpiCountLimitForTesting(size_t limit) { countLimit = limit && limit < INT_MAX ? limit : INT_MAX; }

}  // namespace dct
