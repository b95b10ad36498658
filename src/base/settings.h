// Every DCT_* variable that shapes a comm's work, read once when the comm is
// created (NCCL_PARAM style) and kept on it: no step reads the environment.
// Those that shape what goes on the wire or which collective runs next are
// agreed across ranks at creation (agreeSettings, transport/comm.h); the
// rest (threads, threshold method, seed, error feedback, the threshold
// interval, row selection, logging) only shape local work and may differ.
#pragma once

#include <cstdint>
#include <string>

#include "base/env.h"
#include "base/tune_rules.h"

namespace dct {

// Cost-model inputs set by hand (0: not set, the model fits or defaults).
struct CostOverrides {
  double alphaUs = 0;      // DCT_ALPHA_US
  double linkGBps = 0;     // DCT_LINK_GBPS
  double scatterGBps = 0;  // DCT_SCATTER_GBPS
  double reduceGBps = 0;   // DCT_REDUCE_GBPS
  double selectGBps = 0;   // DCT_SELECT_GBPS
};
CostOverrides costOverridesFromEnv();

// dctConfig_t's defaults as the environment gave them; a malformed one is
// refused when a compressor or plan resolves its config (api/config.h).
struct ConfigEnv {
  EnvValue<double> density, capacityFactor;
  EnvValue<long long> thresholdInterval, errorFeedback, warmupSteps, seed, autoGlobalTopk, ownerReturn;
  EnvValue<int> thresholdMethod, algorithm, rowSelection, wireType, compressor;
};
ConfigEnv configEnvFromEnv();

// Past this many chunks DCT_CHUNK_ELEMENTS is raised: a chunk costs a
// nonblocking collective, and the chunk count must fit the header's int.
constexpr uint64_t kMaxExplicitChunks = 4096;

// DCT_SPLIT_EXCHANGE's values ("auto", "pairwise", "halving"): the cost
// model's choice, one alltoallv, or recursive halving where the transport
// has sendrecv.
enum : int { kSplitExchangeAuto = 0, kSplitExchangePairwise = 1, kSplitExchangeHalving = 2 };

struct Settings {
  ConfigEnv config;
  CostOverrides cost;
  bool pipeline = true;     // DCT_PIPELINE=0 turns the pipelined allreduce off
  bool gatherSlots = true;  // DCT_GATHER_SLOTS=0: no gather slots (algo/gather_slot.h)
  uint64_t chunkElems = 0;  // DCT_CHUNK_ELEMENTS (0: the cost model sizes chunks)
  int hierarchy = 0;        // DCT_HIERARCHY: 0 or 1
  int localSize = 0;        // DCT_LOCAL_SIZE: ranks per node (0: by shared memory)
  TuneRules tune;           // DCT_TUNE: auto's choice fixed by size and density
  // DCT_SPLIT_EXCHANGE: the split plans' reduce-scatter, kSplitExchange*.
  int splitExchange = 0;
  std::string error;        // a malformed comm-level setting: the comm is not made
};

// Reads, validates and logs (INFO) every setting above.
Settings readSettings();

// The agreed settings as numbers, each named after its variable, so that
// ranks compare them value by value and name the one that differs.
constexpr int kAgreedSettings = 20;
struct AgreedSettings {
  double value[kAgreedSettings];
};
AgreedSettings agreedSettings(const Settings& s);
const char* agreedSettingName(int i);
// One agreed value for a message: "unset", "malformed" or the number.
std::string settingText(double value);

}  // namespace dct
