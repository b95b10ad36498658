// The CPU twin's 1-bit kernels against the plain reference of
// tests/common/onebit_reference.h: sign-bit layout, the fixed-order sum of
// squares and the scale, error feedback, the server average, the decode
// (halves rounded once), and the NaN rule; all four tensor types, odd sizes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/onebit_reference.h"
#include "base/half_types.h"
#include "kernels/kernels.h"
#include "reference.h"

using namespace dct;
using namespace dct::test;

namespace {

const std::vector<size_t> kSizes = {0, 1, 2, 3, 7, 11, 31, 32, 33, 1023, 1025, 33000, 1000003};

struct Cpu {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  Cpu() { REQUIRE(ops.createContext(&ctx) == dctSuccess); }
  ~Cpu() { ops.destroyContext(ctx); }
};

template <typename T, typename A = typename Value<T>::Acc>
struct Compressed {
  std::vector<uint32_t> signs;
  std::vector<A> error;
  A scale;
  OnebitCompressArgs args;
};

template <typename T, typename A = typename Value<T>::Acc>
Compressed<T> compress(Cpu& cpu, const std::vector<T>* input, const std::vector<A>& errorIn, bool inPlace) {
  const size_t n = errorIn.size();
  Compressed<T> c;
  c.signs.assign(onebitWords(n) + 1, 0xdeadbeefu);  // one guard word
  c.error = inPlace ? errorIn : std::vector<A>(n, A(7));
  std::vector<double> scratch(onebitScratchBytes(n) / sizeof(double));
  c.args = OnebitCompressArgs{input ? input->data() : nullptr, inPlace ? c.error.data() : errorIn.data(),
                              c.error.data(), n, Value<T>::type, c.signs.data(), &c.scale, scratch.data()};
  REQUIRE(cpu.ops.onebitCompress(cpu.ctx, &c.args, nullptr) == dctSuccess);
  CHECK(c.signs.back() == 0xdeadbeefu);
  c.signs.pop_back();
  return c;
}

template <typename T>
void checkCompress(size_t n, uint64_t seed, bool withInput, bool inPlace) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(withInput);
  CAPTURE(inPlace);
  Cpu cpu;
  const std::vector<T> input = seededValues<T>(n, seed);
  const std::vector<A> errorIn = seededValues<A>(n, seed + 1, 0.3);
  const Compressed<T> got = compress<T>(cpu, withInput ? &input : nullptr, errorIn, inPlace);

  std::vector<A> x(n);
  for (size_t i = 0; i < n; i++)
    x[i] = withInput ? static_cast<A>(Value<T>::load(input[i])) + errorIn[i] : errorIn[i];
  const double sumsq = referenceSumOfSquares(x.data(), n);
  const A scale = referenceScale<A>(sumsq, n);
  std::vector<uint32_t> signs(onebitWords(n), 0);
  std::vector<A> error(n);
  for (size_t i = 0; i < n; i++) {
    if (x[i] >= 0) signs[i / 32] |= 1u << (i % 32);
    error[i] = x[i] - (x[i] >= 0 ? scale : -scale);
  }
  CHECK(sameBits(got.args.sumOfSquares, sumsq));
  CHECK(sameBits(got.scale, scale));
  CHECK(sameBits(static_cast<A>(got.args.scaleValue), scale));
  CHECK(sameBytes(got.signs, signs));
  CHECK(sameBytes(got.error, error));
  // The scale is the RMS of x (within the rounding of a long sum).
  if (n > 0) {
    double plain = 0;
    for (A v : x) plain += static_cast<double>(v) * v;
    CHECK(std::fabs(sumsq - plain) <= 1e-12 * plain * std::log2(static_cast<double>(n) + 2));
  }
}

}  // namespace

TEST_CASE("sign bits: bit k of word w is element 32w+k, set for x >= 0 (also -0), clear past n") {
  Cpu cpu;
  std::vector<float> v(37, 1.0f);
  v[0] = -1.0f;
  v[1] = 0.0f;
  v[2] = -0.0f;
  v[3] = -1e-30f;
  v[31] = -2.0f;
  v[32] = -3.0f;
  v[36] = -4.0f;
  const std::vector<float> zero(37, 0.0f);
  const Compressed<float> got = compress<float>(cpu, &v, zero, false);
  REQUIRE(got.signs.size() == 2);
  CHECK(got.signs[0] == (0xffffffffu & ~1u & ~(1u << 3) & ~(1u << 31)));
  CHECK(got.signs[1] == 0x0eu);  // elements 33..35 positive; 32 and 36 negative; nothing past 36
  double sumsq = 0;
  for (float x : v) sumsq += double(x) * x;
  CHECK(got.scale == static_cast<float>(std::sqrt(sumsq / 37)));
  CHECK(got.error[1] == -got.scale);  // sign(0) = +1
  CHECK(got.error[2] == -got.scale);
  CHECK(got.error[0] == -1.0f + got.scale);
}

