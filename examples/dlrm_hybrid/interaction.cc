// Pairwise dot interactions, forward and backward; see interaction.h.
#include "interaction.h"

#include <cstddef>
#include <cstring>

namespace dlrm {

void Interaction::forward(const float* features, int n, float* out) const {
  const int F = features_, D = dim_, O = outputs();
  for (int s = 0; s < n; s++) {
    const float* f = features + static_cast<size_t>(s) * F * D;
    float* o = out + static_cast<size_t>(s) * O;
    std::memcpy(o, f, D * sizeof(float));
    int p = D;
    for (int i = 1; i < F; i++)
      for (int j = 0; j < i; j++) {
        const float* a = f + i * D;
        const float* b = f + j * D;
        float dot = 0;
        for (int d = 0; d < D; d++) dot += a[d] * b[d];
        o[p++] = dot;
      }
  }
}

void Interaction::backward(const float* features, const float* dout, int n, float* dfeatures) const {
  const int F = features_, D = dim_, O = outputs();
  for (int s = 0; s < n; s++) {
    const float* f = features + static_cast<size_t>(s) * F * D;
    const float* g = dout + static_cast<size_t>(s) * O;
    float* df = dfeatures + static_cast<size_t>(s) * F * D;
    std::memset(df, 0, static_cast<size_t>(F) * D * sizeof(float));
    std::memcpy(df, g, D * sizeof(float));
    int p = D;
    for (int i = 1; i < F; i++)
      for (int j = 0; j < i; j++) {
        const float gij = g[p++];
        if (gij == 0.f) continue;
        for (int d = 0; d < D; d++) {
          df[i * D + d] += gij * f[j * D + d];
          df[j * D + d] += gij * f[i * D + d];
        }
      }
  }
}

}  // namespace dlrm
