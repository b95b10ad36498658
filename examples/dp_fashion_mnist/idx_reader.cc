#include "idx_reader.h"

#include <zlib.h>

#include <cstdio>

namespace fmnist {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension
constexpr uint32_t kMaxCount = 1u << 24;       // far above any MNIST-like set

struct GzFile {
  gzFile f = nullptr;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

bool fail(std::string* error, const std::string& path, const std::string& why) {
  *error = path + ": " + why;
  return false;
}

bool readExact(gzFile f, void* data, size_t bytes) {
  auto* p = static_cast<unsigned char*>(data);
  while (bytes > 0) {
    const unsigned piece = bytes > (1u << 30) ? (1u << 30) : static_cast<unsigned>(bytes);
    const int got = gzread(f, p, piece);
    if (got <= 0) return false;
    p += got;
    bytes -= static_cast<size_t>(got);
  }
  return true;
}

// Opens the file and reads the magic and `dims` big-endian dimensions.
bool readHeader(const std::string& path, uint32_t magic, int dims, GzFile* file, uint32_t* sizes,
                std::string* error) {
  file->f = gzopen(path.c_str(), "rb");
  if (file->f == nullptr)
    return fail(error, path, "cannot open it; install the Debian package dataset-fashion-mnist "
                             "(apt-get install dataset-fashion-mnist) or pass --data DIR");
  unsigned char header[16];
  if (!readExact(file->f, header, 4 + 4 * dims)) return fail(error, path, "truncated header (or not gzip/IDX)");
  auto be32 = [&](int i) {
    return (uint32_t{header[i]} << 24) | (uint32_t{header[i + 1]} << 16) | (uint32_t{header[i + 2]} << 8) |
           header[i + 3];
  };
  if (be32(0) != magic) {
    char msg[96];
    std::snprintf(msg, sizeof(msg), "bad magic number 0x%08x (expected 0x%08x)", be32(0), magic);
    return fail(error, path, msg);
  }
  for (int d = 0; d < dims; d++) sizes[d] = be32(4 + 4 * d);
  return true;
}

// The payload, and nothing after it.
bool readPayload(const std::string& path, GzFile& file, std::vector<uint8_t>& data, std::string* error) {
  if (!readExact(file.f, data.data(), data.size()))
    return fail(error, path, "truncated: expected " + std::to_string(data.size()) + " bytes of data");
  unsigned char extra;
  if (gzread(file.f, &extra, 1) != 0) return fail(error, path, "unexpected bytes after the data");
  return true;
}

}  // namespace

bool readImages(const std::string& path, IdxImages* out, std::string* error) {
  GzFile file;
  uint32_t sizes[3];
  if (!readHeader(path, kImagesMagic, 3, &file, sizes, error)) return false;
  if (sizes[0] == 0 || sizes[0] > kMaxCount || sizes[1] != 28 || sizes[2] != 28)
    return fail(error, path, "unexpected dimensions " + std::to_string(sizes[0]) + " x " +
                                 std::to_string(sizes[1]) + " x " + std::to_string(sizes[2]) + " (want N x 28 x 28)");
  out->count = sizes[0];
  out->rows = sizes[1];
  out->cols = sizes[2];
  out->pixels.resize(static_cast<size_t>(sizes[0]) * sizes[1] * sizes[2]);
  return readPayload(path, file, out->pixels, error);
}

bool readLabels(const std::string& path, IdxLabels* out, std::string* error) {
  GzFile file;
  uint32_t count;
  if (!readHeader(path, kLabelsMagic, 1, &file, &count, error)) return false;
  if (count == 0 || count > kMaxCount) return fail(error, path, "unexpected label count " + std::to_string(count));
  out->labels.resize(count);
  if (!readPayload(path, file, out->labels, error)) return false;
  for (uint8_t l : out->labels)
    if (l > 9) return fail(error, path, "label " + std::to_string(l) + " outside 0..9");
  return true;
}

}  // namespace fmnist
