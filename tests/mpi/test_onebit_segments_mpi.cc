// dctCompressorSetSegments under mpirun (1-4 ranks): the segmented 1-bit
// allreduce against the single-process segmented reference
// (tests/common/onebit_reference.h) bit for bit on every rank, outputs,
// worker and server errors; nothing lost; the wire bytes the scales add;
// a rank whose segments differ fails every rank with nothing changed and a
// retry with matching segments is exact; bad input refused with nothing
// changed; SaveState/LoadState continue bit for bit.
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "../common/onebit_reference.h"
#include "onebit_util.h"

using namespace dcttest;
using dct::test::OnebitReference;

namespace {

// The same seeded cuts on every rank: odd lengths, an empty segment, and
// one segment of tiny values (what one scale for all would drown).
std::vector<size_t> cutsOf(size_t n, uint64_t seed, int cuts) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> o{0, n};
  for (int k = 0; k < cuts && n > 0; k++) o.push_back(rng() % (n + 1));
  if (n > 10) o.push_back(o[2]);  // an empty segment
  std::sort(o.begin(), o.end());
  return o;
}

template <typename T>
std::vector<std::vector<T>> scaledInputs(size_t n, int ranks, int step, uint64_t seed, const std::vector<size_t>& o) {
  auto in = allInputs<T>(n, ranks, step, seed);
  for (auto& v : in)
    for (size_t s = 0; s + 1 < o.size(); s++)
      if (s % 2 == 1)
        for (size_t i = o[s]; i < o[s + 1]; i++) v[i] = Value<T>::store(static_cast<float>(Value<T>::load(v[i]) * 1e-4));
  return in;
}

dctCompressor_t segmented(World& w, size_t n, dctDataType_t type, const std::vector<size_t>& o) {
  dctConfig_t cfg = onebitConfig();
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, type, &cfg, &c) == dctSuccess);
  REQUIRE(dctCompressorSetSegments(c, o.data(), static_cast<int>(o.size()) - 1) == dctSuccess);
  return c;
}

template <typename A>
std::vector<A> publicServerError(dctCompressor_t c) {
  size_t begin = 0, length = 0;
  REQUIRE(dctCompressorGetServerError(c, nullptr, &begin, &length, nullptr) == dctSuccess);
  std::vector<A> e(length);
  REQUIRE(dctCompressorGetServerError(c, e.data(), &begin, &length, nullptr) == dctSuccess);
  return e;
}

template <typename T>
void againstReference(World& w, size_t n, int cuts, dctRedOp_t op, bool inPlace, uint64_t seed) {
  using A = typename Value<T>::Acc;
  CAPTURE(n);
  CAPTURE(cuts);
  CAPTURE(Value<T>::type);
  const std::vector<size_t> o = cutsOf(n, seed, cuts);
  dctCompressor_t c = segmented(w, n, Value<T>::type, o);
  OnebitReference<T> ref(n, w.size);
  ref.segments = o;
  for (int step = 0; step < 4; step++) {
    CAPTURE(step);
    const auto inputs = scaledInputs<T>(n, w.size, step, seed, o);
    std::vector<T> send = inputs[w.rank], out(n);
    if (inPlace) out = send;
    REQUIRE(dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), n, Value<T>::type, op, c, w.comm,
                               nullptr) == dctSuccess);
    const std::vector<T> expected = ref.step(inputs, op == dctSum);
    CHECK(sameBytes(out, expected));
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(T)));
    CHECK(sameBytes(workerError<A>(c), ref.workerError[w.rank]));
    CHECK(sameBytes(serverError<A>(c, ref.length(w.rank)), ref.serverError[w.rank]));
    CHECK(sameBytes(publicServerError<A>(c), ref.serverError[w.rank]));
    dctStats_t st{};
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    CHECK(st.threshold == static_cast<double>(ref.workerScale[w.rank]));
  }
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
}

}  // namespace

