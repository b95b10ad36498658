/* libdct over NCCL (device buffers, stream-ordered). */
#ifndef DCT_NCCL_H_
#define DCT_NCCL_H_

#include <nccl.h>

#include "dct/dct.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Wraps an initialised NCCL communicator (not owned: destroy the dctComm_t
 * before ncclCommDestroy). Collectives then take device buffers and run on
 * the stream passed to each call (a cudaStream_t, NULL for the default). */
DCT_EXPORT dctResult_t dctCommInitNccl(ncclComm_t ncclComm, dctComm_t* comm);

#ifdef __cplusplus
}
#endif
#endif /* DCT_NCCL_H_ */
