// CPU twin of the DCT-MP row selection (kernels.h rowSelect, rules in
// row_args.h): per row, its top-K or threshold mask, the count kept and
// the non-finite kept. Rows are independent, so workers split them freely
// and the result does not depend on the split. The vector bodies take
// top-K up to their kMaxK (row_topk_sse2.h, row_topk_avx2.h) and every
// threshold (row_threshold_simd.h); the plain bodies (row_select_scalar.h)
// the rest.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu_context.h"
#include "kernels/cpu_features.h"
#include "kernels/cpu_row_select.h"
#include "kernels/row_select_scalar.h"
#include "kernels/row_threshold_simd.h"
#include "kernels/row_topk_avx2.h"
#include "kernels/row_topk_sse2.h"

namespace dct {
namespace {

// Rows per worker chunk: below this, threads cost more than they save.
size_t minRowsPerWorker(size_t rowLength) {
  return std::max<size_t>(1, kMinPerWorker / 4 / std::max<size_t>(1, rowLength));
}

// Masks and counts of rows [0, n) of length d; returns their non-finite
// kept. k >= d keeps whole rows: the threshold -Inf, which no |x| is below.
template <typename T, typename Acc = typename Value<T>::Acc>
size_t selectRows(RowBody body, const T* rows, size_t n, size_t d, size_t k, Acc tau, uint32_t* mask,
                  uint32_t* counts) {
  if (k == 0 || k >= d) {
    if (k > 0) tau = -std::numeric_limits<Acc>::infinity();
#if DCT_ROW_SIMD
    if (body == RowBody::kAvx2) return thresholdRowsAvx2(rows, n, d, tau, mask, counts);
    if (body == RowBody::kSse2) return thresholdRowsSse2(rows, n, d, tau, mask, counts);
#endif
    return thresholdRowsScalar(rows, n, d, tau, mask, counts);
  }
#if DCT_ROW_SIMD
  if (body == RowBody::kAvx2 && k <= Avx2Keys<T>::kMaxK) return topKRowsAvx2(rows, n, d, k, mask, counts);
  if constexpr (sizeof(T) <= 4)
    if (body == RowBody::kSse2 && k <= kSse2MaxK) return topKRowsSse2(rows, n, d, k, mask, counts);
#endif
  return topKRowsScalar(rows, n, d, k, mask, counts);
}

}  // namespace

RowBody bestRowBody() {
#if DCT_ROW_SIMD
  return cpuHasAvx2() ? RowBody::kAvx2 : RowBody::kSse2;
#else
  return RowBody::kScalar;
#endif
}

dctResult_t cpuRowSelectWith(KernelContext* kc, RowSelectArgs* args, RowBody body) {
  if ((body == RowBody::kAvx2 && !cpuHasAvx2()) || (body == RowBody::kSse2 && !DCT_ROW_SIMD))
    return dctNotSupported;
  CpuContext* ctx = cpuCtx(kc);
  RowSelectArgs& a = *args;
  std::vector<size_t> nonFinite(ctx->pool.size(), 0);
  const size_t d = a.rowLength, words = maskWords(d);
  dctResult_t res = dispatchAnyValue(a.dtype, [&]<typename T>() {
    const T* rows = static_cast<const T*>(a.rows);
    const auto tau = static_cast<typename Value<T>::Acc>(a.tau);
    ctx->pool.parallelFor(a.rowCount, minRowsPerWorker(d), [&](size_t b, size_t e, int w) {
      nonFinite[w] += selectRows(body, rows + b * d, e - b, d, a.k, tau, a.mask + b * words, a.counts + b);
    });
  });
  a.nonFinite = 0;
  for (size_t n : nonFinite) a.nonFinite += n;
  return res;
}

dctResult_t cpuRowSelect(KernelContext* kc, RowSelectArgs* args, void*) {
  return cpuRowSelectWith(kc, args, bestRowBody());
}

}  // namespace dct
