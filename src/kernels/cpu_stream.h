// Non-temporal writes for outputs that leave the caches before anyone
// reads them again (kernels.h's kStreamBytes): a plain store first reads
// each line for ownership, a streamed one does not, so a write-only pass
// moves half the memory traffic. Streamed stores are weakly ordered:
// streamFence() before another thread reads what a worker wrote.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
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

inline void streamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace dct
