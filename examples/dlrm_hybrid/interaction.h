// DLRM's pairwise dot-product feature interaction.
//
// Per sample, F feature vectors of length D, stored [n][F][D]: feature 0 is
// the bottom MLP's output, features 1..T the embeddings of the T tables.
// Output per sample: [feature 0 (D values), <f_i, f_j> for i = 1..F-1,
// j = 0..i-1 (the strict lower triangle, row by row)], i.e.
// D + F(F-1)/2 values, the input of the top MLP.
#pragma once

namespace dlrm {

class Interaction {
 public:
  Interaction(int features, int dim) : features_(features), dim_(dim) {}
  int outputs() const { return dim_ + features_ * (features_ - 1) / 2; }
  void forward(const float* features, int n, float* out) const;
  // dfeatures (written, [n][F][D]) from dout ([n][outputs()]).
  void backward(const float* features, const float* dout, int n, float* dfeatures) const;

 private:
  int features_, dim_;
};

}  // namespace dlrm
