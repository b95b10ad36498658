/* libdct over MPI (host buffers). */
#ifndef DCT_MPI_H_
#define DCT_MPI_H_

#include <mpi.h>

#include "dct/dct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over mpiComm. Duplicates it (with MPI_ERRORS_RETURN on the
 * duplicate), so libdct traffic never mixes with the caller's. MPI must be
 * initialised; destroy the comm before MPI_Finalize. */
DCT_EXPORT dctResult_t dctCommInitMpi(MPI_Comm mpiComm, dctComm_t* comm);

#ifdef __cplusplus
}
#endif
#endif /* DCT_MPI_H_ */
