#include "mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/random.h"

namespace fmnist {

Mlp::Mlp(std::vector<int> sizes) {
  for (size_t l = 0; l + 1 < sizes.size(); l++) {
    const size_t w = paramCount_, b = w + static_cast<size_t>(sizes[l]) * sizes[l + 1];
    layers_.push_back({sizes[l], sizes[l + 1], w, b});
    paramCount_ = b + sizes[l + 1];
  }
  acts_.resize(layers_.size() + 1);
}

void Mlp::init(uint64_t seed, float* params) const {
  examples::Rng rng(seed);
  for (const Layer& L : layers_) {
    const double sd = std::sqrt(2.0 / L.in);
    for (size_t i = 0; i < static_cast<size_t>(L.in) * L.out; i++)
      params[L.weights + i] = static_cast<float>(sd * rng.normal());
    std::fill(params + L.bias, params + L.bias + L.out, 0.f);
  }
}

const float* Mlp::forward(const float* params, const float* x, int n) {
  input_ = x;
  const float* in = x;
  for (size_t l = 0; l < layers_.size(); l++) {
    const Layer& L = layers_[l];
    std::vector<float>& y = acts_[l + 1];
    y.resize(static_cast<size_t>(n) * L.out);
    for (int i = 0; i < n; i++) std::memcpy(&y[static_cast<size_t>(i) * L.out], params + L.bias, L.out * 4);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, L.out, L.in, 1.f, in, L.in, params + L.weights,
                L.out, 1.f, y.data(), L.out);
    if (l + 1 < layers_.size())
      for (float& v : y) v = std::max(v, 0.f);
    in = y.data();
  }
  return in;
}

float Mlp::lossAndGradient(const float* params, const float* x, const uint8_t* labels, int n, float* grads) {
  const float* logits = forward(params, x, n);
  const int classes = layers_.back().out;
  delta_.resize(static_cast<size_t>(n) * classes);
  double loss = 0;
  for (int i = 0; i < n; i++) {  // softmax cross-entropy; delta = (p - onehot) / n
    const float* z = logits + static_cast<size_t>(i) * classes;
    float* d = &delta_[static_cast<size_t>(i) * classes];
    const float top = *std::max_element(z, z + classes);
    double sum = 0;
    for (int c = 0; c < classes; c++) sum += std::exp(static_cast<double>(z[c] - top));
    for (int c = 0; c < classes; c++) d[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - top)) / sum / n);
    d[labels[i]] -= 1.f / n;
    loss -= static_cast<double>(z[labels[i]] - top) - std::log(sum);
  }
  for (size_t l = layers_.size(); l-- > 0;) {
    const Layer& L = layers_[l];
    const float* in = l == 0 ? input_ : acts_[l].data();
    // dW = in^T delta, db = column sums of delta.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L.in, L.out, n, 1.f, in, L.in, delta_.data(), L.out,
                0.f, grads + L.weights, L.out);
    float* db = grads + L.bias;
    std::fill(db, db + L.out, 0.f);
    for (int i = 0; i < n; i++)
      for (int o = 0; o < L.out; o++) db[o] += delta_[static_cast<size_t>(i) * L.out + o];
    if (l == 0) break;
    // Through the weights and the ReLU below (zero where it clipped).
    prevDelta_.resize(static_cast<size_t>(n) * L.in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, L.in, L.out, 1.f, delta_.data(), L.out,
                params + L.weights, L.out, 0.f, prevDelta_.data(), L.in);
    for (size_t i = 0; i < prevDelta_.size(); i++)
      if (in[i] <= 0.f) prevDelta_[i] = 0.f;
    delta_.swap(prevDelta_);
  }
  return static_cast<float>(loss / n);
}

int Mlp::correct(const float* params, const float* x, const uint8_t* labels, int n) {
  const float* logits = forward(params, x, n);
  const int classes = layers_.back().out;
  int right = 0;
  for (int i = 0; i < n; i++) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    right += std::max_element(z, z + classes) - z == labels[i];
  }
  return right;
}

}  // namespace fmnist
