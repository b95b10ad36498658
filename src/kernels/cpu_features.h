// CPU features the vector bodies are picked by at run time.
#pragma once

namespace dct {

#if defined(__SSE2__)
// AVX2 (every such CPU also has POPCNT, which the AVX2 bodies use).
inline bool cpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#else
inline bool cpuHasAvx2() { return false; }
#endif

}  // namespace dct
