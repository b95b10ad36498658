// kernel_perf's 1-bit kernels, through the CPU ops table as the allreduce
// calls them at 4 ranks (onebit_allreduce.cc): a worker's compression of n
// elements into 4 slots, a server's compression of the 4 ranks' mean of n
// elements plus its error, and the decode of n elements from 4 slots.
//
// Bytes per call are the least traffic, es per element per tensor-sized
// read or write: onebit-worker 3*es (read input and its kept x, write x),
// onebit-server 2*es (read and write its kept x), onebit-decode es (write
// the result); the n/8-byte slots are not counted. Both compressions run
// as the allreduce runs them: one pass, x kept (keepX, pending).
#pragma once

#include <functional>

#include "kernel_bench.h"

namespace dctbench {

// Appends onebit-worker, onebit-server and onebit-decode timings; `median`
// times a body (returns dctResult_t) over the configured repetitions.
// input/error/out: n elements of opt.dtype, laid out as the compressor's.
bool runOnebitKernels(const KernelOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx, size_t n,
                      const void* input, void* error, void* out,
                      const std::function<double(const std::function<dctResult_t()>&)>& median, SizeResult& result);

}  // namespace dctbench
