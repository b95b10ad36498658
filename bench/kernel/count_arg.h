// Element-count flags of the kernel benchmarks: "64K" -> 65536, "16M";
// false on junk or below 1.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace dctbench {

inline bool parseCount(const char* s, size_t& out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 1) return false;
  if (*end == 'k' || *end == 'K') v *= 1024.0, end++;
  else if (*end == 'm' || *end == 'M') v *= 1024.0 * 1024, end++;
  out = static_cast<size_t>(v);
  return *end == '\0';
}

}  // namespace dctbench
