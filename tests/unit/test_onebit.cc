// The CPU twin's 1-bit kernels against the plain reference of
// tests/common/onebit_reference.h: sign-bit layout, the slots (each chunk's
// scale before its signs), the fixed-order sum of squares and the scale,
// error feedback, the server's average compressed in place of an input, the
// decode (halves rounded once), and the NaN rule; all four tensor types,
// odd sizes.
#include <doctest/doctest.h>

#include <algorithm>
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

// Host slots (onebit_kernels.h) for `chunks` chunks of chunkWords words,
// filled with a guard pattern.
template <typename A>
struct Slots {
  size_t chunkWords, slotBytes;
  std::vector<uint64_t> bytes;  // 8-byte aligned
  Slots(size_t cw, size_t chunks) : chunkWords(cw), slotBytes(onebitSlotBytes(cw, sizeof(A))) {
    bytes.assign((chunks * slotBytes + 7) / 8, 0xdeadbeefdeadbeefull);
  }
  unsigned char* base() { return reinterpret_cast<unsigned char*>(bytes.data()); }
  OnebitSlotsOf<A> view() const { return {reinterpret_cast<const unsigned char*>(bytes.data()), slotBytes}; }
  uint32_t& word(size_t w) {
    return const_cast<uint32_t*>(view().words(w / chunkWords))[w % chunkWords];
  }
  void setScale(size_t q, A s) { std::memcpy(base() + q * slotBytes, &s, sizeof(A)); }
};

template <typename T, typename A = typename Value<T>::Acc>
struct Compressed {
  std::vector<uint32_t> signs;  // read back from the slots
  std::vector<A> error;
  A scale;
  OnebitCompressArgs args;
};

// What a compression keeps and reads back (keepX, pending).
struct Keep {
  bool keepX = false, pending = false;
  double pendingScale = 0;
};

// One compression into `chunks` slots of chunkWords words (0: one slot for
// everything); every slot must carry the scale, words past n stay as they were.
template <typename T, typename A = typename Value<T>::Acc>
Compressed<T> compress(Cpu& cpu, const std::vector<T>* input, const std::vector<A>& errorIn, bool inPlace,
                       size_t chunkWords = 0, const OnebitMean& mean = {}, Keep keep = {}) {
  const size_t n = errorIn.size(), words = onebitWords(n);
  const size_t cw = chunkWords ? chunkWords : std::max<size_t>(words, 1);
  const size_t chunks = std::max<size_t>((words + cw - 1) / cw, 1);
  Slots<A> slots(cw, chunks);
  Compressed<T> c;
  c.error = inPlace ? errorIn : std::vector<A>(n, A(7));
  std::vector<double> scratch(onebitScratchBytes(n) / sizeof(double));
  c.args = OnebitCompressArgs{input ? input->data() : nullptr, inPlace ? c.error.data() : errorIn.data(),
                              c.error.data(), n, Value<T>::type, slots.base(), slots.slotBytes, cw,
                              static_cast<int>(chunks), scratch.data(), mean, keep.keepX, keep.pending,
                              keep.pendingScale};
  REQUIRE(cpu.ops.onebitCompress(cpu.ctx, &c.args, nullptr) == dctSuccess);
  for (size_t w = 0; w < words; w++) c.signs.push_back(slots.word(w));
  for (size_t w = words; w < chunks * cw; w++) CHECK(slots.word(w) == 0xdeadbeefu);
  c.scale = slots.view().scale(0);
  for (size_t q = 1; q < chunks; q++) CHECK(sameBits(slots.view().scale(q), c.scale));
  return c;
}

template <typename T>
void checkCompress(size_t n, uint64_t seed, bool withInput, bool inPlace, size_t chunkWords = 0) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(withInput);
  CAPTURE(inPlace);
  CAPTURE(chunkWords);
  Cpu cpu;
  const std::vector<T> input = seededValues<T>(n, seed);
  const std::vector<A> errorIn = seededValues<A>(n, seed + 1, 0.3);
  const Compressed<T> got = compress<T>(cpu, withInput ? &input : nullptr, errorIn, inPlace, chunkWords);

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

TEST_CASE("compress into several slots: word w in slot w / chunkWords, the scale in every slot") {
  uint64_t seed = 300;
  for (size_t n : {size_t(33), size_t(1000), size_t(33000), size_t(100003)})
    for (size_t cw : {size_t(1), size_t(3), size_t(32), size_t(33), size_t(977)}) {
      checkCompress<float>(n, seed++, true, false, cw);
      checkCompress<double>(n, seed++, true, true, cw);
      checkCompress<BFloat16>(n, seed++, true, false, cw);
    }
  // Past kStreamBytes: the error is streamed.
  checkCompress<float>((size_t(8) << 20) / 4 + 1001, seed++, true, false, 20000);
  checkCompress<double>((size_t(8) << 20) / 8 + 33, seed++, false, true, 20000);
}

