// Seeded gradients as the raw bytes of any dctDataType_t (half types
// rounded by base/half_types.h), for tests that run every datatype through
// the same code: normal values whose scale changes from step to step (so
// thresholds drift and re-estimate), with a few exact zeros.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/half_types.h"
#include "dct/dct.h"

namespace dcttest {

inline size_t typeBytes(dctDataType_t t) { return t == dctFloat64 ? 8 : t == dctFloat32 ? 4 : 2; }

inline std::vector<unsigned char> typedGradient(size_t n, dctDataType_t type, int rank, int step) {
  std::mt19937_64 rng(0x5eedull * 1000003ull + static_cast<uint64_t>(step) * 7919ull + static_cast<uint64_t>(rank));
  // Steps 3 and 4 of every 8 jump in scale: drift and runaway estimates.
  const double scale = (step % 8 == 3 || step % 8 == 4) ? 8.0 : 1.0 + 0.1 * (step % 5);
  std::normal_distribution<double> normal(0.0, scale);
  const size_t es = typeBytes(type);
  std::vector<unsigned char> out(n * es);
  for (size_t i = 0; i < n; i++) {
    const double v = i % 97 == 5 ? 0.0 : normal(rng);
    unsigned char* at = out.data() + i * es;
    switch (type) {
      case dctFloat64: std::memcpy(at, &v, 8); break;
      case dctFloat16: {
        const dct::Half h = dct::Value<dct::Half>::store(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      case dctBFloat16: {
        const dct::BFloat16 h = dct::Value<dct::BFloat16>::store(static_cast<float>(v));
        std::memcpy(at, &h, 2);
        break;
      }
      default: {
        const float f = static_cast<float>(v);
        std::memcpy(at, &f, 4);
      }
    }
  }
  return out;
}

}  // namespace dcttest
