// kernel_perf's DCT-MP row kernels: n elements as n / rowLength rows, top-K
// per row (K = ceil(rowDensity * rowLength)), then the wire pack of those
// rows and the unpack into dense rows, through the CPU ops table.
//
// Bytes per call are those of the dense rows the kernels stand for, es per
// element: row-select reads every element once; row-unpack writes every
// element once (zeros included); row-pack reads only the kept entries (and
// the masks), so its "GB/s" is dense-row equivalent, not memory traffic.
#pragma once

#include <functional>

#include "kernel_bench.h"

namespace dctbench {

// Appends row-select, row-pack and row-unpack timings; `median` times a
// body (returns dctResult_t) over the configured repetitions.
bool runRowKernels(const KernelOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx, size_t n,
                   const void* rows, void* out, const std::function<double(const std::function<dctResult_t()>&)>& median,
                   SizeResult& result);

}  // namespace dctbench
