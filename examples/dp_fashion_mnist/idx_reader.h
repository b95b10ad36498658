// Fashion-MNIST from the Debian package dataset-fashion-mnist: gzip'ed IDX
// files (big-endian magic, dimensions, then unsigned bytes), read with zlib
// and checked: magic, dimensions, counts, and that the data is all there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fmnist {

constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

// Images: count x rows x cols bytes; labels: count bytes in 0..9.
struct IdxImages {
  uint32_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;
};
struct IdxLabels {
  std::vector<uint8_t> labels;
};

// false with the reason in *error (naming the file, and the package when
// the file is missing).
bool readImages(const std::string& path, IdxImages* out, std::string* error);
bool readLabels(const std::string& path, IdxLabels* out, std::string* error);

}  // namespace fmnist
