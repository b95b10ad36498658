#include "core/state_blob.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "base/dtype.h"
#include "core/onebit_state.h"
#include "kernels/onebit_kernels.h"

namespace dct {
namespace {

// A field added to these must be added to fields() below, with a new
// kStateVersion (and the old layout still read, or refused by name).
static_assert(sizeof(TauState) == 56, "TauState changed: update the saved state's fields");
static_assert(sizeof(dctStats_t) == 200, "dctStats_t changed: update the saved state's fields");
static_assert(sizeof(RankMessage) == 24, "RankMessage changed: update the saved state's fields");

// One field list (fields() below) drives the writer, the reader and the sizer.
struct Sizer {
  size_t at = 0;
  template <typename T>
  void operator()(const T&) { at += sizeof(T); }
  void operator()(const bool&) { at += 1; }
  template <typename T, typename Each>
  void list(const std::vector<T>& v, Each each) {
    at += 8;
    for (const T& e : v) each(*this, const_cast<T&>(e));
  }
};

struct Writer {
  unsigned char* p;
  size_t at;
  template <typename T>
  void operator()(const T& v) {
    std::memcpy(p + at, &v, sizeof(T));
    at += sizeof(T);
  }
  void operator()(const bool& b) { p[at++] = b ? 1 : 0; }
  template <typename T, typename Each>
  void list(const std::vector<T>& v, Each each) {
    (*this)(static_cast<uint64_t>(v.size()));
    for (const T& e : v) each(*this, const_cast<T&>(e));
  }
};

struct Reader {
  const unsigned char* p;
  size_t at, end;
  bool truncated = false, badFlag = false;
  template <typename T>
  void operator()(T& v) {
    if (end - at < sizeof(T)) {
      truncated = true;
      at = end;
      v = T{};
      return;
    }
    std::memcpy(&v, p + at, sizeof(T));
    at += sizeof(T);
  }
  void operator()(bool& b) {
    uint8_t u = 0;
    (*this)(u);
    badFlag = badFlag || u > 1;
    b = u == 1;
  }
  // Each element takes at least `minBytes`: a corrupt length cannot ask for
  // more memory than the blob could describe.
  template <typename T, typename Each>
  void list(std::vector<T>& v, Each each, size_t minBytes) {
    uint64_t n = 0;
    (*this)(n);
    if (n > (end - at) / minBytes) {
      truncated = true;
      at = end;
      return;
    }
    v.resize(n);
    for (T& e : v) each(*this, e);
  }
};

template <typename IO, typename T, typename Each>
void list(IO& io, std::vector<T>& v, Each each, size_t minBytes) {
  if constexpr (std::is_same_v<IO, Reader>) io.list(v, each, minBytes);
  else io.list(v, each);
}

template <typename IO>
void fields(IO& io, SavedState& st) {
  StateIdentity& id = st.id;
  io(id.count), io(id.dtype), io(id.accType), io(id.wireType), io(id.ranks), io(id.rank);
  io(id.density), io(id.thresholdInterval), io(id.errorFeedback), io(id.warmupSteps), io(id.thresholdMethod);
  io(id.algorithm), io(id.compressor), io(id.autoGlobalTopk), io(id.seed);
  io(st.residualElems), io(st.serverElems), io(st.ownerElems);
  StateScalars& s = st.s;
  dctStats_t& x = s.stats;
  io(x.step), io(x.threshold), io(x.nnz), io(x.nonFinite), io(x.bytesSent), io(x.bytesReceived), io(x.denseBytes);
  io(x.algorithm), io(x.indexBytes), io(x.thresholdEstimates), io(x.totalBytesSent), io(x.totalBytesReceived);
  io(x.totalDenseBytes);
  for (int i = 0; i < dctNumPhases; i++) io(x.phaseUs[i]), io(x.totalPhaseUs[i]);
  io(x.ownerKept), io(x.ownerThreshold), io(x.ownerResidualMass);
  TauState& t = s.tau;
  io(t.tau), io(t.have), io(t.lastEstimateStep), io(t.acceptedCount), io(t.driftPending), io(t.tightenedTo);
  io(t.starvedRun);
  io(s.lastStepNs), io(s.lastLocalNs);
  list(io, s.lastMessages, [](auto& o, RankMessage& m) { o(m.nnz), o(m.bytes), o(m.lastStepNs); }, 24);
  list(io, s.chunkNeeds, [](auto& o, uint64_t& n) { o(n); }, 8);
  io(s.chunkElems);
  io(s.residualZero), io(s.onebitPending), io(s.onebitPendingScale);
  io(s.serverPresent), io(s.serverPending), io(s.serverPendingScale);
  io(s.ownerBegin), io(s.ownerLength), io(s.ownerZero), io(s.ownerTau), io(s.ownerHaveTau);
  io(s.ownerLastEstimateStep);
  if (stateHasOwnerDrift(st.version)) io(s.ownerDriftPending);
  if (!stateHasSegments(st.version)) return;
  list(io, s.segments, [](auto& o, uint64_t& v) { o(v); }, 8);
  list(io, s.pendingScales, [](auto& o, double& v) { o(v); }, 8);
  list(io, s.serverPendingScales, [](auto& o, double& v) { o(v); }, 8);
}

// Version 2 and 4's segments: well formed, and a pending scale per segment and
// per piece of this rank's chunk.
bool checkSegments(const SavedState& st, std::string& why) {
  const StateScalars& s = st.s;
  auto bad = [&](const char* what) {
    why = what;
    return false;
  };
  if (!stateHasSegments(st.version)) return true;
  const size_t m = s.segments.size();
  if (m < 3 || st.id.compressor != dctCompressorOnebit) return bad("segments on a compressor without them");
  if (s.segments[0] != 0 || s.segments[m - 1] != st.id.count) return bad("the segments do not span count");
  for (size_t i = 1; i < m; i++)
    if (s.segments[i] <= s.segments[i - 1]) return bad("the segments' offsets are not increasing");
  if (s.pendingScales.size() != m - 1) return bad("not one pending scale per segment");
  std::vector<size_t> offsets(s.segments.begin(), s.segments.end());
  const OnebitSegments seg = onebitSegmentsOf(offsets.data(), static_cast<int>(m - 1), st.id.count, st.id.ranks,
                                              st.id.rank);
  if (s.serverPendingScales.size() != static_cast<size_t>(seg.serverCount()))
    return bad("not one pending server scale per piece of this rank's chunk");
  for (double v : s.pendingScales)
    if (!(v >= 0 && std::isfinite(v))) return bad("a pending 1-bit scale is not finite and non-negative");
  for (double v : s.serverPendingScales)
    if (!(v >= 0 && std::isfinite(v))) return bad("a pending 1-bit scale is not finite and non-negative");
  return true;
}

size_t pad8(size_t b) { return (b + 7) & ~size_t(7); }

// Four independent lanes of 8-byte words (several GB/s); every step is a
// bijection of the lane for a fixed word, so any one changed word changes
// the sum.
uint64_t checksum(const unsigned char* p, size_t n) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t lane[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int l = 0; l < 4; l++) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * kMul;
      lane[l] ^= lane[l] >> 32;
    }
  uint64_t h = n;
  for (uint64_t l : lane) {
    h = (h ^ l) * kMul;
    h ^= h >> 29;
  }
  for (; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 31);
}

