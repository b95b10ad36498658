// Command-line parsing; see options.h.
#include "options.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace dlrm {

const char* modeName(Mode mode) {
  switch (mode) {
    case Mode::kDense: return "dense";
    case Mode::kMp: return "mp";
    case Mode::kDp: return "dp";
    case Mode::kMpDp: return "mpdp";
  }
  return "?";
}

const char* shardingName(Sharding sharding) { return sharding == Sharding::kRow ? "row" : "table"; }

const char* wireName(dctDataType_t type) {
  return type == dctFloat16 ? "fp16" : type == dctBFloat16 ? "bf16" : "fp32";
}

namespace {

constexpr double kTiny = 1e-300;  // "> 0" as an inclusive bound
constexpr double kMaxInt = 2147483647.0;

// fp32|fp16|bf16 into *out.
bool wireType(const std::string& s, dctDataType_t* out) {
  for (dctDataType_t t : {dctFloat32, dctFloat16, dctBFloat16})
    if (s == wireName(t)) return *out = t, true;
  return false;
}

// A number in [lo, hi] (a whole one for integer T) into *out.
template <typename T>
bool number(const char* s, double lo, double hi, T* out) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= lo && v <= hi)) return false;
  if (std::is_integral<T>::value && v != std::floor(v)) return false;
  *out = static_cast<T>(v);
  return true;
}

bool toSizes(const char* s, std::vector<int>* out) {
  out->clear();
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    int v = 0;
    if (!number(item.c_str(), 1, kMaxInt, &v)) return false;
    out->push_back(v);
  }
  return !out->empty();
}

}  // namespace

void printUsage(const char* program) {
  std::printf(
      "usage: mpirun -np P %s [flags]\n"
      "  --mode dense|mp|dp|mpdp  dense: MPI_Alltoallv + MPI_Allreduce; mp: DCT-MP + MPI_Allreduce;\n"
      "                         dp: MPI_Alltoallv + DCT-DP; mpdp: DCT-MP + DCT-DP (default mpdp)\n"
      "  --sharding table|row   table: table t on rank t %% P, rows exchanged by all-to-all (default);\n"
      "                         row: every table split by rows (id %% P), pooled partials summed by a\n"
      "                         reduce-scatter: MPI_Alltoallv + sum (dense, dp) or DES (mp, mpdp), exact\n"
      "  --mp-density X         DCT-MP fraction of each embedding row sent (0.05; row sharding: exact unless given)\n"
      "  --mp-wire fp32|fp16|bf16  DCT-MP: the type the kept values travel in (fp32)\n"
      "  --mp-selection topk|threshold  DCT-MP: K per row, or one threshold for all rows (topk)\n"
      "  --mp-interval L        DCT-MP threshold: steps between tau estimates (library default)\n"
      "  --dp-density X         DCT-DP fraction of the MLP gradient sent (0.01)\n"
      "  --dp-wire fp32|fp16|bf16  DCT-DP: the type the kept values travel in (fp32)\n"
      "  --dp-interval L        DCT-DP steps between threshold estimates (library default)\n"
      "  --dp-warmup W          DCT-DP dense warm-up steps (library default)\n"
      "  --dp-algorithm A       DCT-DP auto|allgather|dense (allgather: see README)\n"
      "  --batch B              global batch (1024); split unevenly when P does not divide it\n"
      "  --epochs E --steps S   E epochs of S steps (8, 200)\n"
      "  --heldout N            held-out samples, rounded up to a multiple of B (32768)\n"
      "  --dim D                embedding dim = bottom MLP output (64)\n"
      "  --tables N1,N2,...     rows of each table (8 tables, 1e4..1e5)\n"
      "  --zipf S               Zipf exponent of the ids (1.1)\n"
      "  --lr X --emb-lr X      MLP / embedding learning rates (0.02, 0.01)\n"
      "  --emb-init X           embedding entries uniform in [-X, X] at start (0.05)\n"
      "  --emb-decay R          ... times R^d in column d (0.4; 1: no decay)\n"
      "  --adagrad-init X       MLP Adagrad initial accumulator (0)\n"
      "  --sgd                  plain SGD for the MLPs (default Adagrad)\n"
      "  --seed N               data seed (the teacher and the streams)\n"
      "  --model-seed N         initialisation seed of the MLPs and the tables\n"
      "  --check-auc X          exit 1 unless the final held-out AUC > X (and replicas identical)\n"
      "  --no-eval-full         MP modes: skip the extra evaluation with full rows\n"
      "  --tag NAME             label of the RESULT lines\n",
      program);
}

