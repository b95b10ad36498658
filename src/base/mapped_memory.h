// Anonymous memory straight from the kernel, never the heap: the CPU twin's
// tensor-sized blocks (on huge-page boundaries) and the link probe's
// buffers (whose heap memory, reused by a compressor after MPI had sent
// from it, slowed its selection for good).
#pragma once

#include <cstddef>

namespace dct {

// `bytes` zero-filled bytes at a multiple of `align` (a power of two; 0: a
// page), asked for transparent huge pages if `hugePages`; null if the
// kernel refuses. Give them back with unmapMemory(ptr, bytes).
void* mapMemory(size_t bytes, size_t align = 0, bool hugePages = false);
void unmapMemory(void* ptr, size_t bytes);

}  // namespace dct
