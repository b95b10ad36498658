// Shared by the 1-bit MPI tests: configs, typed seeded inputs that every
// rank can generate for every rank (so each rank runs the single-process
// reference itself), and read access to the compressor's error state.
#pragma once

#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "../common/onebit_reference.h"
#include "core/compressor.h"
#include "kernels/onebit_math.h"
#include "base/half_types.h"
#include "mpi_util.h"

namespace dcttest {

using dct::BFloat16;
using dct::Half;
using dct::Value;
using dct::test::sameBytes;

// Every field set (the environment cannot change what runs); 1-bit.
inline dctConfig_t onebitConfig(int warmup = 0) {
  Settings s;
  s.warmup = warmup;
  dctConfig_t cfg = explicitConfig(s);
  cfg.wireType = -1;  // the tensor's own (unused by 1-bit)
  cfg.compressor = dctCompressorOnebit;
  return cfg;
}

// Rank r's input at `step`: normal values (scaled), a few exact zeros.
template <typename T>
std::vector<T> onebitInput(size_t n, int rank, int step, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed * 1000003ull + static_cast<uint64_t>(step) * 131ull + static_cast<uint64_t>(rank));
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++) {
    const double d = i % 89 == 3 ? 0.0 : normal(rng) + 0.1 * rank;
    if constexpr (std::is_same_v<T, double>) v[i] = d;
    else v[i] = Value<T>::store(static_cast<float>(d));
  }
  return v;
}

template <typename T>
std::vector<std::vector<T>> allInputs(size_t n, int ranks, int step, uint64_t seed) {
  std::vector<std::vector<T>> in(ranks);
  for (int r = 0; r < ranks; r++) in[r] = onebitInput<T>(n, r, step, seed);
  return in;
}

// The committed worker error (dctCompressorGetResidual: the residual may
// hold the x that left it) and server error (host twin).
template <typename A>
std::vector<A> workerError(dctCompressor_t c) {
  std::vector<A> e(c->count);
  if (c->count) REQUIRE(dctCompressorGetResidual(c, e.data(), nullptr) == dctSuccess);
  return e;
}
template <typename A>
std::vector<A> serverError(dctCompressor_t c, size_t length) {
  const A* p = c->onebit.serverErrors[c->onebit.serverCommitted].template as<A>();
  std::vector<A> e = p ? std::vector<A>(p, p + length) : std::vector<A>{};
  if (!c->onebit.serverPending) return e;  // else it holds the x that left the error, with each piece's scale
  const dct::OnebitSegments& seg = c->onebit.seg;
  const bool pieces = seg.many() && length > 0;
  for (int k = 0; k < (pieces ? seg.serverCount() : 1); k++) {
    const A p = static_cast<A>(pieces ? c->onebit.serverPendingScales[k] : c->onebit.serverPendingScale);
    for (size_t i = pieces ? seg.serverOffsets[k] : 0; i < (pieces ? seg.serverOffsets[k + 1] : length); i++)
      e[i] = dct::onebitError(e[i], p);
  }
  return e;
}

}  // namespace dcttest
