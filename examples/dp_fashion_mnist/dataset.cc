#include "dataset.h"

#include <algorithm>

#include "common/random.h"
#include "idx_reader.h"

namespace fmnist {
namespace {

// Fashion-MNIST's pixel mean and standard deviation (of p/255).
constexpr float kMean = 0.2860f, kStd = 0.3530f;

bool loadSplit(const std::string& dir, const std::string& prefix, size_t keep, Split* out, std::string* error) {
  IdxImages images;
  IdxLabels labels;
  if (!readImages(dir + "/" + prefix + "-images-idx3-ubyte.gz", &images, error)) return false;
  if (!readLabels(dir + "/" + prefix + "-labels-idx1-ubyte.gz", &labels, error)) return false;
  if (labels.labels.size() != images.count) {
    *error = dir + "/" + prefix + "-*: " + std::to_string(images.count) + " images but " +
             std::to_string(labels.labels.size()) + " labels";
    return false;
  }
  out->count = keep ? std::min<size_t>(keep, images.count) : images.count;
  out->x.resize(out->count * kPixels);
  for (size_t i = 0; i < out->x.size(); i++) out->x[i] = (images.pixels[i] / 255.f - kMean) / kStd;
  out->y.assign(labels.labels.begin(), labels.labels.begin() + static_cast<std::ptrdiff_t>(out->count));
  return true;
}

}  // namespace

bool loadFashionMnist(const std::string& dir, size_t trainCount, size_t testCount, Split* train, Split* test,
                      std::string* error) {
  return loadSplit(dir, "train", trainCount, train, error) && loadSplit(dir, "t10k", testCount, test, error);
}

std::vector<uint32_t> epochShard(size_t count, uint64_t seed, int epoch, int rank, int ranks) {
  std::vector<uint32_t> order(count);
  for (size_t i = 0; i < count; i++) order[i] = static_cast<uint32_t>(i);
  examples::Rng rng(examples::streamSeed(seed, 0xda7a, static_cast<uint64_t>(epoch)));
  for (size_t i = count; i > 1; i--) std::swap(order[i - 1], order[rng.next() % i]);  // Fisher-Yates
  std::vector<uint32_t> mine;
  const size_t per = count / static_cast<size_t>(ranks);
  for (size_t j = 0; j < per; j++) mine.push_back(order[j * ranks + rank]);
  return mine;
}

}  // namespace fmnist
