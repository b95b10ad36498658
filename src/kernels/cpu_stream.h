// Non-temporal writes for outputs that leave the caches before anyone
// reads them again (kernels.h's kStreamBytes): a plain store first reads
// each line for ownership, a streamed one does not, so a write-only pass
// moves half the memory traffic. Streamed stores are weakly ordered:
// streamFence() before another thread reads what a worker wrote.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>

#include "kernels/cpu_features.h"
#endif

namespace dct {

inline bool streamAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// to[0, bytes) = from[0, bytes); `to` and `from` 16-byte aligned.
inline void streamCopy(void* to, const void* from, size_t bytes) {
  size_t done = 0;
#if defined(__SSE2__)
  auto* dst = static_cast<__m128i*>(to);
  auto* src = static_cast<const __m128i*>(from);
  for (; done + 16 <= bytes; done += 16) _mm_stream_si128(dst++, _mm_load_si128(src++));
#endif
  std::memcpy(static_cast<char*>(to) + done, static_cast<const char*>(from) + done, bytes - done);
}

#if defined(__SSE2__)
// streamOutAndZero's body: 32-byte lanes, each streamed out and zeroed in
// one pass. Two passes (memset after the copy) cost a quarter more.
__attribute__((target("avx2"))) inline size_t streamOutAndZeroAvx2(void* to, void* from, size_t bytes) {
  auto* dst = static_cast<float*>(to);
  auto* src = static_cast<float*>(from);
  const __m256 zero = _mm256_setzero_ps();
  size_t done = 0;
  for (; done + 32 <= bytes; done += 32, dst += 8, src += 8) {
    _mm256_stream_ps(dst, _mm256_load_ps(src));
    _mm256_store_ps(src, zero);
  }
  return done;
}

__attribute__((target("avx2"))) inline void streamZeroAvx2(char* to, size_t bytes) {
  const __m256 zero = _mm256_setzero_ps();
  for (size_t done = 0; done < bytes; done += 32) _mm256_stream_ps(reinterpret_cast<float*>(to + done), zero);
}
#endif

// to[0, bytes) = 0, the 32-byte aligned middle streamed (where AVX2 is: 2.2x
// glibc's memset of 64 MiB here, whose large fills are not streamed), the
// ends stored. The caller fences (streamFence) before another thread reads.
inline void streamZero(void* to, size_t bytes) {
  char* p = static_cast<char*>(to);
  size_t head = 0, body = 0;
#if defined(__SSE2__)
  if (cpuHasAvx2()) {
    head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(p) % 32) % 32);
    body = (bytes - head) & ~size_t(31);
    streamZeroAvx2(p + head, body);
  }
#endif
  std::memset(p, 0, head);
  std::memset(p + head + body, 0, bytes - head - body);
}

// to[0, bytes) = from[0, bytes), then from[0, bytes) = 0: a block built in
// cache, streamed out, left zeroed for the next. `to` and `from` 16-byte
// aligned.
inline void streamOutAndZero(void* to, void* from, size_t bytes) {
  size_t done = 0;
#if defined(__SSE2__)
  if (cpuHasAvx2() && reinterpret_cast<uintptr_t>(to) % 32 == 0 && reinterpret_cast<uintptr_t>(from) % 32 == 0)
    done = streamOutAndZeroAvx2(to, from, bytes);
#endif
  streamCopy(static_cast<char*>(to) + done, static_cast<char*>(from) + done, bytes - done);
  std::memset(static_cast<char*>(from) + done, 0, bytes - done);
}

inline void streamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace dct
