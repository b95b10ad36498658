// Test seam: wraps a comm's transport so that one chosen operation fails,
// on one rank or on all, the way a real fault would look to libdct:
//  * prepare() (local staging) fails without doing anything;
//  * a data op still takes part in the collective (peers never wait on a
//    rank that gave up), then garbles what it received and reports
//    dctTransportError, so a result built from it would be caught;
//  * vote() contributes a failure (the rank knows it failed) and reports it;
//  * a transport's host staging (host_staging.h) fails as a failed device
//    copy would, inside the op, which must still take part.
// Used by tests/mpi/test_fault_injection.cc; production code never arms it.
#pragma once

#include <cstdint>

#include "dct/dct.h"

namespace dct {

// Installs the wrapper (once per comm; destroyed with the comm).
dctResult_t installFaultSeam(dctComm_t comm);
// The operation `after` operations from now fails on `rank` (-1: on every
// rank); one shot.
void armFault(dctComm_t comm, uint64_t after, int rank);
// Whether an armed fault has yet to fire on this rank; disarming cancels it
// (a hierarchical comm's ranks run different op counts, so op n may never
// come on some).
bool faultArmed(dctComm_t comm);
void disarmFault(dctComm_t comm);
// Operations seen so far (prepare, data ops and votes alike).
uint64_t transportOps(dctComm_t comm);
// Of which prepare() calls.
uint64_t transportPrepares(dctComm_t comm);

// The staging call `after` calls from now (input and output alike, any comm
// of this process) fails; one shot. Host buffers count too, so host-only
// builds reach the same paths.
void armStagingFault(uint64_t after);
bool stagingFaultArmed();
// Counts a staging call; true if it is the armed one (host_staging.cc).
bool stagingFaultHit();

// The next MPI comm this process creates (dctCommInitMpi, a split) finds
// no memory for its state, as a real allocation failure would; one shot.
void armCommCreateFault();
// True once after arming (mpi.cc's createMpiComm).
bool commCreateFaultHit();

}  // namespace dct
