// CPU twin of the threshold estimators: the k-th largest |x| of a
// deterministic PRNG sample (default), or of all of x (exact).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu_context.h"

namespace dct {
namespace {

// |x| with NaN mapped to +Inf, so ordering stays strict-weak.
template <typename T>
T magnitude(T x) {
  return std::isnan(x) ? std::numeric_limits<T>::infinity() : std::fabs(x);
}

template <typename T>
double kthLargest(T* mags, size_t m, double density) {
  double kd = std::round(density * static_cast<double>(m));
  size_t k = kd < 1.0 ? 1 : (kd > static_cast<double>(m) ? m : static_cast<size_t>(kd));
  std::nth_element(mags, mags + (k - 1), mags + m, std::greater<T>());
  return static_cast<double>(mags[k - 1]);
}

template <typename T>
double estimate(KernelContext* kc, const ThresholdArgs& a) {
  CpuContext* ctx = cpuCtx(kc);
  const T* x = static_cast<const T*>(a.data);
  size_t m = a.method == dctThresholdExact ? a.n : thresholdSampleSize(a.n, a.density);
  ctx->thresholdScratch.reserve(m * sizeof(T));
  T* mags = ctx->thresholdScratch.as<T>();
  if (m == a.n) {
    ctx->pool.parallelFor(m, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) mags[i] = magnitude(x[i]);
    });
  } else {
    uint64_t state = a.seed;
    for (size_t i = 0; i < m; i++) mags[i] = magnitude(x[samplePosition(splitmix64(state), a.n)]);
  }
  return kthLargest(mags, m, a.density);
}

}  // namespace

dctResult_t cpuThreshold(KernelContext* kc, const ThresholdArgs* args, double* tau, void*) {
  CpuContext* ctx = cpuCtx(kc);
  if (args->n == 0) {
    *tau = std::numeric_limits<double>::infinity();
    return dctSuccess;
  }
  double t = 0;
  dctResult_t res = dispatchTypes(args->dtype, 4, [&]<typename T, typename>() {
    t = estimate<T>(ctx, *args);
  });
  // tau must stay positive, or exact zeros would be "selected" and sent.
  double smallest = args->dtype == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                              : std::numeric_limits<float>::denorm_min();
  *tau = t > smallest ? t : smallest;
  return res;
}

}  // namespace dct
