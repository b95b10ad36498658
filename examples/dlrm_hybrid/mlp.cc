// Dense layers (forward/backward) and optimizers; see mlp.h.
#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/random.h"

namespace dlrm {

using namespace examples;  // Rng, mix64, streamSeed

Mlp::Mlp(std::vector<int> sizes, bool reluLast) : sizes_(std::move(sizes)) {
  for (size_t l = 0; l + 1 < sizes_.size(); l++) {
    const bool last = l + 2 == sizes_.size();
    layers_.push_back({sizes_[l], sizes_[l + 1], paramCount_, !last || reluLast});
    paramCount_ += static_cast<size_t>(sizes_[l]) * sizes_[l + 1] + sizes_[l + 1];
  }
  acts_.resize(layers_.size());
}

void Mlp::bind(float* params, float* grads) {
  params_ = params;
  grads_ = grads;
}

void Mlp::init(uint64_t seed) {
  Rng rng(seed);
  for (const Layer& L : layers_) {
    const double sd = std::sqrt(2.0 / L.in);
    float* w = params_ + L.offset;
    for (size_t i = 0; i < static_cast<size_t>(L.in) * L.out; i++) w[i] = static_cast<float>(sd * rng.normal());
    std::fill(w + static_cast<size_t>(L.in) * L.out, w + static_cast<size_t>(L.in) * L.out + L.out, 0.f);
  }
}

const float* Mlp::forward(const float* x, int n) {
  input_ = x;
  rows_ = n;
  const float* in = x;
  for (size_t l = 0; l < layers_.size(); l++) {
    const Layer& L = layers_[l];
    const float* w = params_ + L.offset;
    const float* b = w + static_cast<size_t>(L.in) * L.out;
    std::vector<float>& y = acts_[l];
    y.resize(static_cast<size_t>(n) * L.out);
    for (int i = 0; i < n; i++) {
      float* yi = y.data() + static_cast<size_t>(i) * L.out;
      const float* xi = in + static_cast<size_t>(i) * L.in;
      std::memcpy(yi, b, L.out * sizeof(float));
      for (int k = 0; k < L.in; k++) {
        const float xk = xi[k];
        if (xk == 0.f) continue;  // ReLU zeros: half the inputs
        const float* wk = w + static_cast<size_t>(k) * L.out;
        for (int o = 0; o < L.out; o++) yi[o] += xk * wk[o];
      }
      if (L.relu)
        for (int o = 0; o < L.out; o++) yi[o] = std::max(yi[o], 0.f);
    }
    in = y.data();
  }
  return acts_.back().data();
}

void Mlp::backward(const float* dy, float* dx) {
  const int n = rows_;
  delta_.assign(dy, dy + static_cast<size_t>(n) * layers_.back().out);
  for (size_t l = layers_.size(); l-- > 0;) {
    const Layer& L = layers_[l];
    const float* in = l == 0 ? input_ : acts_[l - 1].data();
    const float* w = params_ + L.offset;
    float* gw = grads_ + L.offset;
    float* gb = gw + static_cast<size_t>(L.in) * L.out;
    if (L.relu) {  // through the ReLU: the output is zero exactly where it was clipped
      const float* y = acts_[l].data();
      for (size_t i = 0; i < delta_.size(); i++)
        if (y[i] <= 0.f) delta_[i] = 0.f;
    }
    for (int i = 0; i < n; i++) {
      const float* di = delta_.data() + static_cast<size_t>(i) * L.out;
      const float* xi = in + static_cast<size_t>(i) * L.in;
      for (int o = 0; o < L.out; o++) gb[o] += di[o];
      for (int k = 0; k < L.in; k++) {
        const float xk = xi[k];
        if (xk == 0.f) continue;
        float* gk = gw + static_cast<size_t>(k) * L.out;
        for (int o = 0; o < L.out; o++) gk[o] += xk * di[o];
      }
    }
    if (l == 0 && !dx) break;
    // dx = delta W^T, as axpys over a transposed copy of W ([out][in]).
    transposed_.resize(static_cast<size_t>(L.in) * L.out);
    for (int k = 0; k < L.in; k++)
      for (int o = 0; o < L.out; o++)
        transposed_[static_cast<size_t>(o) * L.in + k] = w[static_cast<size_t>(k) * L.out + o];
    float* out = l == 0 ? dx : nullptr;
    if (!out) {
      prevDelta_.assign(static_cast<size_t>(n) * L.in, 0.f);
      out = prevDelta_.data();
    } else {
      std::fill(out, out + static_cast<size_t>(n) * L.in, 0.f);
    }
    for (int i = 0; i < n; i++) {
      const float* di = delta_.data() + static_cast<size_t>(i) * L.out;
      float* oi = out + static_cast<size_t>(i) * L.in;
      for (int o = 0; o < L.out; o++) {
        const float d = di[o];
        if (d == 0.f) continue;
        const float* to = transposed_.data() + static_cast<size_t>(o) * L.in;
        for (int k = 0; k < L.in; k++) oi[k] += d * to[k];
      }
    }
    if (l > 0) delta_.swap(prevDelta_);
  }
}

Optimizer::Optimizer(Kind kind, float lr, size_t n, float initialAccumulator, float eps)
    : kind_(kind), lr_(lr), eps_(eps), n_(n), accumulator_(kind == kAdagrad ? n : 0, initialAccumulator) {}

void Optimizer::step(float* params, const float* grads) {
  if (kind_ == kSgd) {
    for (size_t i = 0; i < n_; i++) params[i] -= lr_ * grads[i];
    return;
  }
  for (size_t i = 0; i < n_; i++) {
    accumulator_[i] += grads[i] * grads[i];
    params[i] -= lr_ * grads[i] / (std::sqrt(accumulator_[i]) + eps_);
  }
}

}  // namespace dlrm
