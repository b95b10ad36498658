// CUDA twin of the DCT-MP row kernels against the CPU twin on the same
// seeded rows: masks, counts and non-finite totals of top-K and threshold
// selection, offsets, the packed wire bytes of every mask format (also at a
// block whose offsets do not start at 0), values in a narrower wire type,
// the unpacked rows and decoded masks, all bit for bit (malformed wire
// masks: test_cuda_rows_reject.cc).
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>

#include "cuda_rows_util.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

// Row r is random normals with NaN/Inf (r % 4 == 0), heavy ties among a few
// magnitudes with -0 and +0 (1), mostly non-finite (2: more NaN/Inf than a
// small k), or all zeros of both signs (3).
template <typename T>
std::vector<T> testRows(size_t R, size_t D, uint64_t seed) {
  std::vector<T> v = randomVector<T>(R * D, seed);
  std::mt19937_64 rng(seed + 11);
  const T levels[] = {T(0), T(-0.0), T(0.5), T(-0.5), T(1), T(-1), T(2)};
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (size_t i = 0; i < v.size(); i++) {
    switch ((i / D + seed) % 4) {
      case 1: v[i] = levels[rng() % 7]; break;
      case 2: if (rng() % 3) v[i] = rng() % 3 == 0 ? nan : (rng() % 2 ? inf : -inf); break;
      case 3: v[i] = rng() % 2 ? T(0) : T(-0.0); break;
      default: break;
    }
  }
  return v;
}

