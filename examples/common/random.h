// Small, portable, counter-friendly PRNG for the examples: every number
// an example draws comes from here, so a run is bit-for-bit reproducible
// on any platform and identical on every rank (no std::*_distribution, whose
// output is implementation-defined).
#pragma once

#include <cmath>
#include <cstdint>

namespace examples {

// splitmix64 finaliser: a good 64-bit mix, used to derive stream seeds.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Seed of an independent stream named by up to three integers.
inline uint64_t streamSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  return mix64(mix64(mix64(seed ^ 0x5851f42d4c957f2dull) ^ a) ^ (b * 0x2545f4914f6cdd1dull)) ^
         mix64(c + 0x632be59bd9b4e019ull);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_++); }  // splitmix64 sequence
  // Jumps over n calls of next() (n uniform() draws) in O(1).
  void skip(uint64_t n) { state_ += n; }
  // Uniform in (0, 1): never exactly 0 or 1.
  double uniform() { return ((next() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller, both outputs used).
  double normal() {
    if (haveSpare_) {
      haveSpare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform())), phi = 6.283185307179586 * uniform();
    spare_ = r * std::sin(phi);
    haveSpare_ = true;
    return r * std::cos(phi);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool haveSpare_ = false;
};

}  // namespace examples
