#include "base/settings.h"

#include <cstdio>
#include <cstdlib>

#include "base/debug.h"

namespace dct {
namespace {

const char* const kMethods[] = {"sampled", "exact", "bisect"};
const char* const kTypes[] = {"fp32", "fp64", "fp16", "bf16"};
const char* const kKinds[] = {"topk", "onebit"};
const char* const kRowSelections[] = {"topk", "threshold"};
const char* const kSplitExchanges[] = {"auto", "pairwise", "halving"};

const char* const kAgreedNames[kAgreedSettings] = {
    "DCT_DENSITY",    "DCT_WARMUP_STEPS", "DCT_ALGORITHM",    "DCT_WIRE_TYPE",    "DCT_COMPRESSOR",
    "DCT_PIPELINE",   "DCT_CHUNK_ELEMENTS", "DCT_HIERARCHY",  "DCT_LOCAL_SIZE",   "DCT_ALPHA_US",
    "DCT_LINK_GBPS",  "DCT_SCATTER_GBPS", "DCT_REDUCE_GBPS",  "DCT_SELECT_GBPS",
    "DCT_TUNE",       "DCT_AUTO_GLOBAL_TOPK", "DCT_CAPACITY_FACTOR", "DCT_SPLIT_EXCHANGE",
    "DCT_GATHER_SLOTS", "DCT_OWNER_RETURN"};

constexpr double kUnset = -1.0e300, kMalformed = -2.0e300;

// An environment default as a number ranks can compare: unset and malformed
// are values of their own.
template <typename T>
double encode(const EnvValue<T>& v) {
  if (v.status == EnvStatus::Unset) return kUnset;
  if (v.status == EnvStatus::Invalid) return kMalformed;
  return static_cast<double>(v.value);
}

// Optional hard settings: malformed is an error (the comm is not made).
bool readFlag(const char* name, int* out, std::string* error) {
  const EnvValue<long long> v = envInteger(name);
  if (v.status == EnvStatus::Unset) return true;
  if (v.valid() && (v.value == 0 || v.value == 1)) {
    *out = static_cast<int>(v.value);
    return true;
  }
  *error = std::string(name) + "='" + v.text + "': want 0 or 1";
  return false;
}

}  // namespace

CostOverrides costOverridesFromEnv() {
  CostOverrides o;
  o.alphaUs = envPositiveReal("DCT_ALPHA_US", 0);
  o.linkGBps = envPositiveReal("DCT_LINK_GBPS", 0);
  o.scatterGBps = envPositiveReal("DCT_SCATTER_GBPS", 0);
  o.reduceGBps = envPositiveReal("DCT_REDUCE_GBPS", 0);
  o.selectGBps = envPositiveReal("DCT_SELECT_GBPS", 0);
  return o;
}

ConfigEnv configEnvFromEnv() {
  ConfigEnv e;
  e.density = envReal("DCT_DENSITY");
  e.thresholdInterval = envInteger("DCT_THRESHOLD_INTERVAL");
  e.errorFeedback = envInteger("DCT_ERROR_FEEDBACK");
  e.warmupSteps = envInteger("DCT_WARMUP_STEPS");
  e.seed = envInteger("DCT_SEED");
  e.thresholdMethod = envChoice("DCT_THRESHOLD_METHOD", kMethods, 3);
  e.algorithm = envChoice("DCT_ALGORITHM", kAlgorithmNames, kAlgorithmCount);
  e.rowSelection = envChoice("DCT_ROW_SELECTION", kRowSelections, 2);
  e.wireType = envChoice("DCT_WIRE_TYPE", kTypes, 4);
  e.compressor = envChoice("DCT_COMPRESSOR", kKinds, 2);
  e.autoGlobalTopk = envInteger("DCT_AUTO_GLOBAL_TOPK");
  e.capacityFactor = envReal("DCT_CAPACITY_FACTOR");
  e.ownerReturn = envInteger("DCT_OWNER_RETURN");
  return e;
}

Settings readSettings() {
  Settings s;
  s.config = configEnvFromEnv();
  s.cost = costOverridesFromEnv();
  const EnvValue<long long> pipeline = envInteger("DCT_PIPELINE");
  if (pipeline.status == EnvStatus::Invalid) DCT_WARN("DCT_PIPELINE=%s is not a number; pipelining stays on", pipeline.text);
  s.pipeline = !(pipeline.valid() && pipeline.value == 0);
  const EnvValue<long long> slots = envInteger("DCT_GATHER_SLOTS");
  if (slots.status == EnvStatus::Invalid) DCT_WARN("DCT_GATHER_SLOTS=%s is not a number; the slots stay on", slots.text);
  s.gatherSlots = !(slots.valid() && slots.value == 0);
  s.chunkElems = static_cast<uint64_t>(envPositiveInteger("DCT_CHUNK_ELEMENTS", 0));
  if (readFlag("DCT_HIERARCHY", &s.hierarchy, &s.error) && s.hierarchy) {
    const EnvValue<long long> local = envInteger("DCT_LOCAL_SIZE");
    if (local.status == EnvStatus::Invalid || (local.valid() && (local.value < 1 || local.value > 1 << 30)))
      s.error = std::string("DCT_LOCAL_SIZE='") + local.text + "': want a positive rank count";
    else if (local.valid()) s.localSize = static_cast<int>(local.value);
  }
  const EnvValue<int> exchange = envChoice("DCT_SPLIT_EXCHANGE", kSplitExchanges, 3);
  if (exchange.status == EnvStatus::Invalid || (exchange.valid() && (exchange.value < 0 || exchange.value > 2))) {
    if (s.error.empty()) s.error = std::string("DCT_SPLIT_EXCHANGE='") + exchange.text + "': want auto, pairwise or halving";
  } else if (exchange.valid())
    s.splitExchange = exchange.value;
  const std::string tuneError = parseTuneRules(std::getenv("DCT_TUNE"), &s.tune);
  if (s.error.empty()) s.error = tuneError;
  if (logLevel() >= LogLevel::Info) {
    const AgreedSettings a = agreedSettings(s);
    std::string line;
    char item[96];
    for (int i = 0; i < kAgreedSettings; i++) {
      std::snprintf(item, sizeof(item), " %s=%s", kAgreedNames[i], settingText(a.value[i]).c_str());
      line += item;
    }
    // "unset": a config field, else the default, decides; 0 for the comm's
    // own numbers: the model's choice (chunks) or not set (cost inputs).
    DCT_INFO("settings agreed across ranks:%s%s", line.c_str(), s.error.empty() ? "" : (" ERROR " + s.error).c_str());
  }
  return s;
}

AgreedSettings agreedSettings(const Settings& s) {
  const ConfigEnv& c = s.config;
  // Unset comm-level values are their defaults already: 0 encodes "unset".
  return AgreedSettings{{encode(c.density), encode(c.warmupSteps), encode(c.algorithm), encode(c.wireType),
                         encode(c.compressor), s.pipeline ? 1.0 : 0.0, static_cast<double>(s.chunkElems),
                         static_cast<double>(s.hierarchy), static_cast<double>(s.localSize), s.cost.alphaUs,
                         s.cost.linkGBps, s.cost.scatterGBps, s.cost.reduceGBps, s.cost.selectGBps,
                         s.tune.text.empty() ? kUnset : s.tune.fingerprint(), encode(c.autoGlobalTopk),
                         encode(c.capacityFactor), static_cast<double>(s.splitExchange),
                         s.gatherSlots ? 1.0 : 0.0, encode(c.ownerReturn)}};
}

std::string settingText(double value) {
  if (value == kUnset) return "unset";
  if (value == kMalformed) return "malformed";
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

const char* agreedSettingName(int i) { return i >= 0 && i < kAgreedSettings ? kAgreedNames[i] : "?"; }

}  // namespace dct