TEST_CASE("compress matches the reference: x, signs, fixed-order sum of squares, scale, error") {
  uint64_t seed = 100;
  for (size_t n : kSizes) {
    for (bool withInput : {true, false})
      for (bool inPlace : {false, true}) {
        checkCompress<float>(n, seed++, withInput, inPlace);
        checkCompress<double>(n, seed++, withInput, inPlace);
        checkCompress<Half>(n, seed++, withInput, inPlace);
        checkCompress<BFloat16>(n, seed++, withInput, inPlace);
      }
  }
}

TEST_CASE("compress of n = 0 writes a zero scale") {
  Cpu cpu;
  const std::vector<float> none;
  const Compressed<float> got = compress<float>(cpu, &none, std::vector<float>{}, false);
  CHECK(got.scale == 0.0f);
  CHECK(got.args.sumOfSquares == 0.0);
}

TEST_CASE("NaN rule: a NaN or Inf entry (or an fp64 sum of squares past DBL_MAX) gives a NaN scale") {
  Cpu cpu;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    auto v = seededValues<float>(1001, 3);
    v[517] = bad;
    const Compressed<float> got = compress<float>(cpu, &v, std::vector<float>(1001, 0.0f), false);
    CHECK(std::isnan(got.scale));
    CHECK(std::isnan(got.args.scaleValue));
  }
  std::vector<Half> h = seededValues<Half>(70, 4);
  h[69] = Half{kHalfInf};
  CHECK(std::isnan(compress<Half>(cpu, &h, std::vector<float>(70, 0.0f), false).scale));
  std::vector<double> huge(40, 1e200);  // finite, but its squares overflow
  CHECK(std::isnan(compress<double>(cpu, &huge, std::vector<double>(40, 0.0), false).scale));
}

TEST_CASE("the sum of squares is independent of the worker count") {
  // unit.test_onebit.threads4 reruns everything with 4 workers; here the
  // same input at every size must give the reference's bits, which pins the
  // order whatever the split.
  Cpu cpu;
  const auto v = seededValues<float>(1 << 20, 9, 1e3);
  const std::vector<float> zero(v.size(), 0.0f);
  const Compressed<float> got = compress<float>(cpu, &v, zero, false);
  CHECK(sameBits(got.args.sumOfSquares, referenceSumOfSquares(v.data(), v.size())));
}

template <typename T>
void checkAverage(size_t n, int ranks, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(ranks);
  Cpu cpu;
  std::mt19937_64 rng(seed);
  const size_t stride = onebitWords(n) + 3;
  std::vector<uint32_t> signs(stride * ranks);
  for (auto& w : signs) w = static_cast<uint32_t>(rng());
  std::vector<A> scales = seededValues<A>(ranks, seed + 1);
  for (A& s : scales) s = std::fabs(s);
  const std::vector<A> error = seededValues<A>(n, seed + 2, 0.1);
  std::vector<A> out(n, A(5));
  OnebitAverageArgs args{signs.data(), stride, scales.data(), ranks, error.data(), out.data(), n, Value<T>::type};
  REQUIRE(cpu.ops.onebitAverage(cpu.ctx, &args, nullptr) == dctSuccess);
  std::vector<A> ref(n);
  for (size_t i = 0; i < n; i++) {
    auto decoded = [&](int r) { return (signs[r * stride + i / 32] >> (i % 32)) & 1u ? scales[r] : -scales[r]; };
    A s = decoded(0);
    for (int r = 1; r < ranks; r++) s += decoded(r);
    ref[i] = s / static_cast<A>(ranks) + error[i];
  }
  CHECK(sameBytes(out, ref));
  // In place (out = errorIn).
  std::vector<A> inPlace = error;
  args.errorIn = inPlace.data();
  args.out = inPlace.data();
  REQUIRE(cpu.ops.onebitAverage(cpu.ctx, &args, nullptr) == dctSuccess);
  CHECK(sameBytes(inPlace, ref));
}

TEST_CASE("server average matches the reference (ranks in order, / P, + error)") {
  uint64_t seed = 500;
  for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(33), size_t(100003)})
    for (int ranks : {1, 2, 3, 5}) {
      checkAverage<float>(n, ranks, seed++);
      checkAverage<double>(n, ranks, seed++);
      checkAverage<BFloat16>(n, ranks, seed++);
    }
}

