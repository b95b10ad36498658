#include "base/tune_rules.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "base/env.h"

namespace dct {
namespace {

constexpr double kOpen = std::numeric_limits<double>::infinity();

// A size: a non-negative integer with an optional K/M/G suffix.
bool parseBytes(const std::string& s, double* out) {
  uint64_t bytes = 0;
  if (!parseAmount(s, &bytes)) return false;
  *out = static_cast<double>(bytes);
  return true;
}

bool parseDensity(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0' && std::isfinite(*out) && *out >= 0;
}

// "lo-hi" with either end empty (open), or "*": [lo, hi).
template <typename Parse>
bool parseRange(const std::string& s, Parse parse, double* lo, double* hi) {
  *lo = 0;
  *hi = kOpen;
  if (s == "*") return true;
  const size_t dash = s.find('-');
  if (dash == std::string::npos) return false;
  const std::string a = s.substr(0, dash), b = s.substr(dash + 1);
  if ((!a.empty() && !parse(a, lo)) || (!b.empty() && !parse(b, hi))) return false;
  return *lo < *hi;
}

// "auto, allgather, ... or globaltopk", from kAlgorithmNames.
std::string algorithmList() {
  std::string list;
  for (int i = 0; i < kAlgorithmCount; i++)
    list += std::string(i == 0 ? "" : i + 1 < kAlgorithmCount ? ", " : " or ") + kAlgorithmNames[i];
  return list;
}

std::string parseRule(const std::string& rule, TuneRule* out) {
  const size_t colon = rule.rfind(':');
  if (colon == std::string::npos) return "'" + rule + "' has no ':algorithm'";
  const std::string range = rule.substr(0, colon), name = rule.substr(colon + 1);
  out->algorithm = nameIndex(name.c_str(), kAlgorithmNames, kAlgorithmCount);
  if (out->algorithm < 0) return "'" + name + "' is not " + algorithmList();
  const size_t at = range.find('@');
  const std::string bytes = range.substr(0, at);
  if (!parseRange(bytes, parseBytes, &out->bytesLo, &out->bytesHi))
    return "'" + bytes + "' is not a size range lo-hi (K/M/G suffixes, either end open) or *";
  out->densityLo = 0;
  out->densityHi = kOpen;
  if (at != std::string::npos) {
    const std::string density = range.substr(at + 1);
    if (!parseRange(density, parseDensity, &out->densityLo, &out->densityHi))
      return "'" + density + "' is not a density range lo-hi";
  }
  return "";
}

}  // namespace

int TuneRules::algorithmFor(uint64_t bytes, double density) const {
  const double b = static_cast<double>(bytes);
  for (const TuneRule& r : rules)
    if (b >= r.bytesLo && b < r.bytesHi && density >= r.densityLo && density < r.densityHi) return r.algorithm;
  return -1;
}

double TuneRules::fingerprint() const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the parsed rules
  auto mix = [&h](const void* p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  };
  for (const TuneRule& r : rules) {  // field by field: the struct's padding is not part of the rule
    const double fields[] = {r.bytesLo, r.bytesHi, r.densityLo, r.densityHi, static_cast<double>(r.algorithm)};
    mix(fields, sizeof(fields));
  }
  return static_cast<double>(h >> 12);  // 52 bits: exact in a double
}

std::string parseTuneRules(const char* text, TuneRules* out) {
  *out = TuneRules{};
  if (text == nullptr) return "";
  out->text = text;
  std::string all;
  for (const char* p = text; *p; p++)
    if (!std::isspace(static_cast<unsigned char>(*p))) all += *p;
  if (all.empty()) {  // set but empty: as unset
    out->text.clear();
    return "";
  }
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = std::min(all.find(',', start), all.size());
    TuneRule rule;
    const std::string error = parseRule(all.substr(start, comma - start), &rule);
    if (!error.empty()) return "DCT_TUNE='" + out->text + "': " + error;
    out->rules.push_back(rule);
    start = comma + 1;
  }
  return "";
}

}  // namespace dct
