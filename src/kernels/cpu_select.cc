// CPU twin of the fused EF + threshold select + compaction kernel.
// One pass over the data: each worker compacts its contiguous chunk block by
// block into its own scratch, then the chunks are copied out in worker (that
// is, index) order. Entries past `capacity` go back into the residual.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu_context.h"
#include "kernels/cpu_select_simd.h"
#include "kernels/cpu_stream.h"
#include "kernels/rounding_residual.h"
#include "kernels/select_types.h"

namespace dct {
namespace {

constexpr size_t kBlock = 2048;

// The plain loop, branch-free: [begin, end) appended to idx/val from m.
template <typename T, typename G, typename I, bool kHasGrad>
size_t selectScalar(const G* grad, const T* in, T* residual, size_t begin, size_t end, T tau, I* idx, T* val,
                    size_t m) {
  for (size_t i = begin; i < end; i++) {
    T acc = in[i];
    if constexpr (kHasGrad) acc += static_cast<T>(Value<G>::load(grad[i]));
    const bool take = !(std::fabs(acc) < tau);  // also true for NaN
    idx[m] = static_cast<I>(i);
    val[m] = acc;
    m += take;
    residual[i] = take ? T(0) : acc;
  }
  return m;
}

// Compacts [begin, end) of one block in the accumulator's type: the vector
// body where there is one (one type throughout; streamed stores from the
// first aligned element on), the scalar loop for the rest.
template <typename T, typename G, typename I, bool kHasGrad, bool kStream>
size_t selectBlock(const G* grad, const T* in, T* residual, size_t begin, size_t end, T tau, I* idx, T* val) {
  size_t m = 0, i = begin;
#if DCT_SELECT_SIMD
  if constexpr (std::is_same_v<G, T>) {
    if constexpr (kStream) {
      const size_t align = selectAlignment<T>();
      const size_t skew = reinterpret_cast<uintptr_t>(residual + begin) % align;
      const size_t head = skew == 0 ? 0 : (align - skew) / sizeof(T);
      i = begin + head < end ? begin + head : end;
      m = selectScalar<T, G, I, kHasGrad>(grad, in, residual, begin, i, tau, idx, val, m);
    }
    m = selectSimd<I, kHasGrad, kStream>(grad, in, residual, i, end, tau, idx, val, m, i);
  }
#endif
  return selectScalar<T, G, I, kHasGrad>(grad, in, residual, i, end, tau, idx, val, m);
}

template <typename V>
typename Value<V>::Acc limitOf(const SelectArgs& a) {
  return a.valueLimit > 0 ? static_cast<typename Value<V>::Acc>(a.valueLimit) : Value<V>::max();
}

// A worker's chunk into its scratch, values still in the accumulator's type
// (rounding to the wire type happens on the way out, so entries that do not
// fit go back to the residual exactly).
template <typename T, typename G, typename I>
void selectChunk(const SelectArgs& a, size_t begin, size_t end, WorkerScratch& out) {
  I idx[kBlock];
  T val[kBlock];
  const G* grad = static_cast<const G*>(a.grad);
  const T* in = static_cast<const T*>(a.in());
  T* residual = static_cast<T*>(a.residual);
  const T tau = static_cast<T>(a.tau);
  out.count = 0;
  out.nonFinite = 0;
  out.outOfMemory = false;
  // Streamed only where whole elements can reach the vector's alignment.
  const bool stream = a.stream && reinterpret_cast<uintptr_t>(residual) % sizeof(T) == 0;
  auto block = stream ? (grad ? selectBlock<T, G, I, true, true> : selectBlock<T, G, I, false, true>)
                        : (grad ? selectBlock<T, G, I, true, false> : selectBlock<T, G, I, false, false>);
  for (size_t b = begin; b < end; b += kBlock) {
    size_t e = b + kBlock < end ? b + kBlock : end;
    size_t m = block(grad, in, residual, b, e, tau, idx, val);
    if (m == 0) continue;
    if (out.indices.reserve((out.count + m) * sizeof(I), out.count * sizeof(I)) != dctSuccess ||
        out.values.reserve((out.count + m) * sizeof(T), out.count * sizeof(T)) != dctSuccess) {
      out.outOfMemory = true;  // the select fails; its half-written spare residual is never committed
      break;
    }
    std::memcpy(out.indices.as<I>() + out.count, idx, m * sizeof(I));
    std::memcpy(out.values.as<T>() + out.count, val, m * sizeof(T));
    for (size_t j = 0; j < m; j++) out.nonFinite += !std::isfinite(val[j]);
    out.count += m;
  }
  if (stream) streamFence();  // before the pool hands the residual on
}

// Copies a worker's entries to out[offset...], values rounded to V (a V
// narrower than T leaves each value's rounding error, and any clamped
// excess, in the residual), and returns those that do not fit to the
// residual (their slots there were zeroed, so += restores acc exactly).
template <typename T, typename V, typename I>
size_t emitChunk(const SelectArgs& a, const WorkerScratch& w, size_t offset) {
  size_t fit = offset >= a.capacity ? 0 : (a.capacity - offset < w.count ? a.capacity - offset : w.count);
  const I* idx = w.indices.as<const I>();
  const T* val = w.values.as<const T>();
  T* residual = static_cast<T*>(a.residual);
  if (fit > 0) std::memcpy(static_cast<I*>(a.outIndices) + offset, idx, fit * sizeof(I));
  if constexpr (std::is_same_v<V, T>) {
    if (fit > 0) std::memcpy(static_cast<T*>(a.outValues) + offset, val, fit * sizeof(T));
  } else {
    V* out = static_cast<V*>(a.outValues) + offset;
    const auto limit = limitOf<V>(a);
    for (size_t j = 0; j < fit; j++) {
      out[j] = storeSaturated<V>(val[j], limit);
      residual[idx[j]] = roundingResidual(val[j], out[j]);
    }
  }
  size_t nonFinite = 0;
  for (size_t j = fit; j < w.count; j++) residual[idx[j]] += val[j];
  if (fit < w.count)
    for (size_t j = 0; j < fit; j++) nonFinite += !std::isfinite(val[j]);
  else
    nonFinite = w.nonFinite;
  return nonFinite;
}

}  // namespace

dctResult_t cpuSelectCompact(KernelContext* kc, SelectArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  SelectArgs& a = *args;
  int workers = ctx->pool.workersFor(a.n, kMinPerWorker);
  bool outOfMemory = false;
  const dctResult_t res = dispatchSelect(a, [&]<typename T, typename G, typename V, typename I>() {
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t begin, size_t end, int w) {
      selectChunk<T, G, I>(a, begin, end, ctx->workers[w]);
    });
    for (int w = 0; w < workers; w++) outOfMemory |= ctx->workers[w].outOfMemory;
    if (outOfMemory) return;
    size_t offsets[kMaxWorkers];
    size_t total = 0;
    for (int w = 0; w < workers; w++) {
      offsets[w] = total;
      total += ctx->workers[w].count;
    }
    size_t nonFinite[kMaxWorkers] = {};
    ctx->pool.parallelFor(static_cast<size_t>(workers), 1, [&](size_t b, size_t e, int) {
      for (size_t w = b; w < e; w++) nonFinite[w] = emitChunk<T, V, I>(a, ctx->workers[w], offsets[w]);
    });
    a.selected = total;
    a.nnz = total < a.capacity ? total : a.capacity;
    a.nonFinite = 0;
    for (int w = 0; w < workers; w++) a.nonFinite += nonFinite[w];
    for (size_t w = 0; w < ctx->workers.size(); w++)  // the entries are out: scratch may shrink
      ctx->workers[w].settle(w < size_t(workers) ? ctx->workers[w].count : 0, sizeof(I), sizeof(T));
  });
  return outOfMemory ? dctOutOfMemory : res;
}

