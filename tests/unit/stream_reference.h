// The fixed-capacity step's ops (kernels/stream_args.h) for the unit tests:
// one rank's buffers and StreamStepArgs on the CPU twin (a Rig), and plain
// references written with loops and the independent half conversions of
// tests/common/half_reference.h (no library kernel).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/half_reference.h"
#include "base/dtype.h"
#include "kernels/kernels.h"
#include "reference.h"

namespace dct::test {

// A state whose every field is distinct, so a field written by mistake
// shows; zeroed first (padding too: some tests compare states as bytes).
inline StreamState busyState(int committed, int estimated) {
  StreamState s;
  std::memset(&s, 0, sizeof s);
  s.step = 41;
  s.tau = 0.375;
  s.lastEstimateStep = 39;
  s.committed = committed;
  s.estimates = 6;
  s.nnz = 17;
  s.nonFinite = 2;
  s.overflow = 3;
  s.draftTau = 0.625;
  s.estimated = estimated;
  s.draftDrift = 1;
  s.selected = 99;
  s.written = 98;
  s.writtenNonFinite = 97;
  s.lastOk = 1;
  return s;
}

// --- elements of any dctDataType_t as doubles ---

inline double refLoad(dctDataType_t t, const void* p, size_t i) {
  switch (t) {
    case dctFloat64: return static_cast<const double*>(p)[i];
    case dctFloat16: return dcttest::refHalfToFloat(static_cast<const uint16_t*>(p)[i]);
    case dctBFloat16: return dcttest::refBf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// w rounded to t (halves through fp32).
inline void refStore(dctDataType_t t, double w, void* p, size_t i) {
  switch (t) {
    case dctFloat64: static_cast<double*>(p)[i] = w; break;
    case dctFloat16: static_cast<uint16_t*>(p)[i] = dcttest::refFloatToHalf(static_cast<float>(w)); break;
    case dctBFloat16: static_cast<uint16_t*>(p)[i] = dcttest::refFloatToBf16(static_cast<float>(w)); break;
    default: static_cast<float*>(p)[i] = static_cast<float>(w);
  }
}

inline double refMaxFinite(dctDataType_t t) {
  switch (t) {
    case dctFloat64: return std::numeric_limits<double>::max();
    case dctFloat16: return 65504.0;
    case dctBFloat16: return dcttest::refBf16ToFloat(0x7f7f);
    default: return std::numeric_limits<float>::max();
  }
}

// Arithmetic in the accumulation type (fp32 or fp64) on doubles holding its values.
inline double inAcc(dctDataType_t acc, double x) { return acc == dctFloat64 ? x : static_cast<double>(static_cast<float>(x)); }
inline double addAcc(dctDataType_t acc, double a, double b) {
  return acc == dctFloat64 ? a + b : static_cast<double>(static_cast<float>(a) + static_cast<float>(b));
}
inline double subAcc(dctDataType_t acc, double a, double b) {
  return acc == dctFloat64 ? a - b : static_cast<double>(static_cast<float>(a) - static_cast<float>(b));
}
inline double mulAcc(dctDataType_t acc, double a, double b) {
  return acc == dctFloat64 ? a * b : static_cast<double>(static_cast<float>(a) * static_cast<float>(b));
}

inline bool sameElement(dctDataType_t t, const void* a, const void* b, size_t i) {
  const size_t s = dtypeSize(t);
  return std::memcmp(static_cast<const char*>(a) + i * s, static_cast<const char*>(b) + i * s, s) == 0;
}
// The same bits, or both NaN (a NaN's payload is not part of any contract).
inline bool sameValue(dctDataType_t t, const void* a, const void* b, size_t i) {
  return sameElement(t, a, b, i) || (std::isnan(refLoad(t, a, i)) && std::isnan(refLoad(t, b, i)));
}

// The first i < n where ok(i) is false, else kAllPass (one assertion per
// buffer, its failing element in the message).
constexpr size_t kAllPass = ~size_t(0);
template <typename Ok>
size_t firstFailing(size_t n, Ok&& ok) {
  for (size_t i = 0; i < n; i++)
    if (!ok(i)) return i;
  return kAllPass;
}

inline uint64_t indexAt(int bytes, const void* p, size_t j) {
  return bytes == 8 ? static_cast<const uint64_t*>(p)[j] : static_cast<const uint32_t*>(p)[j];
}
inline void setIndex(int bytes, void* p, size_t j, uint64_t v) {
  if (bytes == 8) static_cast<uint64_t*>(p)[j] = v;
  else static_cast<uint32_t*>(p)[j] = static_cast<uint32_t>(v);
}

// n values of type t: normal, with zeros, NaN, +-Inf (nonFinite), and a
// few large ones past fp16's (and fp32's) range for the clamping.
inline std::vector<char> randomOf(dctDataType_t t, size_t n, uint64_t seed, bool nonFinite = true, bool huge = true) {
  auto v = randomVector<double>(n, seed, nonFinite);
  if (huge && n > 5) v[n / 2] = 1.0e6, v[n / 3] = -3.0e39, v[n / 4] = 70000.0;
  std::vector<char> out(n * dtypeSize(t));
  for (size_t i = 0; i < n; i++) refStore(t, v[i], out.data(), i);
  return out;
}

// --- the ops' plain references ---

// What streamSelect writes: the value acc becomes on the wire (a finite
// one clamped to +-limit in the wire type's arithmetic type, then rounded).
inline void refWireValue(dctDataType_t wire, double limit, double acc, void* out, size_t j) {
  double v = wire == dctFloat64 ? acc : static_cast<double>(static_cast<float>(acc));
  if (std::isfinite(acc)) {
    const double l = wire == dctFloat64 ? limit : static_cast<double>(static_cast<float>(limit));
    v = v > l ? l : (v < -l ? -l : v);
  }
  refStore(wire, v, out, j);
}

struct SelectRef {
  std::vector<uint64_t> indices;
  std::vector<char> values;    // wire type
  std::vector<char> residual;  // acc type
  size_t selected = 0, nonFinite = 0;
};

inline SelectRef refSelect(dctDataType_t acc, dctDataType_t gradType, dctDataType_t wire, double valueLimit,
                           const void* grad, const void* oldResidual, size_t n, double tau, size_t capacity) {
  SelectRef r;
  r.values.resize(capacity * dtypeSize(wire));
  r.residual.resize(n * dtypeSize(acc));
  const double limit = valueLimit > 0 ? valueLimit : refMaxFinite(wire);
  const double t = inAcc(acc, tau);
  for (size_t i = 0; i < n; i++) {
    const double a = addAcc(acc, refLoad(acc, oldResidual, i), inAcc(acc, refLoad(gradType, grad, i)));
    const bool take = std::isnan(a) || std::fabs(a) >= t;
    r.selected += take;
    if (!take || r.indices.size() == capacity) {
      refStore(acc, a, r.residual.data(), i);
      continue;
    }
    const size_t j = r.indices.size();
    r.indices.push_back(i);
    refWireValue(wire, limit, a, r.values.data(), j);
    const double sent = refLoad(wire, r.values.data(), j);
    refStore(acc, std::isfinite(a) ? subAcc(acc, a, inAcc(acc, sent)) : 0.0, r.residual.data(), i);
    r.nonFinite += !std::isfinite(a);
  }
  return r;
}

// The drift band of stream_args.h, written out (std::sqrt).
inline bool refDrifted(double selected, double k, bool fresh, bool atFloor) {
  if (fresh) return false;
  const double noise = 3 * std::sqrt(k);
  const double low = std::min(k / 1.25, k - noise), high = std::max(k * 1.25, k + noise);
  if (atFloor) return selected > high;
  return selected == 0 || selected < low || selected > high;
}

// --- one rank's step on the CPU twin ---

struct Rig {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  dctDataType_t acc, gradType, wire;
  int indexBytes;
  size_t n, capacity;
  int ranks;
  std::vector<char> grad, residuals[2], slot, slots, target, result;
  StreamState state{};
  int32_t failed = 0;
  StreamStepArgs a{};

  Rig(dctDataType_t acc_, dctDataType_t grad_, dctDataType_t wire_, int indexBytes_, size_t n_, size_t capacity_,
      int ranks_ = 1)
      : acc(acc_), gradType(grad_), wire(wire_), indexBytes(indexBytes_), n(n_), capacity(capacity_), ranks(ranks_) {
    REQUIRE(ops.createContext(&ctx) == dctSuccess);
    const size_t bytes = slotBytes(capacity, indexBytes, dtypeSize(wire));
    grad.assign(n * dtypeSize(gradType), 0);
    residuals[0].assign(n * dtypeSize(acc), 0);
    residuals[1].assign(n * dtypeSize(acc), 0);
    slot.assign(bytes, 0);
    slots.assign(bytes * static_cast<size_t>(ranks), 0);
    target.assign(n * dtypeSize(acc), 0);
    result.assign(n * dtypeSize(gradType), 0);
    a.state = &state;
    a.failed = &failed;
    a.sticky = false;
    a.grad = grad.data();
    a.gradType = gradType;
    a.residuals[0] = residuals[0].data();
    a.residuals[1] = residuals[1].data();
    a.n = n;
    a.accType = acc;
    a.errorFeedback = 1;
    a.density = 0.05;
    a.interval = 3;
    a.seed = 5;
    a.k = std::max<size_t>(1, static_cast<size_t>(std::llround(0.05 * static_cast<double>(n))));
    a.tauFloor = acc == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                   : static_cast<double>(std::numeric_limits<float>::denorm_min());
    a.capacity = capacity;
    a.indexBytes = indexBytes;
    a.wireType = wire;
    a.valueLimit = 0;
    a.slotBytes = bytes;
    a.digest = 0x5eed5eed12345678ull;
    a.slot = slot.data();
    a.slots = slots.data();
    a.ranks = ranks;
    a.target = target.data();
    a.result = result.data();
    a.resultType = gradType;
    a.factor = 1.0;
  }
  ~Rig() { ops.destroyContext(ctx); }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  char* slotOf(int r) { return slots.data() + static_cast<size_t>(r) * a.slotBytes; }
  const char* committedResidual() const { return residuals[state.committed].data(); }
  const char* spareResidual() const { return residuals[1 - state.committed].data(); }
};

// A slot of `capacity` entries built by hand: header, indices, values.
inline void writeSlot(char* slot, uint64_t digest, uint64_t nnz, uint64_t nonFinite, int indexBytes,
                      const std::vector<uint64_t>& indices, const std::vector<char>& values, size_t capacity) {
  const SlotHeader h{digest, nnz, nonFinite, 0};
  std::memcpy(slot, &h, sizeof h);
  for (size_t j = 0; j < indices.size(); j++) setIndex(indexBytes, slot + slotIndexOffset(), j, indices[j]);
  if (!values.empty()) std::memcpy(slot + slotValueOffset(capacity, indexBytes), values.data(), values.size());
}

inline SlotHeader headerOf(const char* slot) {
  SlotHeader h;
  std::memcpy(&h, slot, sizeof h);
  return h;
}

}  // namespace dct::test
