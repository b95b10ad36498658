#include "options.h"

#include <cstdlib>
#include <sstream>

#include "idx_reader.h"

namespace fmnist {
namespace {

const char* kUsage =
    "usage: mpirun -np N dp_fashion_mnist [options]\n"
    "  --sync dense|dct|dct-noef|onebit  gradient synchronisation (dense)\n"
    "  --density D          fraction kept by dct / dct-noef, in (0,1] (0.01)\n"
    "  --algorithm allgather|split|globaltopk|dense|auto\n"
    "                       libdct's sparse allreduce algorithm (allgather); globaltopk\n"
    "                       delivers about density x count entries of the sum per step\n"
    "  --epochs E (10)  --batch B per rank (64)  --lr R (0.05)  --momentum M (0.9)\n"
    "  --lr-schedule constant|cosine (constant) cosine: annealed to 0 over the run\n"
    "  --momentum-correction 0|1  (0) DGC's momentum correction and factor masking:\n"
    "                       each rank compresses its own velocity (error feedback\n"
    "                       accumulates it) and zeroes it where its entries were sent\n"
    "  --factor-masking 0|1 (1) with momentum correction: zero the velocity where sent\n"
    "  --hidden 512,256     hidden layer widths\n"
    "  --train N --test N   use the first N samples (all)\n"
    "  --seed S (1)  --data DIR (/usr/share/datasets/fashion-mnist)  --csv FILE\n"
    "  --check-accuracy A   exit with an error unless the final test accuracy is >= A (0..1)\n";

bool number(const char* text, double* out) {
  char* end = nullptr;
  *out = std::strtod(text, &end);
  return end != text && *end == '\0';
}

}  // namespace

bool parseOptions(int argc, char** argv, Options* o, std::string* message, bool* help) {
  *help = false;
  o->dataDir = kDefaultDataDir;
  for (int i = 1; i < argc; i++) {
    const std::string key = argv[i];
    if (key == "--help" || key == "-h") {
      *help = true;
      *message = kUsage;
      return false;
    }
    if (i + 1 >= argc) {
      *message = "missing value for " + key + "\n" + kUsage;
      return false;
    }
    const char* v = argv[++i];
    double x = 0;
    const bool isNumber = number(v, &x);
    bool ok = true;
    if (key == "--sync") ok = parseSyncMode(v, &o->sync.mode);
    else if (key == "--density") ok = isNumber && x > 0 && x <= 1, o->sync.density = x;
    else if (key == "--algorithm") {
      const std::string a = v;
      ok = a == "allgather" || a == "split" || a == "globaltopk" || a == "dense" || a == "auto";
      o->sync.algorithm = a == "dense"        ? dctAlgoDense
                          : a == "auto"       ? dctAlgoAuto
                          : a == "split"      ? dctAlgoSplit
                          : a == "globaltopk" ? dctAlgoGlobalTopk
                                              : dctAlgoAllgather;
    } else if (key == "--epochs") ok = isNumber && x >= 1, o->epochs = static_cast<int>(x);
    else if (key == "--batch") ok = isNumber && x >= 1, o->batch = static_cast<int>(x);
    else if (key == "--lr") ok = isNumber && x > 0, o->lr = static_cast<float>(x);
    else if (key == "--momentum") ok = isNumber && x >= 0 && x < 1, o->momentum = static_cast<float>(x);
    else if (key == "--train") ok = isNumber && x >= 0, o->trainCount = static_cast<size_t>(x);
    else if (key == "--test") ok = isNumber && x >= 0, o->testCount = static_cast<size_t>(x);
    else if (key == "--seed") ok = isNumber && x >= 0, o->seed = static_cast<uint64_t>(x);
    else if (key == "--data") o->dataDir = v;
    else if (key == "--momentum-correction") ok = isNumber && (x == 0 || x == 1), o->momentumCorrection = x == 1;
    else if (key == "--factor-masking") ok = isNumber && (x == 0 || x == 1), o->factorMasking = x == 1;
    else if (key == "--lr-schedule") ok = std::string(v) == "constant" || std::string(v) == "cosine", o->cosineLr = std::string(v) == "cosine";
    else if (key == "--csv") o->csv = v;
    else if (key == "--check-accuracy") ok = isNumber && x >= 0 && x <= 1, o->checkAccuracy = x;
    else if (key == "--hidden") {
      o->hidden.clear();
      std::stringstream list(v);
      for (std::string w; ok && std::getline(list, w, ',');) {
        ok = number(w.c_str(), &x) && x >= 1;
        o->hidden.push_back(static_cast<int>(x));
      }
      ok = ok && !o->hidden.empty();
    } else {
      *message = "unknown option " + key + "\n" + kUsage;
      return false;
    }
    if (!ok) {
      *message = "bad value for " + key + ": " + v + "\n" + kUsage;
      return false;
    }
  }
  return true;
}

}  // namespace fmnist