namespace {

template <typename T, typename G, typename V, bool kHasGrad>
void selectDenseRange(const SelectArgs& a, size_t begin, size_t end, size_t& selected,
                      size_t& nonFinite) {
  const G* grad = static_cast<const G*>(a.grad);
  const T* in = static_cast<const T*>(a.in());
  T* residual = static_cast<T*>(a.residual);
  V* out = static_cast<V*>(a.outValues);
  const T tau = static_cast<T>(a.tau);
  const auto limit = limitOf<V>(a);
  size_t hits = 0, odd = 0;
  for (size_t i = begin; i < end; i++) {
    T acc = in[i];
    if constexpr (kHasGrad) acc += static_cast<T>(Value<G>::load(grad[i]));
    const bool take = !(std::fabs(acc) < tau);
    if constexpr (std::is_same_v<V, T>) {
      out[i] = take ? acc : T(0);
      residual[i] = take ? T(0) : acc;
    } else if (!take) {  // most entries: no rounding to do
      out[i] = V{};
      residual[i] = acc;
    } else {
      out[i] = storeSaturated<V>(acc, limit);
      residual[i] = roundingResidual(acc, out[i]);
    }
    hits += take;
    odd += !std::isfinite(acc);  // non-finite entries are always taken
  }
  selected = hits;
  nonFinite = odd;
}

}  // namespace

dctResult_t cpuSelectDense(KernelContext* kc, SelectArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  SelectArgs& a = *args;
  size_t selected[kMaxWorkers] = {}, nonFinite[kMaxWorkers] = {};
  dctResult_t res = dispatchSelectValues(a, [&]<typename T, typename G, typename V>() {
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t b, size_t e, int w) {
      if (a.grad) selectDenseRange<T, G, V, true>(a, b, e, selected[w], nonFinite[w]);
      else selectDenseRange<T, G, V, false>(a, b, e, selected[w], nonFinite[w]);
    });
  });
  a.selected = a.nonFinite = 0;
  for (int w = 0; w < kMaxWorkers; w++) {
    a.selected += selected[w];
    a.nonFinite += nonFinite[w];
  }
  a.nnz = a.selected;
  return res;
}

}  // namespace dct
