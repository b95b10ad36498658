// Command line of dp_fashion_mnist (--help prints it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sync.h"

namespace fmnist {

struct Options {
  GradientSync::Settings sync;
  std::vector<int> hidden{512, 256};
  int epochs = 10;
  int batch = 64;          // per rank
  float lr = 0.05f;
  bool cosineLr = false;   // lr * (1 + cos(pi t / T)) / 2 over the run's T steps
  float momentum = 0.9f;
  bool momentumCorrection = false;  // DGC: compress each rank's velocity, not its gradient
  bool factorMasking = true;        // with it: zero the velocity where the residual was sent
  size_t trainCount = 0;   // 0: all 60000
  size_t testCount = 0;    // 0: all 10000
  uint64_t seed = 1;
  std::string dataDir;
  std::string csv;
  double checkAccuracy = -1;  // fail unless the last test accuracy reaches it
};

// false: print *message and exit (with status 0 when helpRequested).
bool parseOptions(int argc, char** argv, Options* out, std::string* message, bool* helpRequested);

}  // namespace fmnist
