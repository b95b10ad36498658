// DCT_TUNE: a static override of auto's choice for users who know their
// network, in the spirit of UCC's tuning strings. Comma-separated rules
//   bytes[@density]:algorithm
// where bytes is a range lo-hi of whole tensor sizes (K/M/G = 2^10/2^20/2^30,
// either end open, or *), density an optional range of the configured
// density, and algorithm one of auto|allgather|dense|split|globaltopk. A
// rule covers lo <= x < hi; the first rule that covers a step decides it,
// auto hands it to the tuner, and a step no rule covers is auto's too.
// A rule only picks among the plans the call allows (algo/plan.cc): one
// naming globaltopk is ignored, without an error (the rules are comm-wide,
// one string serves every tensor), where the compressor's autoGlobalTopk
// is 0 and always in the lossless sparse-input allreduce; the model
// decides there. Example:
//   DCT_TUNE=0-256K:dense,256K-64M@-0.02:allgather,*:auto
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dct {

// dctAlgorithm_t's names in its order (DCT_ALGORITHM and DCT_TUNE).
inline constexpr const char* kAlgorithmNames[] = {"auto", "allgather", "dense", "split", "globaltopk",
                                                     "recursivedoubling"};
inline constexpr int kAlgorithmCount = 6;

struct TuneRule {
  double bytesLo = 0, bytesHi = 0;      // [lo, hi); hi = infinity when open
  double densityLo = 0, densityHi = 0;  // likewise
  int algorithm = 0;                    // a dctAlgorithm_t
};

struct TuneRules {
  std::vector<TuneRule> rules;
  std::string text;  // as given ("" when unset)
  // The algorithm of the first rule covering the step; -1 when none does.
  int algorithmFor(uint64_t bytes, double density) const;
  // The rules as one number ranks can compare (equal rules, equal numbers).
  double fingerprint() const;
};

// Parses `text`; returns "" or what is wrong with it.
std::string parseTuneRules(const char* text, TuneRules* out);

}  // namespace dct
