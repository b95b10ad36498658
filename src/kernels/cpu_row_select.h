// The bodies of the CPU twin's DCT-MP row selection (kernels.h rowSelect),
// by name, so that tests run each on a CPU that would pick another.
#pragma once

#include "kernels/kernels.h"

namespace dct {

enum class RowBody { kScalar, kSse2, kAvx2 };

// The body rowSelect runs on this CPU.
RowBody bestRowBody();

// rowSelect through `body`; dctNotSupported where this CPU lacks it.
dctResult_t cpuRowSelectWith(KernelContext* ctx, RowSelectArgs* args, RowBody body);

}  // namespace dct