bool parseOptions(int argc, char** argv, Options* o, std::string* error) {
  o->data.tableSizes = {100000, 80000, 60000, 40000, 30000, 20000, 15000, 10000};
  bool mpDensityGiven = false;
  for (int i = 1; i < argc; i++) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") { error->clear(); return false; }
    if (flag == "--sgd") { o->sgd = true; continue; }
    if (flag == "--no-eval-full") { o->evalFull = false; continue; }
    if (i + 1 >= argc) { *error = "missing value after " + flag; return false; }
    const char* v = argv[++i];
    uint64_t seed = 0;
    bool ok = true;
    if (flag == "--mode") {
      const std::string m = v;
      if (m == "dense") o->mode = Mode::kDense;
      else if (m == "mp") o->mode = Mode::kMp;
      else if (m == "dp") o->mode = Mode::kDp;
      else if (m == "mpdp") o->mode = Mode::kMpDp;
      else ok = false;
    } else if (flag == "--dp-algorithm") {
      const std::string a = v;
      if (a == "auto") o->dpAlgorithm = dctAlgoAuto;
      else if (a == "allgather") o->dpAlgorithm = dctAlgoAllgather;
      else if (a == "dense") o->dpAlgorithm = dctAlgoDense;
      else ok = false;
    } else if (flag == "--sharding") {
      const std::string m = v;
      if (m == "table") o->sharding = Sharding::kTable;
      else if (m == "row") o->sharding = Sharding::kRow;
      else ok = false;
    } else if (flag == "--mp-density") {
      ok = number(v, kTiny, 1, &o->mpDensity);
      mpDensityGiven = true;
    } else if (flag == "--mp-wire") { ok = wireType(v, &o->mpWire);
    } else if (flag == "--dp-wire") { ok = wireType(v, &o->dpWire);
    } else if (flag == "--mp-selection") {
      const std::string m = v;
      if (m == "topk") o->mpSelection = dctRowTopK;
      else if (m == "threshold") o->mpSelection = dctRowThreshold;
      else ok = false;
    } else if (flag == "--dp-density") { ok = number(v, kTiny, 1, &o->dpDensity);
    } else if (flag == "--mp-interval") { ok = number(v, 1, kMaxInt, &o->mpInterval);
    } else if (flag == "--dp-interval") { ok = number(v, 1, kMaxInt, &o->dpInterval);
    } else if (flag == "--dp-warmup") { ok = number(v, 0, kMaxInt, &o->dpWarmup);
    } else if (flag == "--batch") { ok = number(v, 1, kMaxInt, &o->batch);
    } else if (flag == "--epochs") { ok = number(v, 1, kMaxInt, &o->epochs);
    } else if (flag == "--steps") { ok = number(v, 1, kMaxInt, &o->stepsPerEpoch);
    } else if (flag == "--heldout") { ok = number(v, 1, kMaxInt, &o->heldOut);
    } else if (flag == "--dim") { ok = number(v, 1, 4096, &o->model.embedding.dim);
    } else if (flag == "--tables") { ok = toSizes(v, &o->data.tableSizes);
    } else if (flag == "--zipf") { ok = number(v, kTiny, 100, &o->data.zipfExponent);
    } else if (flag == "--lr") { ok = number(v, kTiny, 1e3, &o->lr);
    } else if (flag == "--adagrad-init") { ok = number(v, 0, 1e3, &o->adagradInit);
    } else if (flag == "--emb-lr") { ok = number(v, kTiny, 1e3, &o->model.embedding.lr);
    } else if (flag == "--emb-init") { ok = number(v, kTiny, 1e3, &o->model.embedding.initScale);
    } else if (flag == "--emb-decay") { ok = number(v, kTiny, 1, &o->model.embedding.initDecay);
    } else if (flag == "--seed") { ok = number(v, 0, kMaxInt, &o->data.seed);
    } else if (flag == "--model-seed") {
      ok = number(v, 0, kMaxInt, &seed);
      o->model.seed = seed;
      o->model.embedding.seed = seed + 1000;
    } else if (flag == "--check-auc") { ok = number(v, 0, 1, &o->checkAuc);
    } else if (flag == "--tag") { o->tag = v;
    } else {
      *error = "unknown flag " + flag;
      return false;
    }
    if (!ok) { *error = "bad value '" + std::string(v) + "' for " + flag; return false; }
  }
  // Row sharding is exact unless a density is asked for: DES then thins
  // the non-zero rows it sends (per-row top-K, as DCT-MP does).
  if (mpDensityGiven && o->sharding == Sharding::kRow) o->desDensity = o->mpDensity;
  o->heldOut = (o->heldOut + o->batch - 1) / o->batch * o->batch;
  if (o->tag.empty()) o->tag = modeName(o->mode);
  return true;
}

}  // namespace dlrm
