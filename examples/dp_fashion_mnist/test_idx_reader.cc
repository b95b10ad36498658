// The IDX reader against files written here: a good one, and every error
// it must name (missing file, bad magic, truncation, trailing bytes, bad
// dimensions, bad labels).
#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "idx_reader.h"

using namespace fmnist;

namespace {

std::string tempPath(const char* name) { return "/tmp/dct_idx_" + std::to_string(getpid()) + "_" + name; }

void writeGz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
}

void be32(std::vector<unsigned char>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<unsigned char>(v >> s));
}

std::vector<unsigned char> images(uint32_t magic, uint32_t count, uint32_t rows, size_t payload) {
  std::vector<unsigned char> b;
  be32(b, magic);
  be32(b, count);
  be32(b, rows);
  be32(b, 28);
  for (size_t i = 0; i < payload; i++) b.push_back(static_cast<unsigned char>(i * 7));
  return b;
}

std::string imageError(const std::vector<unsigned char>& bytes) {
  const std::string path = tempPath("img.gz");
  writeGz(path, bytes);
  IdxImages out;
  std::string error;
  CHECK_FALSE(readImages(path, &out, &error));
  std::remove(path.c_str());
  return error;
}

}  // namespace

TEST_CASE("a well-formed file reads back exactly") {
  const std::string path = tempPath("good.gz");
  writeGz(path, images(0x803, 3, 28, 3 * 784));
  IdxImages out;
  std::string error;
  REQUIRE_MESSAGE(readImages(path, &out, &error), error);
  CHECK(out.count == 3);
  CHECK(out.rows == 28);
  CHECK(out.cols == 28);
  REQUIRE(out.pixels.size() == 3 * 784);
  for (size_t i = 0; i < out.pixels.size(); i++) CHECK(out.pixels[i] == static_cast<unsigned char>(i * 7));
  std::remove(path.c_str());

  std::vector<unsigned char> labels;
  be32(labels, 0x801);
  be32(labels, 4);
  for (unsigned char l : {0, 9, 3, 5}) labels.push_back(l);
  writeGz(path, labels);
  IdxLabels lab;
  REQUIRE_MESSAGE(readLabels(path, &lab, &error), error);
  CHECK(lab.labels == std::vector<uint8_t>{0, 9, 3, 5});
  std::remove(path.c_str());
}

TEST_CASE("a missing file names the package") {
  IdxImages out;
  std::string error;
  CHECK_FALSE(readImages("/nonexistent/train-images-idx3-ubyte.gz", &out, &error));
  CHECK(error.find("/nonexistent/train-images-idx3-ubyte.gz") != std::string::npos);
  CHECK(error.find("dataset-fashion-mnist") != std::string::npos);
}

TEST_CASE("a bad magic number is refused") {
  CHECK(imageError(images(0x801, 3, 28, 3 * 784)).find("bad magic number 0x00000801") != std::string::npos);
  CHECK(imageError(images(0x08030000, 3, 28, 3 * 784)).find("bad magic") != std::string::npos);
}

TEST_CASE("truncated files are refused") {
  CHECK(imageError(images(0x803, 3, 28, 3 * 784 - 1)).find("truncated: expected 2352 bytes") != std::string::npos);
  std::vector<unsigned char> header = images(0x803, 3, 28, 0);
  header.resize(10);
  CHECK(imageError(header).find("truncated header") != std::string::npos);
  CHECK(imageError({}).find("truncated header") != std::string::npos);
}

TEST_CASE("trailing bytes, bad dimensions and bad labels are refused") {
  CHECK(imageError(images(0x803, 3, 28, 3 * 784 + 1)).find("unexpected bytes after the data") != std::string::npos);
  CHECK(imageError(images(0x803, 3, 27, 3 * 27 * 28)).find("unexpected dimensions 3 x 27 x 28") != std::string::npos);
  CHECK(imageError(images(0x803, 0, 28, 0)).find("unexpected dimensions") != std::string::npos);
  const std::string path = tempPath("lab.gz");
  std::vector<unsigned char> labels;
  be32(labels, 0x801);
  be32(labels, 2);
  labels.push_back(1);
  labels.push_back(10);
  writeGz(path, labels);
  IdxLabels out;
  std::string error;
  CHECK_FALSE(readLabels(path, &out, &error));
  CHECK(error.find("label 10 outside 0..9") != std::string::npos);
  std::remove(path.c_str());
}
