#include "threshold_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/half_types.h"
#include "kernels/sampling.h"
#include "kernels/threshold_bisect.h"

namespace dctbench {
namespace {

const char* const kInputs[] = {"normal", "grad", "cauchy"};

// n values of input `which`, in double (converted to the bench type after).
std::vector<double> generate(int which, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  if (which == 0) {
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double& x : v) x = normal(rng);
  } else if (which == 1) {
    // A table of t(3) draws indexed by 16 random bits (a draw each costs
    // ~50 ns), times a continuous per-element scale: no two values tie.
    std::student_t_distribution<double> t3(3.0);
    std::vector<double> noise(1 << 16);
    for (double& x : noise) x = t3(rng);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double& x : v) x = noise[rng() & 0xffff] * std::exp(normal(rng));
  } else {
    const double unit = 1.0 / 9007199254740992.0;  // 2^-53
    for (double& x : v) x = std::tan(M_PI * ((static_cast<double>(rng() >> 11) + 0.5) * unit - 0.5));
  }
  return v;
}

template <typename T>
std::vector<unsigned char> store(const std::vector<double>& v) {
  std::vector<unsigned char> bytes(v.size() * sizeof(T));
  T* out = reinterpret_cast<T*>(bytes.data());
  for (size_t i = 0; i < v.size(); i++) out[i] = dct::convertValue<T>(v[i]);
  return bytes;
}

std::vector<unsigned char> storeAs(dctDataType_t type, const std::vector<double>& v) {
  switch (type) {
    case dctFloat64: return store<double>(v);
    case dctFloat16: return store<dct::Half>(v);
    case dctBFloat16: return store<dct::BFloat16>(v);
    default: return store<float>(v);
  }
}

// Entries the select rule !(|x| < tau) takes.
template <typename T>
size_t countTyped(const unsigned char* bytes, size_t n, double tau) {
  const T* x = reinterpret_cast<const T*>(bytes);
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += !(std::fabs(static_cast<double>(dct::Value<T>::load(x[i]))) < tau);
  return c;
}

size_t countSelected(dctDataType_t type, const unsigned char* bytes, size_t n, double tau) {
  switch (type) {
    case dctFloat64: return countTyped<double>(bytes, n, tau);
    case dctFloat16: return countTyped<dct::Half>(bytes, n, tau);
    case dctBFloat16: return countTyped<dct::BFloat16>(bytes, n, tau);
    default: return countTyped<float>(bytes, n, tau);
  }
}

const char* methodName(dctThresholdMethod_t m) {
  return m == dctThresholdSampled ? "sampled" : m == dctThresholdExact ? "exact" : "bisect";
}

// What one estimate reads: sampled s random gathers (+ nth_element of s
// keys), exact one pass (+ nth_element of n keys), bisect 1 + passes passes.
std::string work(dctThresholdMethod_t m, size_t n, double density, int passes) {
  char buf[64];
  if (m == dctThresholdSampled) {
    const size_t s = dct::thresholdSampleSize(n, density);
    if (s == n) std::snprintf(buf, sizeof(buf), "n keys + select(n)");
    else std::snprintf(buf, sizeof(buf), "%zu gathers + select", s);
  } else if (m == dctThresholdExact) {
    std::snprintf(buf, sizeof(buf), "n keys + select(n)");
  } else {
    std::snprintf(buf, sizeof(buf), "%d reads of n", 1 + passes);
  }
  return buf;
}

}  // namespace

bool parseThresholdType(const char* s, dctDataType_t& out) {
  if (!std::strcmp(s, "float") || !std::strcmp(s, "fp32")) out = dctFloat32;
  else if (!std::strcmp(s, "double") || !std::strcmp(s, "fp64")) out = dctFloat64;
  else if (!std::strcmp(s, "half") || !std::strcmp(s, "fp16")) out = dctFloat16;
  else if (!std::strcmp(s, "bf16")) out = dctBFloat16;
  else return false;
  return true;
}

int runThresholdComparison(const ThresholdBenchOptions& opt, const dct::KernelOps& ops, dct::KernelContext* ctx,
                           void* stream, const DataPlacement* device, const char* title) {
  std::vector<double> densities = {0.001, 0.01, 0.1};
  if (opt.density > 0) densities = {opt.density};
  std::printf("# %s: threshold estimators, ops table \"%s\", type %s, median of %d estimates (+1 warm-up)\n",
              title, ops.name, dct::dtypeName(opt.dtype), opt.reps);
  std::printf("# band = count within [k/1.25, 1.25k] (the compressor's re-estimation band); bisect budget %d"
              " counting passes\n",
              dct::kBisectMaxPasses);
  std::printf("\n| input | n | density | k | method | median_us | passes | reads | count | count/k | band |\n");
  std::printf("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | --- |\n");
  const size_t es = dct::dtypeSize(opt.dtype);
  int rc = 0;
  size_t last = 0;
  for (double nd = static_cast<double>(opt.minN); nd <= static_cast<double>(opt.maxN) * (1 + 1e-9);
       nd *= opt.factor) {
    const size_t n = static_cast<size_t>(nd);
    if (n == last) continue;
    last = n;
    for (int which = 0; which < 3; which++) {
      const std::vector<unsigned char> host = storeAs(opt.dtype, generate(which, n, 1000 + which));
      void* data = const_cast<unsigned char*>(host.data());
      if (device) {
        data = device->alloc(n * es);
        device->upload(data, host.data(), n * es);
      }
      for (double density : densities) {
        const size_t k = dct::thresholdK(n, density);
        for (auto method : {dctThresholdSampled, dctThresholdExact, dctThresholdBisect}) {
          dct::ThresholdArgs args{data, n, opt.dtype, density, method, 1};
          std::vector<double> us;
          double tau = 0;
          for (int rep = -1; rep < opt.reps; rep++) {
            const auto t0 = std::chrono::steady_clock::now();
            const dctResult_t res = ops.threshold(ctx, &args, &tau, stream);
            const auto t1 = std::chrono::steady_clock::now();
            if (res != dctSuccess) {
              std::fprintf(stderr, "threshold (%s, n %zu) failed: %d\n", methodName(method), n, int(res));
              rc = 1;
            }
            if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
          std::sort(us.begin(), us.end());
          const double median = us[us.size() / 2];
          const size_t count = countSelected(opt.dtype, host.data(), n, tau);
          const bool band = !(count < k / 1.25) && !(count > k * 1.25);
          char passes[16] = "-";
          if (method == dctThresholdBisect) std::snprintf(passes, sizeof(passes), "%d", args.passes);
          std::printf("| %s | %zu | %g | %zu | %s | %.1f | %s | %s | %zu | %.3f | %s |\n", kInputs[which], n,
                      density, k, methodName(method), median, passes,
                      work(method, n, density, args.passes).c_str(), count, double(count) / double(k),
                      band ? "yes" : "no");
          std::fflush(stdout);
        }
      }
      if (device) device->release(data);
    }
  }
  return rc;
}

}  // namespace dctbench