// keepX keeps x and pending forms the error it left as it reads x back:
// two chained steps give the signs, scales and errors of the plain ones.
template <typename T>
void checkKeptX(size_t n, uint64_t seed, bool inPlace) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(inPlace);
  Cpu cpu;
  const std::vector<T> v1 = seededValues<T>(n, seed), v2 = seededValues<T>(n, seed + 1);
  std::vector<A> e0 = seededValues<A>(n, seed + 2, 0.3);
  if (n > 5) e0[5] = A(-0.0);  // a negative zero error must come back as itself
  const Compressed<T> plain1 = compress<T>(cpu, &v1, e0, false, 977);
  const Compressed<T> plain2 = compress<T>(cpu, &v2, plain1.error, false, 977);

  const Compressed<T> kept1 = compress<T>(cpu, &v1, e0, inPlace, 977, {}, Keep{true, false, 0});
  std::vector<A> x1(n);
  for (size_t i = 0; i < n; i++) x1[i] = static_cast<A>(Value<T>::load(v1[i])) + e0[i];
  CHECK(sameBytes(kept1.error, x1));
  CHECK(sameBytes(kept1.signs, plain1.signs));
  CHECK(sameBits(kept1.scale, plain1.scale));
  const Keep pending{true, true, kept1.args.scaleValue};
  const Compressed<T> kept2 = compress<T>(cpu, &v2, kept1.error, inPlace, 977, {}, pending);
  CHECK(sameBytes(kept2.signs, plain2.signs));
  CHECK(sameBits(kept2.scale, plain2.scale));
  // The error alone, kept: the error x1 left, which the plain step stored.
  const Compressed<T> resolved = compress<T>(cpu, nullptr, kept1.error, false, 0, {}, pending);
  CHECK(sameBytes(resolved.error, plain1.error));
  // Pending without keepX: the plain error.
  const Keep plainOut{false, true, kept1.args.scaleValue};
  const Compressed<T> mixed = compress<T>(cpu, &v2, kept1.error, inPlace, 977, {}, plainOut);
  CHECK(sameBytes(mixed.error, plain2.error));
}

TEST_CASE("keepX keeps x; pending forms the error it left: chained steps equal plain ones") {
  uint64_t seed = 700;
  for (size_t n : {size_t(0), size_t(1), size_t(33), size_t(100003), (size_t(8) << 20) / 4 + 9})
    for (bool inPlace : {false, true}) {
      checkKeptX<float>(n, seed++, inPlace);
      checkKeptX<double>(n, seed++, inPlace);
      checkKeptX<Half>(n, seed++, inPlace);
      checkKeptX<BFloat16>(n, seed++, inPlace);
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

// A server's compression: x = the ranks' decoded mean + its error, the
// rest as for a worker.
template <typename T>
void checkMean(size_t n, int ranks, uint64_t seed, bool inPlace) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(ranks);
  CAPTURE(inPlace);
  Cpu cpu;
  std::mt19937_64 rng(seed);
  const size_t words = onebitWords(n);
  Slots<A> in(words + 3, ranks);  // padded past the chunk's words, as received
  std::vector<A> scales = seededValues<A>(ranks, seed + 1);
  for (int r = 0; r < ranks; r++) {
    in.setScale(r, std::fabs(scales[r]));
    for (size_t w = 0; w < words + 3; w++) in.word(r * in.chunkWords + w) = static_cast<uint32_t>(rng());
  }
  const std::vector<A> error = seededValues<A>(n, seed + 2, 0.1);
  const OnebitMean mean{in.base(), in.slotBytes, ranks};
  const Compressed<T> got = compress<T>(cpu, nullptr, error, inPlace, 0, mean);

  std::vector<A> y(n);
  for (size_t i = 0; i < n; i++) {
    auto decoded = [&](int r) {
      const A s = in.view().scale(r);
      return (in.view().words(r)[i / 32] >> (i % 32)) & 1u ? s : -s;
    };
    A s = decoded(0);
    for (int r = 1; r < ranks; r++) s += decoded(r);
    y[i] = s / static_cast<A>(ranks) + error[i];
  }
  const double sumsq = referenceSumOfSquares(y.data(), n);
  const A scale = referenceScale<A>(sumsq, n);
  std::vector<uint32_t> signs(words, 0);
  std::vector<A> newError(n);
  for (size_t i = 0; i < n; i++) {
    if (y[i] >= 0) signs[i / 32] |= 1u << (i % 32);
    newError[i] = y[i] - (y[i] >= 0 ? scale : -scale);
  }
  CHECK(sameBits(got.args.sumOfSquares, sumsq));
  CHECK(sameBits(got.scale, scale));
  CHECK(sameBytes(got.signs, signs));
  CHECK(sameBytes(got.error, newError));
  // Kept as the server keeps it: y itself, then a pending error read back
  // as the error y left.
  const Compressed<T> kept = compress<T>(cpu, nullptr, error, inPlace, 0, mean, Keep{true, false, 0});
  CHECK(sameBytes(kept.error, y));
  CHECK(sameBytes(kept.signs, signs));
  const Keep pending{true, true, kept.args.scaleValue};
  const Compressed<T> next = compress<T>(cpu, nullptr, kept.error, inPlace, 0, mean, pending);
  const Compressed<T> plainNext = compress<T>(cpu, nullptr, newError, false, 0, mean);
  CHECK(sameBytes(next.signs, plainNext.signs));
  CHECK(sameBits(next.scale, plainNext.scale));
}

TEST_CASE("server compression of the ranks' mean matches the reference (ranks in order, / P, + error)") {
  uint64_t seed = 500;
  for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(33), size_t(100003)})
    for (int ranks : {1, 2, 3, 5}) {
      checkMean<float>(n, ranks, seed++, false);
      checkMean<double>(n, ranks, seed++, true);
      checkMean<BFloat16>(n, ranks, seed++, n % 2 == 0);
    }
}

