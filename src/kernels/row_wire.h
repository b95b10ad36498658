// Sizes and element access of the DCT-MP row wire format, shared by both
// twins (kernels.h, "DCT-MP rows"): per-row counts and index lists 1, 2 or
// 4 bytes wide (any other width reads and writes 4), bitmaps of ceil(D/8)
// bytes per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/host_device.h"

namespace dct {

DCT_HOST_DEVICE size_t bitmapBytes(size_t rowLength) { return (rowLength + 7) / 8; }

DCT_HOST_DEVICE uint64_t readWidth(const void* p, size_t i, int bytes) {
  switch (bytes) {
    case 1: return static_cast<const uint8_t*>(p)[i];
    case 2: return static_cast<const uint16_t*>(p)[i];
    default: return static_cast<const uint32_t*>(p)[i];
  }
}

DCT_HOST_DEVICE void writeWidth(void* p, size_t i, int bytes, uint32_t v) {
  switch (bytes) {
    case 1: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case 2: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    default: static_cast<uint32_t*>(p)[i] = v; break;
  }
}

}  // namespace dct