TEST_CASE("segments: the allreduce equals the segmented reference bit for bit on every rank") {
  World w;
  uint64_t seed = 10;
  for (size_t n : {size_t(1), size_t(33), size_t(8 * w.size - 1), size_t(1001), size_t(100003)})
    for (int cuts : {1, 4, 17}) {
      againstReference<float>(w, n, cuts, seed % 2 ? dctSum : dctAvg, seed % 3 == 0, seed);
      seed++;
      againstReference<double>(w, n, cuts, dctAvg, seed % 3 == 0, seed);
      seed++;
      againstReference<Half>(w, n, cuts, dctSum, false, seed);
      seed++;
      againstReference<BFloat16>(w, n, cuts, dctAvg, true, seed);
      seed++;
    }
}

TEST_CASE("segments: nothing lost; a segment of tiny values keeps a tiny scale") {
  World w;
  const size_t n = 5003;
  const std::vector<size_t> o = {0, 17, 1000, 1001, 1001, 4000, n};
  dctCompressor_t c = segmented(w, n, dctFloat64, o);
  std::vector<double> total(n, 0.0), delivered(n, 0.0);
  const int steps = 6;
  for (int step = 0; step < steps; step++) {
    const auto inputs = scaledInputs<double>(n, w.size, step, 77, o);
    for (int r = 0; r < w.size; r++)
      for (size_t i = 0; i < n; i++) total[i] += inputs[r][i];
    std::vector<double> out(n);
    REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat64, dctAvg, c, w.comm, nullptr) ==
            dctSuccess);
    for (size_t i = 0; i < n; i++) delivered[i] += w.size * out[i];
    // Segment [17, 1000) holds values 1e-4 of the others': so does its output.
    double small = 0, large = 0;
    for (size_t i = 17; i < 1000; i++) small = std::max(small, std::fabs(out[i]));
    for (size_t i = 1001; i < 4000; i++) large = std::max(large, std::fabs(out[i]));
    CHECK(small < 1e-2 * large);
  }
  // delivered + the worker errors summed + P x the server errors = every input.
  std::vector<double> errors = workerError<double>(c), server(n, 0.0);
  size_t begin = 0, length = 0;
  const std::vector<double> mine = publicServerError<double>(c);
  REQUIRE(dctCompressorGetServerError(c, nullptr, &begin, &length, nullptr) == dctSuccess);
  for (size_t i = 0; i < length; i++) server[begin + i] = w.size * mine[i];
  MPI_Allreduce(MPI_IN_PLACE, errors.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, server.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double worst = 0;
  for (size_t i = 0; i < n; i++) worst = std::max(worst, std::fabs(delivered[i] + errors[i] + server[i] - total[i]));
  CHECK(worst < 1e-10);
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
}

TEST_CASE("segments: the scales add 2 (P - 1) (K - 1) x 4 bytes per step, K the most pieces in a chunk") {
  World w;
  const size_t n = 10007;
  const std::vector<size_t> o = {0, 5, 9, 2000, 2001, 7000, n};
  dctCompressor_t c = segmented(w, n, dctFloat32, o), plain = nullptr;
  dctConfig_t cfg = onebitConfig();
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &plain) == dctSuccess);
  const auto inputs = allInputs<float>(n, w.size, 0, 5);
  std::vector<float> out(n);
  REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) == dctSuccess);
  REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, plain, w.comm, nullptr) ==
          dctSuccess);
  dctStats_t a{}, b{};
  REQUIRE(dctCompressorGetStats(c, &a) == dctSuccess);
  REQUIRE(dctCompressorGetStats(plain, &b) == dctSuccess);
  const dct::OnebitChunks chunks(n, w.size);
  const size_t K = dct::onebitScalesPerSlot(chunks, o.data() /* no empty segment here */, 6);
  CHECK(a.bytesSent - b.bytesSent == 2 * static_cast<uint64_t>(w.size - 1) * (K - 1) * 4);
  CHECK(a.bytesReceived - b.bytesReceived == 2 * static_cast<uint64_t>(w.size - 1) * (K - 1) * 4);
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
  REQUIRE(dctCompressorDestroy(plain) == dctSuccess);
}

