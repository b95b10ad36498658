// No exception leaves a shim's intercepted call (its caller may be C): the
// layer's own error code instead.
#pragma once

#include <new>

namespace dct::preload {

template <typename Code, typename Fn>
Code shielded(Code outOfMemory, Code otherwise, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return outOfMemory;
  } catch (...) {
    return otherwise;
  }
}

}  // namespace dct::preload
