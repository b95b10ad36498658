// The types the select ops take (selectCompact, selectDense), one table for
// both twins (cpu_select.cc, cuda/cuda_select*.cu), so they accept and
// refuse the same combinations: the accumulator T is fp32 or fp64, indices
// 4 or 8 bytes, and the gradient G and the values V are each T or a
// narrower float type (fp32, fp16, bf16). Anything else is dctNotSupported.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/half_types.h"
#include "dct/dct.h"
#include "kernels/select_args.h"

namespace dct::select_types {

// fn.template operator()<X...>(), whether it returns a dctResult_t or nothing.
template <typename... X, typename Fn>
dctResult_t call(Fn&& fn) {
  if constexpr (std::is_void_v<decltype(fn.template operator()<X...>())>) {
    fn.template operator()<X...>();
    return dctSuccess;
  } else {
    return fn.template operator()<X...>();
  }
}

// T of `accType`: fp32 or fp64.
template <typename Fn>
dctResult_t accumulator(dctDataType_t accType, Fn&& fn) {
  if (accType == dctFloat32) return call<float>(fn);
  if (accType == dctFloat64) return call<double>(fn);
  return dctNotSupported;
}

// A gradient's or the values' type: T itself or a narrower float type.
template <typename T, typename Fn>
dctResult_t narrowOrSame(dctDataType_t accType, dctDataType_t type, Fn&& fn) {
  if (type == accType) return call<T>(fn);
  if (type == dctFloat32) return call<float>(fn);
  if (type == dctFloat16) return call<Half>(fn);
  if (type == dctBFloat16) return call<BFloat16>(fn);
  return dctNotSupported;
}

}  // namespace dct::select_types

namespace dct {

// fn.template operator()<T, G, V>() for a select's accumulator, gradient
// and value types.
template <typename Fn>
dctResult_t dispatchSelectValues(const SelectArgs& a, Fn&& fn) {
  using namespace select_types;
  return accumulator(a.dtype, [&]<typename T>() {
    return narrowOrSame<T>(a.dtype, a.gradT(), [&]<typename G>() {
      return narrowOrSame<T>(a.dtype, a.valueT(), [&]<typename V>() { return call<T, G, V>(fn); });
    });
  });
}

// fn.template operator()<T, G, V, I>(): the same, with the index type.
template <typename Fn>
dctResult_t dispatchSelect(const SelectArgs& a, Fn&& fn) {
  return dispatchSelectValues(a, [&]<typename T, typename G, typename V>() {
    return a.indexBytes == 8 ? select_types::call<T, G, V, uint64_t>(fn) : select_types::call<T, G, V, uint32_t>(fn);
  });
}

}  // namespace dct
