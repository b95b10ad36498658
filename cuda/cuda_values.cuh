// Device arithmetic on the four value types (float, double, Half, BFloat16)
// that writes the bits the CPU twin writes on its host. Loads and rounding
// stores are the shared ones (base/half_types.h); what differs on a GPU is
// NaN: its add, multiply and float<->double conversions return one canonical
// positive NaN, where x86 keeps a NaN operand's sign (and payload) and makes
// a negative NaN of Inf - Inf or 0 * Inf. A half keeps only the sign of a NaN
// (half_types.h), so the sign must come out as on the host: the ops below
// compute as usual and fix the NaN cases up (one compare on the fast path).
// The _rn intrinsics are never contracted into FMAs, as the CPU twin's
// separate adds and multiplies are not.
#pragma once

#include <cuda/std/cmath>
#include <cuda/std/type_traits>

#include "base/dtype.h"
#include "base/half_types.h"
#include "cuda_context.cuh"

namespace dct::gpu {

// The sign of the NaN the host's FPU makes from non-NaN operands.
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
constexpr bool kHostNaNNegative = true;  // x86's "real indefinite" 0xffc00000
#else
constexpr bool kHostNaNNegative = false;  // aarch64, POWER: the positive default NaN
#endif

__device__ __forceinline__ bool isNan(float x) { return ::cuda::std::isnan(x); }
__device__ __forceinline__ bool isNan(double x) { return ::cuda::std::isnan(x); }
__device__ __forceinline__ bool signBit(float x) { return __float_as_uint(x) >> 31; }
__device__ __forceinline__ bool signBit(double x) { return static_cast<uint64_t>(__double_as_longlong(x)) >> 63; }

template <typename A>
__device__ __forceinline__ A quietNaN(bool negative) {
  if constexpr (::cuda::std::is_same_v<A, float>) return __uint_as_float(negative ? 0xffc00000u : 0x7fc00000u);
  else return __longlong_as_double(negative ? static_cast<long long>(0xfff8000000000000ull) : 0x7ff8000000000000ll);
}
// A NaN operand as x86 returns it: quieted, sign and payload kept.
__device__ __forceinline__ float quieted(float x) { return __uint_as_float(__float_as_uint(x) | 0x00400000u); }
__device__ __forceinline__ double quieted(double x) {
  return __longlong_as_double(__double_as_longlong(x) | 0x0008000000000000ll);
}

// static_cast between float and double, a NaN keeping its sign.
template <typename To, typename From>
__device__ __forceinline__ To castValue(From x) {
  if constexpr (::cuda::std::is_same_v<To, From>) return x;
  else return isNan(x) ? quietNaN<To>(signBit(x)) : static_cast<To>(x);
}

// The result r of a op b, NaN as the host makes it: a NaN operand (the
// first, when both are) or else the host's default NaN.
template <typename A>
__device__ __forceinline__ A hostNaN(A r, A a, A b) {
  if (!isNan(r)) return r;
  if (isNan(a)) return quieted(a);
  if (isNan(b)) return quieted(b);
  return quietNaN<A>(kHostNaNNegative);
}
__device__ __forceinline__ float hostAdd(float a, float b) { return hostNaN(__fadd_rn(a, b), a, b); }
__device__ __forceinline__ double hostAdd(double a, double b) { return hostNaN(__dadd_rn(a, b), a, b); }
__device__ __forceinline__ float hostSub(float a, float b) { return hostNaN(__fsub_rn(a, b), a, b); }
__device__ __forceinline__ double hostSub(double a, double b) { return hostNaN(__dsub_rn(a, b), a, b); }
__device__ __forceinline__ float hostMul(float a, float b) { return hostNaN(__fmul_rn(a, b), a, b); }
__device__ __forceinline__ double hostMul(double a, double b) { return hostNaN(__dmul_rn(a, b), a, b); }

template <typename T>
using AccOf = typename Value<T>::Acc;

// T's value in Acc (exact), and an accumulator rounded to T.
template <typename T>
__device__ __forceinline__ AccOf<T> loadValue(T x) {
  return Value<T>::load(x);
}
template <typename T, typename A>
__device__ __forceinline__ T storeValue(A a) {
  return Value<T>::store(castValue<AccOf<T>>(a));
}
// T's value in any float type A (convertValue's exact widening, or the one
// rounding of a narrowing).
template <typename A, typename T>
__device__ __forceinline__ A widenValue(T x) {
  return castValue<A>(loadValue(x));
}
// storeSaturated (half_types.h) with the NaN sign kept (a NaN passes
// through untouched when no float <-> double conversion is involved).
template <typename V, typename A>
__device__ __forceinline__ V saturateValue(A a, AccOf<V> limit) {
  if constexpr (::cuda::std::is_same_v<AccOf<V>, A>) return storeSaturated<V>(a, limit);
  else return isNan(a) ? Value<V>::store(quietNaN<AccOf<V>>(signBit(a))) : storeSaturated<V>(a, limit);
}
// SelectArgs.valueLimit as the kernels use it: a V narrower than T clamps
// there (the CPU twin's limitOf), else at V's largest finite value.
template <typename T, typename V>
AccOf<V> valueLimitOf(const SelectArgs& a) {
  if (::cuda::std::is_same_v<V, T> || a.valueLimit <= 0) return Value<V>::max();
  return static_cast<AccOf<V>>(a.valueLimit);
}

// dense += value, formed in D's accumulation type and rounded to D once
// (cpu_context.h's addInto).
template <typename D, typename V>
__device__ __forceinline__ void addInto(D& dense, V value) {
  using Acc = AccOf<D>;
  if constexpr (::cuda::std::is_same_v<D, V> && ::cuda::std::is_same_v<D, Acc>) dense = hostAdd(dense, value);
  else dense = Value<D>::store(hostAdd(loadValue(dense), widenValue<Acc>(value)));
}

// convert's element (cuda_convert.cu): src * factor formed in W (double
// when either side is fp64, else float), rounded once to D's accumulation
// type, then to D; a factor of exactly 1 is a plain conversion.
template <typename D, typename S>
using WideOf = ::cuda::std::conditional_t<
    ::cuda::std::is_same_v<D, double> || ::cuda::std::is_same_v<S, double>, double, float>;
template <typename D, typename S, typename W>
__device__ __forceinline__ D convertElement(S x, W factor, bool unit) {
  return unit ? storeValue<D>(loadValue(x)) : storeValue<D>(hostMul(widenValue<W>(x), factor));
}

template <typename T>
__device__ __forceinline__ bool finiteValue(T x) {
  return ::cuda::std::isfinite(loadValue(x));
}

// Runs fn.template operator()<G>(grad, in) for a select's error-feedback
// pass, acc = in + T(grad): with the gradient itself where the kernels read
// it (T, or a half widened into fp32: the types libdct sends), else, for
// any other gradient type, after the add op has formed acc in the residual,
// with no gradient over the residual (which keeps the kernel set small).
template <typename T, typename Fn>
dctResult_t withGradient(KernelContext* ctx, const SelectArgs& a, void* stream, Fn&& fn) {
  const T* in = static_cast<const T*>(a.in());
  if (a.grad == nullptr || a.gradT() == a.dtype) return fn.template operator()<T>(static_cast<const T*>(a.grad), in);
  if constexpr (::cuda::std::is_same_v<T, float>) {
    if (a.gradT() == dctFloat16) return fn.template operator()<Half>(static_cast<const Half*>(a.grad), in);
    if (a.gradT() == dctBFloat16) return fn.template operator()<BFloat16>(static_cast<const BFloat16*>(a.grad), in);
  }
  DCTCHECK(add(ctx, a.residual, a.in(), a.grad, a.n, a.dtype, a.gradT(), stream));
  return fn.template operator()<T>(nullptr, static_cast<const T*>(a.residual));
}

}  // namespace dct::gpu