// fp16/bf16 rows: the fp32 rows rounded (more ties still).
template <typename T>
  requires(std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
std::vector<T> testRows(size_t R, size_t D, uint64_t seed) {
  const auto wide = testRows<float>(R, D, seed);
  std::vector<T> v(wide.size());
  for (size_t i = 0; i < v.size(); i++) v[i] = Value<T>::store(wide[i]);
  return v;
}


struct Selection {
  std::vector<uint32_t> mask, counts;
  std::vector<uint64_t> offsets;
};

template <typename T>
Selection compareSelect(Twins& tw, const std::vector<T>& rows, size_t R, size_t D, size_t k, double tau) {
  const size_t W = maskWords(D);
  Selection cpu{std::vector<uint32_t>(R * W), std::vector<uint32_t>(R), std::vector<uint64_t>(R + 1)};
  RowSelectArgs ca{rows.data(), R, D, dtypeOf<T>(), k, tau, cpu.mask.data(), cpu.counts.data()};
  REQUIRE(tw.cpu.rowSelect(tw.cpuCtx, &ca, nullptr) == dctSuccess);

  DeviceArray<T> dRows(rows);
  DeviceArray<uint32_t> dMask(R * W + 1), dCounts(R + 1);  // a guard word past each
  dMask.fillBytes(0xff);
  dCounts.fillBytes(0xff);
  RowSelectArgs ga{dRows.get(), R, D, dtypeOf<T>(), k, tau, dMask.get(), dCounts.get()};
  REQUIRE(tw.gpu.rowSelect(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
  CHECK(ga.nonFinite == ca.nonFinite);
  auto mask = dMask.download(), counts = dCounts.download();
  CHECK(mask.back() == ~0u);
  CHECK(counts.back() == ~0u);
  mask.pop_back();
  counts.pop_back();
  requireSameBytes(mask, cpu.mask);
  requireSameBytes(counts, cpu.counts);

  RowOffsetsArgs co{cpu.counts.data(), 4, 0, R, cpu.offsets.data()};
  REQUIRE(tw.cpu.rowOffsets(tw.cpuCtx, &co, nullptr) == dctSuccess);
  DeviceArray<uint64_t> dOffsets(R + 1);
  RowOffsetsArgs go{dCounts.get(), 4, 0, R, dOffsets.get()};
  REQUIRE(tw.gpu.rowOffsets(tw.gpuCtx, &go, tw.stream) == dctSuccess);
  CHECK(go.total == co.total);
  requireSameBytes(dOffsets.download(), cpu.offsets);
  return cpu;
}

// Counts 1 or 2 bytes wide, and a fixed count, give the CPU twin's offsets.
void compareOffsets(Twins& tw, const std::vector<uint32_t>& counts, size_t R, size_t D) {
  for (int width : {1, 2, 0}) {
    CAPTURE(width);
    if (width == 1 && D > 255) continue;
    std::vector<uint8_t> narrow(R * (width ? width : 1) + 1);
    for (size_t r = 0; r < R; r++) {
      if (width == 1) narrow[r] = static_cast<uint8_t>(counts[r]);
      if (width == 2) reinterpret_cast<uint16_t*>(narrow.data())[r] = static_cast<uint16_t>(counts[r]);
    }
    std::vector<uint64_t> cpu(R + 1);
    RowOffsetsArgs ca{width ? narrow.data() : nullptr, width, D, R, cpu.data()};
    REQUIRE(tw.cpu.rowOffsets(tw.cpuCtx, &ca, nullptr) == dctSuccess);
    DeviceArray<uint8_t> dNarrow(narrow);
    DeviceArray<uint64_t> dOffsets(R + 1);
    RowOffsetsArgs ga{width ? dNarrow.get() : nullptr, width, D, R, dOffsets.get()};
    REQUIRE(tw.gpu.rowOffsets(tw.gpuCtx, &ga, tw.stream) == dctSuccess);
    CHECK(ga.total == ca.total);
    requireSameBytes(dOffsets.download(), cpu);
  }
}

// One twin's buffers of a wire form, and the arguments of block b of two
// (rows [0, h) and [h, R)): the second block's offsets start at offsets[h]
// (its base) and its pointers at its own first row and entry.
template <typename T, typename V>
struct WireBuffers {
  T* rows;
  uint32_t* mask;
  const uint64_t* offsets;
  uint8_t* wireMask;
  uint8_t* wireCounts;
  V* values;  // in the wire type
};

struct Shape {
  size_t R, D;
  int format, countBytes;
  std::vector<uint64_t> offsets;  // host copy
  size_t bitmapBytes() const { return (D + 7) / 8; }
  size_t maskBytes() const {
    return format == 0 ? R * bitmapBytes() : format > 0 ? offsets[R] * size_t(format) : 0;
  }
};

template <typename T, typename V>
RowWireArgs blockArgs(const Shape& s, const WireBuffers<T, V>& b, int block, bool counts) {
  const size_t h = s.R / 2, r0 = block ? h : 0, rows = block ? s.R - h : h;
  const uint64_t e0 = s.offsets[r0];
  uint8_t* wire = s.format == 0 ? b.wireMask + r0 * s.bitmapBytes()
                                : s.format > 0 ? b.wireMask + e0 * size_t(s.format) : nullptr;
  return RowWireArgs{b.rows + r0 * s.D, rows, s.D, dtypeOf<T>(), b.mask ? b.mask + r0 * maskWords(s.D) : nullptr,
                     b.offsets + r0, e0, s.format, wire,
                     counts && b.wireCounts ? b.wireCounts + r0 * size_t(s.countBytes) : nullptr, s.countBytes,
                     b.values + e0, dtypeOf<V>()};
}

template <typename T, typename V>
void runBlocks(const KernelOps& ops, KernelContext* ctx, void* stream, const Shape& s, const WireBuffers<T, V>& b,
               bool unpack) {
  for (int block = 0; block < 2; block++) {
    RowWireArgs a = blockArgs(s, b, block, !unpack);
    if (a.rowCount == 0) continue;
    REQUIRE((unpack ? ops.rowUnpack(ctx, &a, stream) : ops.rowPack(ctx, &a, stream)) == dctSuccess);
  }
}

// Pack with both twins (same bytes everywhere, untouched padding
// included), then unpack the CPU twin's wire with both (same rows and
// decoded masks). A null mask: whole rows. V: the values' wire type.
template <typename T, typename V = T>
void compareWire(Twins& tw, const std::vector<T>& rows, const std::vector<uint32_t>* mask, Shape s) {
  CAPTURE(s.format);
  CAPTURE(s.countBytes);
  CAPTURE(sizeof(V));
  const size_t R = s.R, D = s.D, W = maskWords(D), E = s.offsets[R];
  std::vector<V> values(E + 1);
  std::vector<uint8_t> wireMask(s.maskBytes() + 8, 0xee), wireCounts(R * s.countBytes + 8, 0xee);
  std::memset(values.data(), 0xee, values.size() * sizeof(V));
  std::vector<T> rowsIn = rows;
  std::vector<uint32_t> maskIn = mask ? *mask : std::vector<uint32_t>();
  WireBuffers<T, V> cpu{rowsIn.data(), mask ? maskIn.data() : nullptr, s.offsets.data(), wireMask.data(),
                     s.countBytes ? wireCounts.data() : nullptr, values.data()};
  runBlocks(tw.cpu, tw.cpuCtx, nullptr, s, cpu, false);

  DeviceArray<T> dRows(rows);
  DeviceArray<V> dValues(values.size());
  DeviceArray<uint32_t> dMask(maskIn);
  DeviceArray<uint64_t> dOffsets(s.offsets);
  DeviceArray<uint8_t> dWireMask(wireMask.size()), dWireCounts(wireCounts.size());
  dValues.fillBytes(0xee);
  dWireMask.fillBytes(0xee);
  dWireCounts.fillBytes(0xee);
  WireBuffers<T, V> gpu{dRows.get(), mask ? dMask.get() : nullptr, dOffsets.get(), dWireMask.get(),
                     s.countBytes ? dWireCounts.get() : nullptr, dValues.get()};
  runBlocks(tw.gpu, tw.gpuCtx, tw.stream, s, gpu, false);
  requireSameBytes(dValues.download(), values);
  requireSameBytes(dWireMask.download(), wireMask);
  requireSameBytes(dWireCounts.download(), wireCounts);

  // Unpack the CPU twin's wire: rows prefilled, masks decoded over junk
  // (format >= 0) or read (format -1).
  std::vector<T> out(R * D);
  std::memset(out.data(), 0x5a, out.size() * sizeof(T));
  std::vector<uint32_t> decoded = s.format >= 0 ? std::vector<uint32_t>(R * W, 0x77777777u) : maskIn;
  cpu.rows = out.data();
  cpu.mask = mask ? decoded.data() : nullptr;
  runBlocks(tw.cpu, tw.cpuCtx, nullptr, s, cpu, true);
  if (s.format >= 0) REQUIRE(decoded == *mask);

  DeviceArray<T> dOut(R * D);
  dOut.fillBytes(0x5a);
  DeviceArray<uint32_t> dDecoded(R * W);
  if (s.format >= 0) dDecoded.fillBytes(0x77);
  else dDecoded.upload(maskIn.size() == R * W ? maskIn : std::vector<uint32_t>(R * W));
  dValues.upload(values);
  dWireMask.upload(wireMask);
  gpu.rows = dOut.get();
  gpu.mask = mask ? dDecoded.get() : nullptr;
  runBlocks(tw.gpu, tw.gpuCtx, tw.stream, s, gpu, true);
  requireSameBytes(dOut.download(), out);
  if (mask) requireSameBytes(dDecoded.download(), decoded);
}

template <typename T>
void compareAll(Twins& tw, size_t R, size_t D, size_t k, double tau, uint64_t seed) {
  CAPTURE(R);
  CAPTURE(D);
  CAPTURE(k);
  CAPTURE(tau);
  CAPTURE(sizeof(T));
  const auto rows = testRows<T>(R, D, seed);
  const Selection sel = compareSelect(tw, rows, R, D, k, tau);
  compareOffsets(tw, sel.counts, R, D);
  int countBytes = 1;
  for (int format : formatsFor(D)) {
    countBytes = countBytes == 4 ? 0 : (countBytes ? 2 * countBytes : 1);  // 2, 4, none, 1, ...
    if (countBytes == 1 && D > 255) countBytes = 2;
    compareWire(tw, rows, &sel.mask, Shape{R, D, format, countBytes, sel.offsets});
  }
  std::vector<uint64_t> whole(R + 1);
  for (size_t r = 0; r <= R; r++) whole[r] = r * D;
  compareWire(tw, rows, nullptr, Shape{R, D, -1, 0, whole});
  // Narrower wire types: rounded by the pack, widened by the unpack.
  const int format = formatsFor(D).back();
  if constexpr (std::is_same_v<T, float>) {
    compareWire<T, Half>(tw, rows, &sel.mask, Shape{R, D, format, 2, sel.offsets});
    compareWire<T, BFloat16>(tw, rows, nullptr, Shape{R, D, -1, 0, whole});
  } else if constexpr (std::is_same_v<T, double>) {
    compareWire<T, float>(tw, rows, &sel.mask, Shape{R, D, 0, 2, sel.offsets});
    compareWire<T, Half>(tw, rows, nullptr, Shape{R, D, -1, 0, whole});
    compareWire<T, BFloat16>(tw, rows, &sel.mask, Shape{R, D, format, 0, sel.offsets});
  }
}

// The top-K sizes to try, once each (k = 0 is the threshold mode, tried apart).
std::vector<size_t> distinctKs(std::vector<size_t> ks) {
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  if (!ks.empty() && ks.front() == 0) ks.erase(ks.begin());
  return ks;
}

}  // namespace

TEST_CASE("CUDA row selection, offsets and wire forms match the CPU twin") {
  Twins tw;
  uint64_t seed = 900;
  // Select: a thread per row up to 32 entries, and up to 128 for fp32 with
  // k <= 8 (over a shared tile: 128 / 129 and k 8 / 9 are its limits); pack
  // and unpack of masked rows a thread per row up to 192 (192 / 193); else a
  // warp per row up to 1024 (tiles of 32 columns), a block per row past it.
  for (size_t D : {1, 3, 7, 31, 32, 33, 64, 65, 128, 129, 192, 193, 256, 257, 1000, 1024, 1025})
    for (size_t R : {0, 1, 5, 33}) {
      const size_t k5 = static_cast<size_t>(std::ceil(0.05 * static_cast<double>(D)));
      for (size_t k : distinctKs({1, 2, k5, 8, 9, D / 2, D - 1, D, D + 3})) {
        compareAll<float>(tw, R, D, k, 0, seed++);
        compareAll<double>(tw, R, D, k, 0, seed++);
      }
      for (double tau : {0.5, 1.0, 1e-40}) {  // threshold mode (k = 0)
        compareAll<float>(tw, R, D, 0, tau, seed++);
        compareAll<double>(tw, R, D, 0, tau, seed++);
      }
    }
}

TEST_CASE("CUDA row kernels on long rows (a block loops over the row) and many rows (warps and blocks loop over rows)") {
  Twins tw;
  compareAll<float>(tw, (size_t(1) << 20) + 5, 3, 1, 0, 4000);  // more rows than blocks
  compareAll<double>(tw, (size_t(1) << 20) + 5, 2, 0, 0.5, 4001);
  compareAll<float>(tw, 131109, 64, 4, 0, 4002);  // more rows than warps at the bench's row length
  compareAll<float>(tw, 20011, 256, 13, 0, 4003);
  const size_t D = 100000;
  for (size_t k : {size_t(1), size_t(5000), size_t(99999)}) {
    compareAll<float>(tw, 6, D, k, 0, 1000 + k);
    compareAll<double>(tw, 3, D, k, 0, 2000 + k);
  }
  compareAll<float>(tw, 4, D, 0, 1.5, 3000);
}

TEST_CASE("CUDA row selection, offsets and wire forms match the CPU twin on fp16/bf16 rows") {
  Twins tw;
  uint64_t seed = 5000;
  for (size_t D : {1, 3, 7, 31, 33, 64, 65, 129, 257, 1000, 1024, 1025})
    for (size_t R : {0, 1, 5, 33}) {
      const size_t k5 = static_cast<size_t>(std::ceil(0.05 * static_cast<double>(D)));
      for (size_t k : distinctKs({1, k5, D - 1, D})) {
        compareAll<Half>(tw, R, D, k, 0, seed++);
        compareAll<BFloat16>(tw, R, D, k, 0, seed++);
      }
      for (double tau : {0.5, 1e-6, 7e4}) {  // threshold mode; 7e4: above fp16's max
        compareAll<Half>(tw, R, D, 0, tau, seed++);
        compareAll<BFloat16>(tw, R, D, 0, tau, seed++);
      }
    }
  compareAll<Half>(tw, 6, 100000, 5000, 0, seed++);  // long rows: every 8-bit digit of the keys
  compareAll<BFloat16>(tw, (size_t(1) << 20) + 5, 3, 1, 0, seed++);
}
