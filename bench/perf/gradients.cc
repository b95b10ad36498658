#include "gradients.h"

#include <cmath>
#include <random>

namespace dctbench {
namespace {

constexpr size_t kNoiseTable = 1 << 16;  // indexed by 16 random bits

}  // namespace

GradientSource::GradientSource(uint64_t seed, bool uniform)
    : seed_(seed), state_(seed), uniform_(uniform) {
  // Drawing Student-t per element would cost ~50 ns each; a table of draws
  // indexed by cheap random bits keeps the tails at ~1 ns per element.
  std::mt19937_64 rng(seed ^ 0x5eed7ab1eull);
  std::student_t_distribution<double> t3(3.0);
  noise_.resize(kNoiseTable);
  for (float& x : noise_) x = static_cast<float>(t3(rng));
}

// splitmix64: fast, good enough for benchmark noise.
uint64_t GradientSource::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void GradientSource::resize(size_t count) {
  count_ = count;
  state_ = seed_ ^ (count * 0xd1b54a32d192ed03ull);
  scale_.clear();
  if (uniform_) return;
  scale_.resize(count);
  std::mt19937_64 rng(state_);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& s : scale_) s = std::exp(normal(rng));
}

template <typename T>
void GradientSource::fillTyped(T* out) {
  const size_t n = count_;
  size_t i = 0;
  if (uniform_) {
    const double unit = 1.0 / 2147483648.0;  // int32 -> [-1, 1)
    for (; i + 2 <= n; i += 2) {
      uint64_t r = next();
      out[i] = static_cast<T>(static_cast<int32_t>(r) * unit);
      out[i + 1] = static_cast<T>(static_cast<int32_t>(r >> 32) * unit);
    }
    if (i < n) out[i] = static_cast<T>(static_cast<int32_t>(next()) * unit);
    return;
  }
  const float* noise = noise_.data();
  const float* scale = scale_.data();
  for (; i < n; i += 4) {
    uint64_t r = next();
    size_t m = n - i < 4 ? n - i : 4;
    for (size_t j = 0; j < m; j++)
      out[i + j] = static_cast<T>(scale[i + j] * noise[(r >> (16 * j)) & 0xffff]);
  }
}

void GradientSource::fill(void* out, size_t count, dctDataType_t dtype) {
  if (count != count_) resize(count);
  if (dtype == dctFloat64) fillTyped(static_cast<double*>(out));
  else fillTyped(static_cast<float*>(out));
}

}  // namespace dctbench
