// The one parser of DCT_* environment variables. Every reader gets the same
// strictness: a value is used only if the whole string parses; a set but
// malformed value is reported as such, so the caller can refuse it (config)
// or warn and fall back (tuning knobs) instead of silently reading 0.
#pragma once

#include <cstdint>
#include <string>

namespace dct {

enum class EnvStatus { Unset, Valid, Invalid };

template <typename T>
struct EnvValue {
  EnvStatus status = EnvStatus::Unset;
  T value{};
  const char* text = nullptr;  // the raw string when set
  bool valid() const { return status == EnvStatus::Valid; }
};

EnvValue<long long> envInteger(const char* name);
EnvValue<double> envReal(const char* name);
// A name from `names` (case-insensitive) maps to its position; a number is
// taken as is (range checks are the caller's).
EnvValue<int> envChoice(const char* name, const char* const* names, int count);

// Pieces of structured values (DCT_TUNE's and the shims' rules):
// a non-negative integer with an optional binary suffix K, M or G, the
// whole string, without overflow; and the position of `text` among `names`
// (case-insensitive), -1 when it is none of them.
bool parseAmount(const std::string& s, uint64_t* out);
int nameIndex(const char* text, const char* const* names, int count);

// Tuning knobs: the value if valid and positive, else `fallback` (a WARN
// log line names a malformed value).
double envPositiveReal(const char* name, double fallback);
long long envPositiveInteger(const char* name, long long fallback);

}  // namespace dct
