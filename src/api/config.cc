#include "api/config.h"

#include "base/debug.h"
#include "base/dtype.h"
#include "base/settings.h"

namespace dct {
namespace {

// An undefined field takes the environment's value, else the default. A set
// but malformed variable is an error: a typo must not silently train with
// the default.
template <typename T, typename V>
dctResult_t pick(dctComm_t comm, T& field, T undef, const EnvValue<V>& env, const char* name, T fallback) {
  if (field != undef) return dctSuccess;
  if (env.status == EnvStatus::Invalid || (env.valid() && static_cast<V>(static_cast<T>(env.value)) != env.value))
    return fail(comm, dctInvalidArgument, "%s=%s is not a valid value", name, env.text);
  field = env.valid() ? static_cast<T>(env.value) : fallback;
  return dctSuccess;
}

}  // namespace

dctResult_t resolveConfig(dctComm_t comm, const ConfigEnv& env, const dctConfig_t* user, dctConfig_t* out) {
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
  DCTCHECK(pick(comm, c.density, DCT_CONFIG_UNDEF_DOUBLE, env.density, "DCT_DENSITY", 0.01));
  DCTCHECK(pick(comm, c.thresholdInterval, DCT_CONFIG_UNDEF_INT, env.thresholdInterval,
                "DCT_THRESHOLD_INTERVAL", 1000));
  DCTCHECK(pick(comm, c.errorFeedback, DCT_CONFIG_UNDEF_INT, env.errorFeedback,
                "DCT_ERROR_FEEDBACK", 1));
  DCTCHECK(pick(comm, c.warmupSteps, DCT_CONFIG_UNDEF_INT, env.warmupSteps,
                "DCT_WARMUP_STEPS", 0));
  DCTCHECK(pick(comm, c.seed, static_cast<long long>(DCT_CONFIG_UNDEF_INT), env.seed,
                "DCT_SEED", 0LL));
  DCTCHECK(pick(comm, c.thresholdMethod, DCT_CONFIG_UNDEF_INT, env.thresholdMethod,
                "DCT_THRESHOLD_METHOD", static_cast<int>(dctThresholdSampled)));
  DCTCHECK(pick(comm, c.algorithm, DCT_CONFIG_UNDEF_INT, env.algorithm, "DCT_ALGORITHM",
                static_cast<int>(dctAlgoAuto)));
  DCTCHECK(pick(comm, c.rowSelection, DCT_CONFIG_UNDEF_INT, env.rowSelection,
                "DCT_ROW_SELECTION", static_cast<int>(dctRowTopK)));
  DCTCHECK(pick(comm, c.wireType, DCT_CONFIG_UNDEF_INT, env.wireType, "DCT_WIRE_TYPE",
                kWireTypeOfTensor));
  DCTCHECK(pick(comm, c.compressor, DCT_CONFIG_UNDEF_INT, env.compressor, "DCT_COMPRESSOR",
                static_cast<int>(dctCompressorTopk)));
  DCTCHECK(pick(comm, c.autoGlobalTopk, DCT_CONFIG_UNDEF_INT, env.autoGlobalTopk, "DCT_AUTO_GLOBAL_TOPK", 0));
  DCTCHECK(pick(comm, c.capacityFactor, DCT_CONFIG_UNDEF_DOUBLE, env.capacityFactor, "DCT_CAPACITY_FACTOR", 0.0));
  DCTCHECK(pick(comm, c.ownerReturn, DCT_CONFIG_UNDEF_INT, env.ownerReturn, "DCT_OWNER_RETURN", 0));

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
  if (c.algorithm == dctAlgoRecursiveDoubling)
    return fail(comm, dctInvalidArgument,
                "algorithm dctAlgoRecursiveDoubling serves dctSparseInputAllreduce only, not a compressor's step");
  if (c.rowSelection < 0 || c.rowSelection >= dctNumRowSelections)
    return fail(comm, dctInvalidArgument, "rowSelection %d is not a dctRowSelection_t", c.rowSelection);
  if (c.wireType < kWireTypeOfTensor || c.wireType >= dctNumTypes)
    return fail(comm, dctInvalidArgument, "wireType %d is not a dctDataType_t", c.wireType);
  if (c.compressor < 0 || c.compressor >= dctNumCompressorKinds)
    return fail(comm, dctInvalidArgument, "compressor %d is not a dctCompressorKind_t", c.compressor);
  if (c.autoGlobalTopk != 0 && c.autoGlobalTopk != 1)
    return fail(comm, dctInvalidArgument, "autoGlobalTopk %d must be 0 or 1", c.autoGlobalTopk);
  if (c.ownerReturn != 0 && c.ownerReturn != 1)
    return fail(comm, dctInvalidArgument, "ownerReturn %d must be 0 or 1", c.ownerReturn);
  if (!(c.capacityFactor == 0.0 || (c.capacityFactor >= 1.0 && c.capacityFactor <= kMaxCapacityFactor)))
    return fail(comm, dctInvalidArgument, "capacityFactor %g must be 0 (off) or in [1, %g]", c.capacityFactor,
                kMaxCapacityFactor);
  *out = c;
  return dctSuccess;
}

dctResult_t checkFixedCapacity(dctComm_t comm, const dctConfig_t& c) {
  if (!(c.capacityFactor > 0) || c.compressor != dctCompressorTopk) return dctSuccess;
  if (c.thresholdMethod != dctThresholdSampled)
    return fail(comm, dctInvalidArgument, "capacityFactor %g: the fixed-capacity mode estimates tau by sampling "
                "(thresholdMethod must be sampled)", c.capacityFactor);
  if (c.algorithm != dctAlgoAuto && c.algorithm != dctAlgoAllgather && c.algorithm != dctAlgoGlobalTopk)
    return fail(comm, dctInvalidArgument, "capacityFactor %g: the fixed-capacity mode runs the allgather plan or "
                "global top-k with fixed pieces (algorithm must be auto, allgather or globaltopk)", c.capacityFactor);
  if (c.algorithm == dctAlgoGlobalTopk && c.ownerReturn)
    return fail(comm, dctInvalidArgument, "capacityFactor %g: fixed-capacity global top-k keeps what an owner does not "
                "select in its owner residual (ownerReturn must be 0)", c.capacityFactor);
  return dctSuccess;
}

}  // namespace dct