TEST_CASE("segments: a rank whose segments differ fails every rank, nothing changed; a retry that agrees is exact") {
  World w;
  if (w.size < 2) return;  // one rank has no one to differ from
  const size_t n = 3001;
  const std::vector<size_t> o = {0, 100, 2000, n}, other = {0, 100, 2001, n};
  dctCompressor_t c = segmented(w, n, dctFloat32, w.rank == 1 ? other : o);
  OnebitReference<float> ref(n, w.size);
  ref.segments = o;
  const auto inputs = allInputs<float>(n, w.size, 0, 9);
  std::vector<float> out(n, 5.f);
  CHECK(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) ==
        dctInvalidUsage);
  CHECK(std::string(dctGetLastError(w.comm)).find("segments") != std::string::npos);
  dctStats_t st{};
  REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
  CHECK(st.step == 0);
  CHECK(sameBytes(workerError<float>(c), std::vector<float>(n, 0.f)));
  // Not stepped: rank 1 may still set the agreed segments, and the retry is the reference's first step.
  if (w.rank == 1) REQUIRE(dctCompressorSetSegments(c, o.data(), 3) == dctSuccess);
  REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) ==
          dctSuccess);
  CHECK(sameBytes(out, ref.step(inputs, false)));
  CHECK(sameBytes(workerError<float>(c), ref.workerError[w.rank]));
  // One segment on one rank against several on the others fails too.
  dctCompressor_t d = nullptr;
  dctConfig_t cfg = onebitConfig();
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &d) == dctSuccess);
  if (w.rank != 0) REQUIRE(dctCompressorSetSegments(d, o.data(), 3) == dctSuccess);
  CHECK(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, d, w.comm, nullptr) ==
        dctInvalidUsage);
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
  REQUIRE(dctCompressorDestroy(d) == dctSuccess);
}

TEST_CASE("segments: bad input is refused clearly and changes nothing") {
  World w;
  const size_t n = 1000;
  const std::vector<size_t> o = {0, 300, n};
  dctCompressor_t c = segmented(w, n, dctFloat32, o);
  auto refused = [&](dctCompressor_t comp, const size_t* offsets, int count, dctResult_t code, const char* what) {
    CAPTURE(what);
    CHECK(dctCompressorSetSegments(comp, offsets, count) == code);
    const std::string msg = dctGetLastError(w.comm);
    CAPTURE(msg);
    CHECK(msg.find(what) != std::string::npos);
  };
  const size_t unsorted[] = {0, 500, 400, n}, notZero[] = {1, 500, n}, pastEnd[] = {0, 500, n + 1},
               short_[] = {0, 500, n - 1};
  refused(c, nullptr, 2, dctInvalidArgument, "NULL");
  refused(c, o.data(), 0, dctInvalidArgument, "at least 1");
  refused(c, o.data(), -3, dctInvalidArgument, "at least 1");
  refused(c, unsorted, 3, dctInvalidArgument, "not sorted");
  refused(c, notZero, 2, dctInvalidArgument, "not 0");
  refused(c, pastEnd, 2, dctInvalidArgument, "count");
  refused(c, short_, 2, dctInvalidArgument, "count");
  CHECK(dctCompressorSetSegments(nullptr, o.data(), 2) == dctInvalidArgument);
  dctConfig_t topk = onebitConfig();
  topk.compressor = dctCompressorTopk;
  dctCompressor_t t = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &topk, &t) == dctSuccess);
  refused(t, o.data(), 2, dctInvalidUsage, "not a 1-bit compressor");
  REQUIRE(dctCompressorDestroy(t) == dctSuccess);
  // Unchanged: the steps are the reference's with o.
  OnebitReference<float> ref(n, w.size);
  ref.segments = o;
  std::vector<float> out(n);
  for (int step = 0; step < 2; step++) {
    const auto inputs = allInputs<float>(n, w.size, step, 3);
    REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) ==
            dctSuccess);
    CHECK(sameBytes(out, ref.step(inputs, false)));
  }
  refused(c, o.data(), 2, dctInvalidUsage, "before its first step");
  const auto inputs = allInputs<float>(n, w.size, 2, 3);
  REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) ==
          dctSuccess);
  CHECK(sameBytes(out, ref.step(inputs, false)));
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
}