template <typename T>
void checkDecode(size_t n, size_t chunkLength, double factor, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(chunkLength);
  CAPTURE(factor);
  Cpu cpu;
  std::mt19937_64 rng(seed);
  const size_t chunks = n ? (n + chunkLength - 1) / chunkLength : 1;
  std::vector<uint32_t> signs(chunks * chunkLength / 32);
  for (auto& w : signs) w = static_cast<uint32_t>(rng());
  std::vector<A> scales = seededValues<A>(chunks, seed + 1, 3e3);  // large: halves must round (and saturate)
  for (A& s : scales) s = std::fabs(s);
  std::vector<T> out(n + 1);
  std::memset(out.data(), 0x5a, out.size() * sizeof(T));
  const std::vector<T> guard(out.end() - 1, out.end());
  OnebitDecodeArgs args{signs.data(), scales.data(), chunkLength, n, Value<T>::type, out.data(), factor};
  REQUIRE(cpu.ops.onebitDecode(cpu.ctx, &args, nullptr) == dctSuccess);
  CHECK(std::memcmp(&out[n], guard.data(), sizeof(T)) == 0);
  out.pop_back();
  std::vector<T> ref(n);
  for (size_t i = 0; i < n; i++) {
    const A s = (signs[i / 32] >> (i % 32)) & 1u ? scales[i / chunkLength] : -scales[i / chunkLength];
    ref[i] = std::isnan(factor) ? Value<T>::store(std::numeric_limits<A>::quiet_NaN())
                                : Value<T>::store(s * static_cast<A>(factor));
  }
  CHECK(sameBytes(out, ref));
}

TEST_CASE("decode matches the reference, rounded once to the tensor type; a NaN factor writes NaN") {
  uint64_t seed = 900;
  for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(33), size_t(1000), size_t(100003)})
    for (size_t chunk : {size_t(32), size_t(64), size_t(32 * 1001)})
      for (double factor : {1.0, 3.0, std::numeric_limits<double>::quiet_NaN()}) {
        checkDecode<float>(n, chunk, factor, seed++);
        checkDecode<double>(n, chunk, factor, seed++);
        checkDecode<Half>(n, chunk, factor, seed++);
        checkDecode<BFloat16>(n, chunk, factor, seed++);
      }
  // The canonical NaN: the same bits on both twins.
  Cpu cpu;
  uint32_t word = 0xffffffffu;
  float scale = 1.0f, out[3];
  Half half[3];
  OnebitDecodeArgs args{&word, &scale, 32, 3, dctFloat32, out, std::numeric_limits<double>::quiet_NaN()};
  REQUIRE(cpu.ops.onebitDecode(cpu.ctx, &args, nullptr) == dctSuccess);
  for (float f : out) CHECK(floatBits(f) == 0x7fc00000u);
  args.dtype = dctFloat16;
  args.out = half;
  REQUIRE(cpu.ops.onebitDecode(cpu.ctx, &args, nullptr) == dctSuccess);
  for (Half h : half) CHECK(h.bits == kHalfNaN);
}

TEST_CASE("chunking: word-aligned chunks cover [0, n), empty past the end") {
  for (size_t n : {size_t(1), size_t(31), size_t(33), size_t(8 * 3 - 1), size_t(1000003)})
    for (int P : {1, 2, 3, 4, 7}) {
      const OnebitChunks ch(n, P);
      CAPTURE(n);
      CAPTURE(P);
      CHECK(ch.chunkLength() % 32 == 0);
      CHECK(ch.chunkLength() == referenceChunkLength(n, P));
      size_t covered = 0, words = 0;
      for (int j = 0; j < P; j++) {
        CHECK(ch.begin(j) == covered);
        covered += ch.length(j);
        words += ch.words(j);
        CHECK(ch.length(j) <= ch.chunkLength());
      }
      CHECK(covered == n);
      CHECK(words == onebitWords(n));
    }
}

TEST_CASE("the reference collective: error feedback loses nothing (sum of outputs + errors = sum of inputs)") {
  // Invariant in real arithmetic: sum_t out_t + mean_r(we_r) + se = sum_t mean_r(v_r,t).
  const size_t n = 1001;
  const int P = 3;
  OnebitReference<double> ref(n, P);
  std::vector<double> sent(n, 0.0), given(n, 0.0);
  for (int t = 0; t < 50; t++) {
    std::vector<std::vector<double>> in(P);
    for (int r = 0; r < P; r++) in[r] = seededValues<double>(n, 7000 + 10 * t + r);
    const std::vector<double> out = ref.step(in, false);
    for (size_t i = 0; i < n; i++) {
      sent[i] += out[i];
      for (int r = 0; r < P; r++) given[i] += in[r][i] / P;
    }
  }
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double kept = 0;
    for (int r = 0; r < P; r++) kept += ref.workerError[r][i] / P;
    const int j = static_cast<int>(i / ref.chunk);
    kept += ref.serverError[j][i - ref.begin(j)];
    worst = std::fmax(worst, std::fabs(sent[i] + kept - given[i]));
  }
  CHECK(worst < 1e-9);
}