// Checks the fields' ranges and the array lengths against them.
bool checkFields(const SavedState& st, std::string& why) {
  const StateIdentity& id = st.id;
  const StateScalars& s = st.s;
  auto bad = [&](const char* what) {
    why = what;
    return false;
  };
  if (id.dtype < 0 || id.dtype >= dctNumTypes || id.wireType < 0 || id.wireType >= dctNumTypes)
    return bad("a datatype field is not a dctDataType_t");
  if (id.accType != accumulationType(static_cast<dctDataType_t>(id.dtype)))
    return bad("accType is not the datatype's accumulation type");
  if (id.ranks < 1 || id.rank < 0 || id.rank >= id.ranks) return bad("rank is outside the comm size");
  if (st.residualElems != id.count) return bad("the residual's length is not count");
  const bool onebit = id.compressor == dctCompressorOnebit;
  if (s.serverPresent ? !onebit || st.serverElems != OnebitChunks(id.count, id.ranks).length(id.rank)
                      : st.serverElems != 0)
    return bad("the server error's length is not this rank's chunk");
  if (!s.serverPresent && s.serverPending) return bad("a pending server error without one");
  if (s.ownerBegin > id.count || s.ownerLength > id.count - s.ownerBegin) return bad("the owner range passes count");
  if (st.ownerElems != (s.ownerZero ? 0 : s.ownerLength)) return bad("the owner residual's length is not its range's");
  if (!(s.tau.tau >= 0) || !(s.ownerTau >= 0)) return bad("a threshold is NaN or negative");
  if (s.tau.lastEstimateStep > s.stats.step || s.ownerLastEstimateStep > s.stats.step)
    return bad("a last estimate step is past the step counter");
  if (s.onebitPending && !onebit) return bad("a pending 1-bit error on a top-k compressor");
  if ((s.onebitPending && !(s.onebitPendingScale >= 0 && std::isfinite(s.onebitPendingScale))) ||
      (s.serverPending && !(s.serverPendingScale >= 0 && std::isfinite(s.serverPendingScale))))
    return bad("a pending 1-bit scale is not finite and non-negative");
  if (s.stats.indexBytes != (id.count > 0xffffffffull ? 8 : 4)) return bad("stats.indexBytes does not fit count");
  if (s.stats.algorithm < 0 || s.stats.algorithm > dctNumAlgorithms) return bad("stats.algorithm is out of range");
  if (s.lastMessages.size() > static_cast<size_t>(id.ranks)) return bad("more message counts than ranks");
  return true;
}

// A non-finite value (exponent all ones), by bits: the blob need not be aligned.
template <typename Bits>
bool allFinite(const unsigned char* p, uint64_t n, Bits expMask, bool& allZero) {
  allZero = true;
  for (uint64_t i = 0; i < n; i++) {
    Bits b;
    std::memcpy(&b, p + i * sizeof(Bits), sizeof(Bits));
    if ((b & expMask) == expMask) return false;
    allZero = allZero && (b << 1) == 0;
  }
  return true;
}

