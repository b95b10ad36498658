// Synthetic click-through data from a fixed random "teacher" DLRM.
//
// Sample i of stream s is a pure function of (seed, s, i): its own PRNG
// (examples/common/random.h) seeded from those three numbers draws, in this order,
//   1. 13 dense features, each N(0, 1);
//   2. one id per categorical table t, Zipf(zipfExponent) over
//      [0, tableSizes[t]): P(id = k) ~ (k + 1)^-s, so id 0 is the most
//      frequent (the head) and most of a large table is a rarely seen tail;
//   3. one uniform u; the label is 1 when u < sigmoid(teacher logit).
// The teacher (fixed by the seed) is a small DLRM:
//   x0   = tanh(A dense)                     A: Dt x 13, N(0, 1/13)
//   e_t  = E_t[id_t]                         E_t: N(0, 1) entries, Dt wide
//   in   = [x0, <v_i, v_j>/sqrt(Dt) for all pairs i < j of v = (x0, e_1..e_T)]
//   raw  = w2 . relu(W1 in) + sum_t <u_t, e_t>/sqrt(Dt T)
//   logit = logitStd * (raw - mean) / std + bias
// where mean and std are measured on a calibration stream and bias is set
// so that the mean click probability there is `ctr`.
// Because every rank computes the same function, every rank sees the same
// stream and takes its own slice: no data is ever communicated.
#pragma once

#include <cstdint>
#include <vector>

namespace dlrm {

struct DataConfig {
  int denseFeatures = 13;
  std::vector<int> tableSizes;
  double zipfExponent = 1.1;
  int teacherDim = 16;     // Dt
  int teacherHidden = 32;
  double logitStd = 2.0;
  double ctr = 0.25;
  uint64_t seed = 20240601;
};

// Stream numbers: training, held-out and calibration samples never overlap.
enum Stream : uint64_t { kTrainStream = 0, kHeldOutStream = 1, kCalibrationStream = 2 };

// Samples [first, first + size) of one stream. Every sample's ids are kept
// (table owners look up the whole batch); dense features, labels and the
// teacher's logit only for the slice [lo, hi) this rank trains on.
struct Batch {
  int size = 0, lo = 0, hi = 0;
  std::vector<int32_t> ids;          // [table][size]
  std::vector<float> dense;          // [hi - lo][denseFeatures]
  std::vector<float> labels;         // [hi - lo], 0 or 1
  std::vector<float> teacherLogits;  // [hi - lo]: the Bayes-optimal scores
};

class Generator {
 public:
  explicit Generator(const DataConfig& config);
  int tables() const { return static_cast<int>(config_.tableSizes.size()); }
  const DataConfig& config() const { return config_; }
  void generate(uint64_t stream, uint64_t first, int size, int lo, int hi, Batch* out) const;

 private:
  double rawLogit(const float* dense, const int32_t* ids, int idStride) const;

  DataConfig config_;
  std::vector<std::vector<double>> zipfCdf_;  // per table, cumulative, last = 1
  std::vector<float> a_;                      // Dt x denseFeatures
  std::vector<std::vector<float>> e_;         // per table: size x Dt
  std::vector<float> w1_;                     // hidden x (Dt + pairs)
  std::vector<float> w2_;                     // hidden
  std::vector<float> u_;                      // T x Dt
  double mean_ = 0, scale_ = 1, bias_ = 0;
};

}  // namespace dlrm
