// The CUDA twin's row unpack against the CPU twin on malformed wire masks:
// index lists out of order, repeated or past D, bitmaps whose popcount is
// off or with a bit past D. Both twins refuse, and no row is written.
#include <cstring>
#include <vector>

#include "cuda_rows_util.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

// Corrupts a good wire mask of the last row (so a rejected block must not
// have written even its earlier rows), unpacks it with both twins: both
// refuse, and the CUDA twin's rows keep their old contents.
void compareRejection(Twins& tw, const std::vector<float>& values, const std::vector<uint64_t>& offsets,
                      size_t R, size_t D, int format, std::vector<uint8_t> wire, const char* what) {
  CAPTURE(what);
  CAPTURE(format);
  CAPTURE(D);
  const size_t W = maskWords(D);
  std::vector<float> out(R * D, 9.0f);
  std::vector<uint32_t> mask(R * W);
  RowWireArgs ca{out.data(), R, D, dctFloat32, mask.data(), offsets.data(), 0, format, wire.data(), nullptr, 0,
                 const_cast<float*>(values.data())};
  CHECK(tw.cpu.rowUnpack(tw.cpuCtx, &ca, nullptr) == dctInternalError);
  DeviceArray<float> dOut(out), dValues(values);
  DeviceArray<uint32_t> dMask(R * W);
  DeviceArray<uint64_t> dOffsets(offsets);
  DeviceArray<uint8_t> dWire(wire);
  RowWireArgs ga{dOut.get(), R, D, dctFloat32, dMask.get(), dOffsets.get(), 0, format, dWire.get(), nullptr, 0,
                 dValues.get()};
  CHECK(tw.gpu.rowUnpack(tw.gpuCtx, &ga, tw.stream) == dctInternalError);
  requireSameBytes(dOut.download(), out);
}

void setIndex(std::vector<uint8_t>& wire, int width, size_t e, uint32_t v) {
  std::memcpy(wire.data() + e * width, &v, width);  // little-endian: the low bytes
}
uint32_t getIndex(const std::vector<uint8_t>& wire, int width, size_t e) {
  uint32_t v = 0;
  std::memcpy(&v, wire.data() + e * width, width);
  return v;
}

}  // namespace

TEST_CASE("CUDA row unpack rejects the malformed wire masks the CPU twin rejects, writing no row") {
  Twins tw;
  // D % 8 != 0 but for 64: bits past D in the last byte; 2000: a block per row
  for (size_t D : {7, 33, 64, 203, 1001, 2000}) {
    const size_t R = 5, k = D / 4 + 2, W = maskWords(D);
    const auto rows = randomVector<float>(R * D, 40 + D, false);
    std::vector<uint32_t> mask(R * W), counts(R);
    std::vector<uint64_t> offsets(R + 1);
    RowSelectArgs sel{rows.data(), R, D, dctFloat32, k, 0, mask.data(), counts.data()};
    REQUIRE(tw.cpu.rowSelect(tw.cpuCtx, &sel, nullptr) == dctSuccess);
    RowOffsetsArgs off{counts.data(), 4, 0, R, offsets.data()};
    REQUIRE(tw.cpu.rowOffsets(tw.cpuCtx, &off, nullptr) == dctSuccess);
    const size_t E = off.total, last = offsets[R - 1];  // the last row's first entry
    for (int format : formatsFor(D)) {
      if (format < 0) continue;
      const size_t bytes = format == 0 ? R * ((D + 7) / 8) : E * format;
      std::vector<uint8_t> wire(bytes);
      std::vector<float> values(E);
      RowWireArgs pack{const_cast<float*>(rows.data()), R, D, dctFloat32, mask.data(), offsets.data(), 0, format,
                       wire.data(), nullptr, 0, values.data()};
      REQUIRE(tw.cpu.rowPack(tw.cpuCtx, &pack, nullptr) == dctSuccess);
      if (format > 0) {
        auto descending = wire, repeated = wire, outside = wire;
        const uint32_t a = getIndex(wire, format, last), b = getIndex(wire, format, last + 1);
        setIndex(descending, format, last, b);
        setIndex(descending, format, last + 1, a);
        compareRejection(tw, values, offsets, R, D, format, descending, "descending");
        setIndex(repeated, format, last + 1, a);
        compareRejection(tw, values, offsets, R, D, format, repeated, "repeated");
        if (format == 4 || D < (size_t(1) << (8 * format))) {
          setIndex(outside, format, E - 1, static_cast<uint32_t>(D));
          compareRejection(tw, values, offsets, R, D, format, outside, "index >= D");
        }
      } else {
        const size_t rowBytes = (D + 7) / 8, at = (R - 1) * rowBytes;
        auto extra = wire, tail = wire;
        for (size_t j = 0; j < D; j++) {  // one more bit than the count
          if (!(extra[at + j / 8] >> (j % 8) & 1)) {
            extra[at + j / 8] |= uint8_t(1u << (j % 8));
            break;
          }
        }
        compareRejection(tw, values, offsets, R, D, 0, extra, "popcount above the count");
        auto fewer = wire;
        for (size_t b = 0; b < rowBytes; b++)
          if (fewer[at + b]) {
            fewer[at + b] &= uint8_t(fewer[at + b] - 1);  // clears the lowest set bit
            break;
          }
        compareRejection(tw, values, offsets, R, D, 0, fewer, "popcount below the count");
        if (D % 8) {  // a bit past D, the count kept right by clearing a kept one
          tail = fewer;
          tail[at + D / 8] |= uint8_t(1u << (D % 8));
          compareRejection(tw, values, offsets, R, D, 0, tail, "bit >= D");
        }
      }
    }
  }
}

