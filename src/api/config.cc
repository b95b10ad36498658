#include "api/config.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/debug.h"

namespace dct {
namespace {

bool envLong(const char* name, long long& out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*end != '\0') return false;
  out = x;
  return true;
}

// DCT_THRESHOLD_METHOD and DCT_ALGORITHM take names or numbers.
bool envEnum(const char* name, const char* const* names, int count, int& out) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  for (int i = 0; i < count; i++)
    if (strcasecmp(v, names[i]) == 0) {
      out = i;
      return true;
    }
  long long x;
  if (!envLong(name, x)) return false;
  out = static_cast<int>(x);
  return true;
}

template <typename T>
void pick(T& field, T undef, bool haveEnv, T envValue, T fallback) {
  if (field == undef) field = haveEnv ? envValue : fallback;
}

}  // namespace

dctResult_t resolveConfig(dctComm_t comm, const dctConfig_t* user, dctConfig_t* out) {
  dctConfig_t c = DCT_CONFIG_INITIALIZER;
  if (user != nullptr) {
    if (user->size != sizeof(dctConfig_t) || user->magic != DCT_CONFIG_MAGIC)
      return fail(comm, dctInvalidArgument,
                  "config was not initialised from DCT_CONFIG_INITIALIZER (size %zu, magic 0x%x)",
                  user->size, user->magic);
    if (user->version > DCT_VERSION_CODE)
      return fail(comm, dctInvalidArgument, "config version %u is newer than this libdct (%d)",
                  user->version, DCT_VERSION_CODE);
    c = *user;
  }
  const char* d = std::getenv("DCT_DENSITY");
  double envDensity = d ? std::strtod(d, nullptr) : 0;
  pick(c.density, DCT_CONFIG_UNDEF_DOUBLE, d != nullptr, envDensity, 0.01);
  long long v = 0;
  bool has = envLong("DCT_THRESHOLD_INTERVAL", v);
  pick(c.thresholdInterval, DCT_CONFIG_UNDEF_INT, has, static_cast<int>(v), 1000);
  has = envLong("DCT_ERROR_FEEDBACK", v);
  pick(c.errorFeedback, DCT_CONFIG_UNDEF_INT, has, static_cast<int>(v), 1);
  has = envLong("DCT_WARMUP_STEPS", v);
  pick(c.warmupSteps, DCT_CONFIG_UNDEF_INT, has, static_cast<int>(v), 0);
  has = envLong("DCT_SEED", v);
  pick(c.seed, static_cast<long long>(DCT_CONFIG_UNDEF_INT), has, v, 0LL);
  static const char* const methods[] = {"sampled", "exact"};
  static const char* const algos[] = {"auto", "allgather", "dense", "split"};
  int e = 0;
  has = envEnum("DCT_THRESHOLD_METHOD", methods, 2, e);
  pick(c.thresholdMethod, DCT_CONFIG_UNDEF_INT, has, e, static_cast<int>(dctThresholdSampled));
  has = envEnum("DCT_ALGORITHM", algos, 4, e);
  pick(c.algorithm, DCT_CONFIG_UNDEF_INT, has, e, static_cast<int>(dctAlgoAuto));

  if (!(c.density > 0.0 && c.density <= 1.0))  // also rejects NaN
    return fail(comm, dctInvalidArgument, "density %g is outside (0, 1]", c.density);
  if (c.thresholdInterval < 1)
    return fail(comm, dctInvalidArgument, "thresholdInterval %d must be >= 1", c.thresholdInterval);
  if (c.errorFeedback != 0 && c.errorFeedback != 1)
    return fail(comm, dctInvalidArgument, "errorFeedback %d must be 0 or 1", c.errorFeedback);
  if (c.warmupSteps < 0)
    return fail(comm, dctInvalidArgument, "warmupSteps %d must be >= 0", c.warmupSteps);
  if (c.seed < 0) return fail(comm, dctInvalidArgument, "seed %lld must be >= 0", c.seed);
  if (c.thresholdMethod < 0 || c.thresholdMethod >= dctNumThresholdMethods)
    return fail(comm, dctInvalidArgument, "thresholdMethod %d is not a dctThresholdMethod_t",
                c.thresholdMethod);
  if (c.algorithm < 0 || c.algorithm >= dctNumAlgorithms)
    return fail(comm, dctInvalidArgument, "algorithm %d is not a dctAlgorithm_t", c.algorithm);
  if (c.algorithm == dctAlgoSplit)
    return fail(comm, dctNotSupported, "dctAlgoSplit is reserved for a later version");
  *out = c;
  return dctSuccess;
}

}  // namespace dct
