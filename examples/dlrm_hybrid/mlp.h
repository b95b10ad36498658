// Dense layers with ReLU, and the optimizers of the replicated (data
// parallel) parameters.
//
// An Mlp does not own its parameters: it is bound to a slice of one flat
// parameter vector and of the matching flat gradient vector, so that all
// data-parallel parameters of the model form a single fused bucket (one
// DCT-DP compressor, one allreduce).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlrm {

class Mlp {
 public:
  // sizes = {in, hidden..., out}; ReLU after every layer but the last, and
  // after the last too when reluLast.
  Mlp(std::vector<int> sizes, bool reluLast);
  size_t paramCount() const { return paramCount_; }
  int inputs() const { return sizes_.front(); }
  int outputs() const { return sizes_.back(); }
  // params/grads: paramCount() floats each, owned by the caller.
  void bind(float* params, float* grads);
  // Weights N(0, 2/fan_in) (He), biases 0, from a PRNG seeded by `seed`.
  void init(uint64_t seed);
  // y = mlp(x) for n rows of inputs() floats; x must stay valid until
  // backward. Returns n x outputs() floats, owned by the Mlp.
  const float* forward(const float* x, int n);
  // dy: n x outputs(), the loss gradient of forward's output. Adds the
  // parameter gradients into grads; writes dx (n x inputs()) unless null.
  void backward(const float* dy, float* dx);

 private:
  // Layer l: weights [in][out] (input-major: every inner loop is an axpy,
  // which vectorises without -ffast-math), then bias [out].
  struct Layer {
    int in, out;
    size_t offset;
    bool relu;
  };
  std::vector<int> sizes_;
  std::vector<Layer> layers_;
  size_t paramCount_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  const float* input_ = nullptr;
  int rows_ = 0;
  std::vector<std::vector<float>> acts_;  // per layer: rows x out (after ReLU)
  std::vector<float> delta_, prevDelta_, transposed_;
};

// SGD or Adagrad over a flat vector. Every rank applies the same update to
// the same (allreduced) gradient, so replicated weights stay bit-identical.
class Optimizer {
 public:
  enum Kind { kSgd, kAdagrad };
  Optimizer(Kind kind, float lr, size_t n, float initialAccumulator = 0.f, float eps = 1e-8f);
  void step(float* params, const float* grads);

 private:
  Kind kind_;
  float lr_, eps_;
  size_t n_;
  std::vector<float> accumulator_;
};

}  // namespace dlrm
