// The CPU twin's 1-bit vector bodies (cpu_onebit_body.h) for SSE2, the
// x86-64 baseline, and AVX2, chosen at run time where the CPU has it
// (cpuHasAvx2). Each instruction set gets its own copy of the bodies in a
// namespace of its own, so no inline function compiled for AVX2 can stand
// in for the SSE2 one at link time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/half_types.h"
#include "kernels/onebit_kernels.h"

namespace dct {

// Where a compression's x comes from (onebit_kernels.h): the tensor plus
// the error, the error alone, or the ranks' decoded mean plus the error.
enum OnebitMode { kFromInput, kFromError, kFromMean };

template <typename T, typename A>
struct OnebitSource {
  const T* input;
  const A* err;
  bool pending;  // err holds a kept x: its error is err - (err >= 0 ? p : -p)
  A pendingPlus, pendingMinus;  // p, -p
  // kFromMean: the ranks' slots, and per rank its sign words of the chunk,
  // its scale and the scale negated.
  OnebitSlotsOf<A> slots;
  int ranks;
  const uint32_t* const* words;
  const A* plus;
  const A* minus;
};

}  // namespace dct

#if defined(__SSE2__)
#include <immintrin.h>
#define DCT_ONEBIT_SIMD 1

namespace dct {

namespace onebit_sse2 {
#define DCT_ONEBIT_TARGET
#define DCT_ONEBIT_BYTES 16
#include "kernels/cpu_onebit_body.h"
#undef DCT_ONEBIT_TARGET
#undef DCT_ONEBIT_BYTES
}  // namespace onebit_sse2

namespace onebit_avx2 {
#define DCT_ONEBIT_TARGET __attribute__((target("avx2")))
#define DCT_ONEBIT_BYTES 32
#include "kernels/cpu_onebit_body.h"
#undef DCT_ONEBIT_TARGET
#undef DCT_ONEBIT_BYTES
}  // namespace onebit_avx2

}  // namespace dct
#else
#define DCT_ONEBIT_SIMD 0
#endif