TEST_CASE("segments: SaveState/LoadState carry them; a fresh compressor continues bit for bit") {
  World w;
  const size_t n = 4099;
  const std::vector<size_t> o = cutsOf(n, 5, 6);
  dctCompressor_t a = segmented(w, n, dctFloat32, o), b = nullptr, stepped = nullptr;
  dctConfig_t cfg = onebitConfig();
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &b) == dctSuccess);  // no segments of its own
  std::vector<float> out(n), again(n);
  for (int step = 0; step < 3; step++) {
    const auto inputs = allInputs<float>(n, w.size, step, 8);
    REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, a, w.comm, nullptr) ==
            dctSuccess);
  }
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(a, nullptr, &bytes, nullptr) == dctSuccess);
  std::vector<unsigned char> blob(bytes);
  REQUIRE(dctCompressorSaveState(a, blob.data(), &bytes, nullptr) == dctSuccess);
  REQUIRE(dctCompressorLoadState(b, blob.data(), bytes, nullptr) == dctSuccess);
  CHECK(dctCompressorSetSegments(b, o.data(), static_cast<int>(o.size()) - 1) == dctInvalidUsage);  // a stepped state
  for (int step = 3; step < 6; step++) {
    const auto inputs = allInputs<float>(n, w.size, step, 8);
    REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, a, w.comm, nullptr) ==
            dctSuccess);
    REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), again.data(), n, dctFloat32, dctAvg, b, w.comm, nullptr) ==
            dctSuccess);
    CHECK(sameBytes(out, again));
    CHECK(sameBytes(workerError<float>(a), workerError<float>(b)));
    CHECK(sameBytes(publicServerError<float>(a), publicServerError<float>(b)));
  }
  // A compressor that stepped with one segment refuses a state with others (its buffers are laid out for its own).
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &stepped) == dctSuccess);
  const auto inputs = allInputs<float>(n, w.size, 0, 8);
  REQUIRE(dctCompressorSaveState(a, blob.data(), &bytes, nullptr) == dctSuccess);
  REQUIRE(dctSparseAllreduce(inputs[w.rank].data(), out.data(), n, dctFloat32, dctAvg, stepped, w.comm, nullptr) ==
          dctSuccess);
  std::vector<unsigned char> before(bytes + 4096);
  size_t beforeBytes = before.size();
  REQUIRE(dctCompressorSaveState(stepped, before.data(), &beforeBytes, nullptr) == dctSuccess);
  CHECK(dctCompressorLoadState(stepped, blob.data(), bytes, nullptr) == dctInvalidArgument);
  CHECK(std::string(dctGetLastError(w.comm)).find("segments") != std::string::npos);
  std::vector<unsigned char> after(beforeBytes);
  size_t afterBytes = after.size();
  REQUIRE(dctCompressorSaveState(stepped, after.data(), &afterBytes, nullptr) == dctSuccess);
  CHECK((afterBytes == beforeBytes && std::memcmp(after.data(), before.data(), afterBytes) == 0));
  // A one-segment state loads into a compressor set up with segments: it continues as one segment.
  dctCompressor_t fresh = segmented(w, n, dctFloat32, o);
  REQUIRE(dctCompressorLoadState(fresh, before.data(), beforeBytes, nullptr) == dctSuccess);
  const auto next = allInputs<float>(n, w.size, 1, 8);
  REQUIRE(dctSparseAllreduce(next[w.rank].data(), out.data(), n, dctFloat32, dctAvg, stepped, w.comm, nullptr) ==
          dctSuccess);
  REQUIRE(dctSparseAllreduce(next[w.rank].data(), again.data(), n, dctFloat32, dctAvg, fresh, w.comm, nullptr) ==
          dctSuccess);
  CHECK(sameBytes(out, again));
  for (dctCompressor_t c : {a, b, stepped, fresh}) REQUIRE(dctCompressorDestroy(c) == dctSuccess);
}
