// Functions shared by both twins are compiled for the host and, under nvcc,
// for the device too.
#pragma once

#if defined(__CUDACC__)
#define DCT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define DCT_HOST_DEVICE inline
#endif
