// Exceptions never cross the ops table. A kernel runs inside a step, where
// an exception would take this rank out of the step's remaining collectives
// and leave the others waiting; here it becomes an error code instead,
// which the step's votes bring to every rank. (A thread-pool body's
// exception reaches the calling thread first: thread_pool.h.)
#pragma once

#include <new>

#include "dct/dct.h"

namespace dct {

template <auto F>
struct NoThrow;

template <typename... A, dctResult_t (*F)(A...)>
struct NoThrow<F> {
  static dctResult_t call(A... args) noexcept {
    try {
      return F(args...);
    } catch (const std::bad_alloc&) {
      return dctOutOfMemory;
    } catch (...) {
      return dctInternalError;
    }
  }
};

}  // namespace dct
