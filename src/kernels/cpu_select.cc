// CPU twin of the fused EF + threshold select + compaction kernel.
// One pass over the data: each worker compacts its contiguous chunk block by
// block into its own scratch, then the chunks are copied out in worker (that
// is, index) order. Entries past `capacity` go back into the residual.
#include <cmath>
#include <cstring>

#include "kernels/cpu_context.h"
#include "kernels/cpu_select_simd.h"

namespace dct {
namespace {

constexpr size_t kBlock = 2048;

// Compacts [begin, end) of one block: SSE2 where available, then a
// branch-free scalar loop for the tail (or everything elsewhere).
template <typename T, typename I, bool kHasGrad>
size_t selectBlock(const T* grad, const T* in, T* residual, size_t begin, size_t end, T tau, I* idx, T* val) {
  size_t m = 0, i = begin;
#if DCT_SELECT_SIMD
  m = selectSimd<I, kHasGrad>(grad, in, residual, begin, end, tau, idx, val, i);
#endif
  for (; i < end; i++) {
    T acc = in[i];
    if constexpr (kHasGrad) acc += grad[i];
    const bool take = !(std::fabs(acc) < tau);  // also true for NaN
    idx[m] = static_cast<I>(i);
    val[m] = acc;
    m += take;
    residual[i] = take ? T(0) : acc;
  }
  return m;
}

template <typename T, typename I>
void selectChunk(const SelectArgs& a, size_t begin, size_t end, WorkerScratch& out) {
  I idx[kBlock];
  T val[kBlock];
  const T* grad = static_cast<const T*>(a.grad);
  const T* in = static_cast<const T*>(a.in());
  T* residual = static_cast<T*>(a.residual);
  const T tau = static_cast<T>(a.tau);
  out.count = 0;
  out.nonFinite = 0;
  for (size_t b = begin; b < end; b += kBlock) {
    size_t e = b + kBlock < end ? b + kBlock : end;
    size_t m = grad ? selectBlock<T, I, true>(grad, in, residual, b, e, tau, idx, val)
                    : selectBlock<T, I, false>(grad, in, residual, b, e, tau, idx, val);
    if (m == 0) continue;
    out.indices.reserve((out.count + m) * sizeof(I), out.count * sizeof(I));
    out.values.reserve((out.count + m) * sizeof(T), out.count * sizeof(T));
    std::memcpy(out.indices.as<I>() + out.count, idx, m * sizeof(I));
    std::memcpy(out.values.as<T>() + out.count, val, m * sizeof(T));
    for (size_t j = 0; j < m; j++) out.nonFinite += !std::isfinite(val[j]);
    out.count += m;
  }
}

// Copies a worker's entries to out[offset...], returning those that do not
// fit to the residual (their slots there were zeroed, so += restores them).
template <typename T, typename I>
size_t emitChunk(const SelectArgs& a, const WorkerScratch& w, size_t offset) {
  size_t fit = offset >= a.capacity ? 0 : (a.capacity - offset < w.count ? a.capacity - offset : w.count);
  const I* idx = w.indices.as<const I>();
  const T* val = w.values.as<const T>();
  if (fit > 0) {
    std::memcpy(static_cast<I*>(a.outIndices) + offset, idx, fit * sizeof(I));
    std::memcpy(static_cast<T*>(a.outValues) + offset, val, fit * sizeof(T));
  }
  size_t nonFinite = 0;
  T* residual = static_cast<T*>(a.residual);
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
  return dispatchTypes(a.dtype, a.indexBytes, [&]<typename T, typename I>() {
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t begin, size_t end, int w) {
      selectChunk<T, I>(a, begin, end, ctx->workers[w]);
    });
    size_t offsets[kMaxWorkers];
    size_t total = 0;
    for (int w = 0; w < workers; w++) {
      offsets[w] = total;
      total += ctx->workers[w].count;
    }
    size_t nonFinite[kMaxWorkers] = {};
    ctx->pool.parallelFor(static_cast<size_t>(workers), 1, [&](size_t b, size_t e, int) {
      for (size_t w = b; w < e; w++) nonFinite[w] = emitChunk<T, I>(a, ctx->workers[w], offsets[w]);
    });
    a.selected = total;
    a.nnz = total < a.capacity ? total : a.capacity;
    a.nonFinite = 0;
    for (int w = 0; w < workers; w++) a.nonFinite += nonFinite[w];
    for (size_t w = 0; w < ctx->workers.size(); w++)  // the entries are out: scratch may shrink
      ctx->workers[w].settle(w < size_t(workers) ? ctx->workers[w].count : 0, sizeof(I), sizeof(T));
  });
}

namespace {

template <typename T, bool kHasGrad>
void selectDenseRange(const SelectArgs& a, size_t begin, size_t end, size_t& selected,
                      size_t& nonFinite) {
  const T* grad = static_cast<const T*>(a.grad);
  const T* in = static_cast<const T*>(a.in());
  T* residual = static_cast<T*>(a.residual);
  T* out = static_cast<T*>(a.outValues);
  const T tau = static_cast<T>(a.tau);
  size_t hits = 0, odd = 0;
  for (size_t i = begin; i < end; i++) {
    T acc = in[i];
    if constexpr (kHasGrad) acc += grad[i];
    const bool take = !(std::fabs(acc) < tau);
    out[i] = take ? acc : T(0);
    residual[i] = take ? T(0) : acc;
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
  dctResult_t res = dispatchTypes(a.dtype, 4, [&]<typename T, typename>() {
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t b, size_t e, int w) {
      if (a.grad) selectDenseRange<T, true>(a, b, e, selected[w], nonFinite[w]);
      else selectDenseRange<T, false>(a, b, e, selected[w], nonFinite[w]);
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
