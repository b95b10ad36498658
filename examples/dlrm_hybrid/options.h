// Command-line options of the DLRM example (see printUsage for the flags).
#pragma once

#include <dct/dct.h>

#include <string>

#include "data.h"
#include "model.h"

namespace dlrm {

enum class Mode { kDense, kMp, kDp, kMpDp };
const char* modeName(Mode mode);
const char* shardingName(Sharding sharding);
const char* wireName(dctDataType_t type);

struct Options {
  Mode mode = Mode::kMpDp;
  Sharding sharding = Sharding::kTable;  // row: the MP modes use DES, exact
  double mpDensity = 0.05;     // DCT-MP: K = ceil(density D) entries per row
  double desDensity = 1.0;     // --sharding row: DES keeps K = ceil(density D) of each non-zero row (1: exact)
  dctDataType_t mpWire = dctFloat32;  // DCT-MP: the type values travel in (config.wireType)
  int mpSelection = dctRowTopK;        // DCT-MP: dctRowSelection_t
  int mpInterval = 0;                  // DCT-MP threshold: steps between tau estimates (0: library default)
  double dpDensity = 0.01;     // DCT-DP (mpdp only)
  dctDataType_t dpWire = dctFloat32;  // DCT-DP: the type values travel in (rounding kept in the residual)
  int dpInterval = 0;          // DCT-DP threshold interval L (0: library default)
  int dpWarmup = -1;           // DCT-DP dense warm-up steps (-1: library default)
  int dpAlgorithm = dctAlgoAllgather;  // DCT-DP algorithm (dctAlgorithm_t)
  int batch = 1024;            // global batch B
  int epochs = 8;
  int stepsPerEpoch = 200;
  int heldOut = 32768;         // rounded up to a multiple of B
  float lr = 0.02f;            // MLP optimizer
  float adagradInit = 0.f;     // MLP Adagrad initial accumulator
  bool sgd = false;            // MLP optimizer: SGD instead of Adagrad
  double checkAuc = 0;         // > 0: fail unless the final held-out AUC exceeds it
  bool evalFull = true;        // MP modes: also evaluate with full (uncompressed) rows
  std::string tag;             // label of the RESULT lines
  DataConfig data;
  ModelConfig model;
};

// Parses argv; false with a message in *error on a bad or unknown flag,
// false with an empty *error for --help.
bool parseOptions(int argc, char** argv, Options* options, std::string* error);
void printUsage(const char* program);

}  // namespace dlrm