TEST_CASE("compress refuses a mean with an input, and zero words per slot") {
  Cpu cpu;
  std::vector<float> v(40, 1.0f), err(40, 0.0f);
  Slots<float> slots(2, 1);
  std::vector<double> scratch(onebitScratchBytes(40) / sizeof(double));
  OnebitCompressArgs a{v.data(), err.data(), err.data(), 40, dctFloat32, slots.base(), slots.slotBytes, 2, 1,
                       scratch.data(), OnebitMean{slots.base(), slots.slotBytes, 1}};
  CHECK(cpu.ops.onebitCompress(cpu.ctx, &a, nullptr) == dctInternalError);
  a.mean = {};
  a.chunkWords = 0;
  CHECK(cpu.ops.onebitCompress(cpu.ctx, &a, nullptr) == dctInternalError);
}

template <typename T>
void checkDecode(size_t n, size_t chunkWords, double factor, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(chunkWords);
  CAPTURE(factor);
  Cpu cpu;
  std::mt19937_64 rng(seed);
  const size_t chunkLength = 32 * chunkWords, chunks = n ? (n + chunkLength - 1) / chunkLength : 1;
  Slots<A> slots(chunkWords, chunks);
  std::vector<A> scales = seededValues<A>(chunks, seed + 1, 3e3);  // large: halves must round (and saturate)
  for (size_t j = 0; j < chunks; j++) {
    slots.setScale(j, std::fabs(scales[j]));
    for (size_t w = 0; w < chunkWords; w++) slots.word(j * chunkWords + w) = static_cast<uint32_t>(rng());
  }
  std::vector<T> out(n + 1);
  std::memset(out.data(), 0x5a, out.size() * sizeof(T));
  const std::vector<T> guard(out.end() - 1, out.end());
  OnebitDecodeArgs args{slots.base(), slots.slotBytes, chunkWords, n, Value<T>::type, out.data(), factor};
  REQUIRE(cpu.ops.onebitDecode(cpu.ctx, &args, nullptr) == dctSuccess);
  CHECK(std::memcmp(&out[n], guard.data(), sizeof(T)) == 0);
  out.pop_back();
  std::vector<T> ref(n);
  for (size_t i = 0; i < n; i++) {
    const size_t j = i / chunkLength;
    const A sj = slots.view().scale(j);
    const A s = (slots.view().words(j)[(i % chunkLength) / 32] >> (i % 32)) & 1u ? sj : -sj;
    ref[i] = std::isnan(factor) ? Value<T>::store(std::numeric_limits<A>::quiet_NaN())
                                : Value<T>::store(s * static_cast<A>(factor));
  }
  CHECK(sameBytes(out, ref));
}

TEST_CASE("decode matches the reference, rounded once to the tensor type; a NaN factor writes NaN") {
  uint64_t seed = 900;
  for (size_t n : {size_t(0), size_t(1), size_t(31), size_t(33), size_t(1000), size_t(100003)})
    for (size_t chunkWords : {size_t(1), size_t(2), size_t(1001)})
      for (double factor : {1.0, 3.0, std::numeric_limits<double>::quiet_NaN()}) {
        checkDecode<float>(n, chunkWords, factor, seed++);
        checkDecode<double>(n, chunkWords, factor, seed++);
        checkDecode<Half>(n, chunkWords, factor, seed++);
        checkDecode<BFloat16>(n, chunkWords, factor, seed++);
      }
  // Past kStreamBytes with an aligned output: the streamed stores.
  checkDecode<float>((size_t(8) << 20) / 4 + 1000, 40001, 4.0, seed++);
  // The canonical NaN: the same bits on both twins.
  Cpu cpu;
  Slots<float> slots(1, 1);
  slots.setScale(0, 1.0f);
  slots.word(0) = 0xffffffffu;
  float out[3];
  Half half[3];
  OnebitDecodeArgs args{slots.base(), slots.slotBytes, 1, 3, dctFloat32, out, std::numeric_limits<double>::quiet_NaN()};
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
