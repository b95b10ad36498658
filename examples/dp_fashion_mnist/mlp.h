// A multilayer perceptron with ReLU and a softmax cross-entropy head, on
// the system BLAS (cblas_sgemm). Parameters and gradients are flat vectors
// owned by the caller, so the whole gradient is one fused bucket: one
// compressor, one allreduce per step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fmnist {

class Mlp {
 public:
  explicit Mlp(std::vector<int> sizes);  // {784, hidden..., 10}
  size_t paramCount() const { return paramCount_; }
  // He-normal weights, zero biases, from the seed.
  void init(uint64_t seed, float* params) const;
  // Mean cross-entropy of the batch; grads (paramCount floats) is
  // overwritten with its gradient.
  float lossAndGradient(const float* params, const float* x, const uint8_t* y, int n, float* grads);
  // How many of the n samples the model classifies correctly.
  int correct(const float* params, const float* x, const uint8_t* y, int n);

 private:
  struct Layer {
    int in, out;
    size_t weights, bias;  // offsets into the flat vectors; weights are in x out, row-major
  };
  // acts_[0] = x, acts_[l + 1] = layer l's output (ReLU applied but on the last).
  const float* forward(const float* params, const float* x, int n);

  std::vector<Layer> layers_;
  size_t paramCount_ = 0;
  std::vector<std::vector<float>> acts_;
  std::vector<float> delta_, prevDelta_;
  const float* input_ = nullptr;
};

}  // namespace fmnist