bool finiteArray(const unsigned char* p, uint64_t n, int32_t accType, bool& allZero) {
  return accType == dctFloat64 ? allFinite<uint64_t>(p, n, 0x7ff0000000000000ull, allZero)
                               : allFinite<uint32_t>(p, n, 0x7f800000u, allZero);
}

}  // namespace

void layOutState(SavedState& st) {
  Sizer sizer{kStateHeaderBytes};
  fields(sizer, st);
  const size_t es = dtypeSize(static_cast<dctDataType_t>(st.id.accType));
  st.residualAt = pad8(sizer.at);
  st.serverAt = pad8(st.residualAt + st.residualElems * es);
  st.ownerAt = pad8(st.serverAt + st.serverElems * es);
  st.bytes = pad8(st.ownerAt + st.ownerElems * es);
}

void writeState(const SavedState& st, unsigned char* out) {
  std::memset(out, 0, st.residualAt);  // padding included: the checksum covers it
  Writer w{out, 0};
  const uint64_t bytes = st.bytes, sum = 0;
  w(kStateMagic), w(st.version), w(bytes), w(sum);
  fields(w, const_cast<SavedState&>(st));
  // The padding between and after the arrays.
  const size_t es = dtypeSize(static_cast<dctDataType_t>(st.id.accType));
  for (auto [from, to] : {std::pair{st.residualAt + st.residualElems * es, st.serverAt},
                          std::pair{st.serverAt + st.serverElems * es, st.ownerAt},
                          std::pair{st.ownerAt + st.ownerElems * es, st.bytes}})
    std::memset(out + from, 0, to - from);
}

void sealState(unsigned char* out, size_t bytes) {
  const uint64_t sum = checksum(out + kStateHeaderBytes, bytes - kStateHeaderBytes);
  std::memcpy(out + 16, &sum, 8);
}

bool readState(const unsigned char* in, size_t bytes, SavedState& st, std::string& why, bool verifyArrays) {
  char msg[160];
  if (bytes < kStateHeaderBytes) {
    std::snprintf(msg, sizeof msg, "truncated: %zu bytes, the header alone is %zu", bytes, kStateHeaderBytes);
    why = msg;
    return false;
  }
  uint32_t magic, version;
  uint64_t total, sum;
  std::memcpy(&magic, in, 4);
  std::memcpy(&version, in + 4, 4);
  std::memcpy(&total, in + 8, 8);
  std::memcpy(&sum, in + 16, 8);
  if (magic == __builtin_bswap32(kStateMagic)) {
    why = "saved on a host of the other byte order";
    return false;
  }
  if (magic != kStateMagic) {
    std::snprintf(msg, sizeof msg, "not a saved compressor state (magic 0x%08x, expected 0x%08x)", magic, kStateMagic);
    why = msg;
    return false;
  }
  if (version < 1 || version > kStateVersion) {
    std::snprintf(msg, sizeof msg, "format version %u; this build reads versions 1 to %u", version, kStateVersion);
    why = msg;
    return false;
  }
  if (total != bytes) {
    std::snprintf(msg, sizeof msg, "%s: the state is %" PRIu64 " bytes, %zu given",
                  bytes < total ? "truncated" : "wrong size", total, bytes);
    why = msg;
    return false;
  }
  if (checksum(in + kStateHeaderBytes, bytes - kStateHeaderBytes) != sum) {
    why = "corrupted: the checksum does not match";
    return false;
  }
  Reader r{in, kStateHeaderBytes, bytes};
  st.version = version;
  fields(r, st);
  if (version < 3 && st.s.stats.algorithm == dctAlgoRecursiveDoubling)  // before 3, a 1-bit step's report
    st.s.stats.algorithm = dctNumAlgorithms;
  if (r.truncated) {
    why = "malformed: its fields run past its end";
    return false;
  }
  if (r.badFlag) {
    why = "malformed: a flag is neither 0 nor 1";
    return false;
  }
  if (st.residualElems > bytes || st.serverElems > bytes || st.ownerElems > bytes) {
    why = "malformed: an array is longer than the state";
    return false;
  }
  if (!checkFields(st, why) || !checkSegments(st, why)) return false;
  layOutState(st);
  if (st.bytes != bytes) {
    why = "malformed: its arrays do not fill it";
    return false;
  }
  if (!verifyArrays) return true;
  bool zero = false;
  if (!finiteArray(in + st.residualAt, st.residualElems, st.id.accType, zero)) {
    why = "the residual holds NaN or Inf";
    return false;
  }
  if (st.s.residualZero && !zero) {
    why = "the residual is flagged all zeros but is not";
    return false;
  }
  if (!finiteArray(in + st.serverAt, st.serverElems, st.id.accType, zero)) {
    why = "the 1-bit server error holds NaN or Inf";
    return false;
  }
  if (!finiteArray(in + st.ownerAt, st.ownerElems, st.id.accType, zero)) {
    why = "the owner residual holds NaN or Inf";
    return false;
  }
  return true;
}

}  // namespace dct
