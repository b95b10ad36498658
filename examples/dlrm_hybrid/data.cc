// The synthetic click-through stream (see data.h for the generator).
#include "data.h"

#include <algorithm>
#include <cmath>

#include "common/random.h"

namespace dlrm {

using namespace examples;  // Rng, mix64, streamSeed
namespace {

float sigmoid(double x) { return static_cast<float>(1.0 / (1.0 + std::exp(-x))); }

std::vector<float> normals(Rng& rng, size_t n, double stddev) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(stddev * rng.normal());
  return v;
}

}  // namespace

Generator::Generator(const DataConfig& config) : config_(config) {
  const int T = tables(), Dt = config_.teacherDim, F = T + 1;
  const int in = Dt + F * (F - 1) / 2, H = config_.teacherHidden;
  for (int t = 0; t < T; t++) {
    std::vector<double> cdf(config_.tableSizes[t]);
    double sum = 0;
    for (size_t k = 0; k < cdf.size(); k++) cdf[k] = sum += std::pow(k + 1.0, -config_.zipfExponent);
    for (double& c : cdf) c /= sum;
    cdf.back() = 1.0;
    zipfCdf_.push_back(std::move(cdf));
    Rng rng(streamSeed(config_.seed, 100, t));
    e_.push_back(normals(rng, static_cast<size_t>(config_.tableSizes[t]) * Dt, 1.0));
  }
  Rng rng(streamSeed(config_.seed, 200));
  a_ = normals(rng, static_cast<size_t>(Dt) * config_.denseFeatures, 1.0 / std::sqrt(config_.denseFeatures));
  w1_ = normals(rng, static_cast<size_t>(H) * in, std::sqrt(2.0 / in));
  w2_ = normals(rng, H, 1.0 / std::sqrt(H));
  u_ = normals(rng, static_cast<size_t>(T) * Dt, 1.0);

  // Calibrate: with mean 0, scale 1 and bias 0 the teacher logits of a
  // calibration batch are the raw ones; standardise them, centre the CTR.
  const int n = 8192;
  Batch cal;
  generate(kCalibrationStream, 0, n, 0, n, &cal);
  const std::vector<float>& raw = cal.teacherLogits;
  double sum = 0, sq = 0;
  for (float r : raw) sum += r, sq += static_cast<double>(r) * r;
  mean_ = sum / n;
  scale_ = config_.logitStd / std::sqrt(std::max(sq / n - mean_ * mean_, 1e-12));
  double lo = -20, hi = 20;
  for (int it = 0; it < 60; it++) {
    const double mid = 0.5 * (lo + hi);
    double p = 0;
    for (int i = 0; i < n; i++) p += sigmoid(scale_ * (raw[i] - mean_) + mid);
    (p / n < config_.ctr ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

double Generator::rawLogit(const float* dense, const int32_t* ids, int idStride) const {
  const int T = tables(), Dt = config_.teacherDim, F = T + 1, D13 = config_.denseFeatures;
  const int H = config_.teacherHidden, in = Dt + F * (F - 1) / 2;
  std::vector<const float*> v(F);
  std::vector<float> x0(Dt), input(in), hidden(H, 0.f);
  for (int d = 0; d < Dt; d++) {
    double s = 0;
    for (int k = 0; k < D13; k++) s += a_[d * D13 + k] * dense[k];
    x0[d] = input[d] = static_cast<float>(std::tanh(s));
  }
  v[0] = x0.data();
  double linear = 0;
  for (int t = 0; t < T; t++) {
    v[t + 1] = e_[t].data() + static_cast<size_t>(ids[t * idStride]) * Dt;
    for (int d = 0; d < Dt; d++) linear += u_[t * Dt + d] * v[t + 1][d];
  }
  int p = Dt;
  for (int i = 0; i < F; i++)
    for (int j = i + 1; j < F; j++) {
      double s = 0;
      for (int d = 0; d < Dt; d++) s += v[i][d] * v[j][d];
      input[p++] = static_cast<float>(s / std::sqrt(Dt));
    }
  double out = 0;
  for (int h = 0; h < H; h++) {
    double s = 0;
    for (int k = 0; k < in; k++) s += w1_[static_cast<size_t>(h) * in + k] * input[k];
    out += w2_[h] * std::max(s, 0.0);
  }
  return out + linear / std::sqrt(static_cast<double>(Dt) * T);
}

void Generator::generate(uint64_t stream, uint64_t first, int size, int lo, int hi, Batch* out) const {
  const int T = tables(), D13 = config_.denseFeatures, local = hi - lo;
  out->size = size, out->lo = lo, out->hi = hi;
  out->ids.assign(static_cast<size_t>(T) * size, 0);
  out->dense.assign(static_cast<size_t>(local) * D13, 0.f);
  out->labels.assign(local, 0.f);
  out->teacherLogits.assign(local, 0.f);
  std::vector<float> dense(D13);
  for (int i = 0; i < size; i++) {
    Rng rng(streamSeed(config_.seed, stream + 1, first + i));
    for (float& x : dense) x = static_cast<float>(rng.normal());
    for (int t = 0; t < T; t++) {
      const std::vector<double>& cdf = zipfCdf_[t];
      const double u = rng.uniform();
      out->ids[static_cast<size_t>(t) * size + i] =
          static_cast<int32_t>(std::min<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(),
                                                cdf.size() - 1));
    }
    const double u = rng.uniform();
    if (i < lo || i >= hi) continue;
    const double logit = scale_ * (rawLogit(dense.data(), out->ids.data() + i, size) - mean_) + bias_;
    std::copy(dense.begin(), dense.end(), out->dense.begin() + static_cast<size_t>(i - lo) * D13);
    out->labels[i - lo] = u < sigmoid(logit) ? 1.f : 0.f;
    out->teacherLogits[i - lo] = static_cast<float>(logit);
  }
}

}  // namespace dlrm
