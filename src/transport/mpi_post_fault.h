// Test seam: the MPI transport's nonblocking posts (MPI_Isend, MPI_Irecv of
// ialltoallv, iallgatherv and the split alltoallv) fail as a real post
// would, on the ranks that arm it. Used by tests/mpi/test_mpi_post_faults.cc;
// production code never arms it.
#pragma once

#include <cstdint>

namespace dct {

// The post `after` posts from now (sends and receives alike, any comm of
// this process) fails; one shot. UINT64_MAX disarms.
void armMpiPostFault(uint64_t after);
bool mpiPostFaultArmed();
// Counts a post; true if it is the armed one (mpi_nonblocking.cc).
bool mpiPostFaultHit();

}  // namespace dct
