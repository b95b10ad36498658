// memcmp for test buffers that may be empty (an empty vector's data() may
// be null, which memcmp must not get even with a zero size).
#pragma once

#include <cstddef>
#include <cstring>

namespace dcttest {

inline bool sameBytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

}  // namespace dcttest
