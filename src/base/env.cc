#include "base/env.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>

#include "base/debug.h"

namespace dct {
namespace {

template <typename T, typename Parse>
EnvValue<T> parse(const char* name, Parse&& convert) {
  EnvValue<T> out;
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return out;
  out.text = v;
  char* end = nullptr;
  errno = 0;
  T x = convert(v, &end);
  out.status = (end != v && *end == '\0' && errno == 0) ? EnvStatus::Valid : EnvStatus::Invalid;
  if (out.valid()) out.value = x;
  return out;
}

}  // namespace

EnvValue<long long> envInteger(const char* name) {
  return parse<long long>(name, [](const char* s, char** e) { return std::strtoll(s, e, 10); });
}

EnvValue<double> envReal(const char* name) {
  return parse<double>(name, [](const char* s, char** e) { return std::strtod(s, e); });
}

bool parseAmount(const std::string& s, uint64_t* out) {
  // Digits first: strtoull would skip blanks and wrap a sign (" -1" = 2^64-1).
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str() || errno != 0) return false;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end != '\0' || (shift && v > (UINT64_MAX >> shift))) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

int nameIndex(const char* text, const char* const* names, int count) {
  for (int i = 0; i < count; i++)
    if (strcasecmp(text, names[i]) == 0) return i;
  return -1;
}

EnvValue<int> envChoice(const char* name, const char* const* names, int count) {
  EnvValue<int> out;
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return out;
  if (const int i = nameIndex(v, names, count); i >= 0) return EnvValue<int>{EnvStatus::Valid, i, v};
  EnvValue<long long> n = envInteger(name);
  out.text = v;
  out.status = n.valid() && n.value == static_cast<int>(n.value) ? EnvStatus::Valid : EnvStatus::Invalid;
  out.value = static_cast<int>(n.value);
  return out;
}

double envPositiveReal(const char* name, double fallback) {
  EnvValue<double> v = envReal(name);
  if (v.valid() && v.value > 0) return v.value;
  if (v.status != EnvStatus::Unset) DCT_WARN("%s=%s is not a positive number; using %g", name, v.text, fallback);
  return fallback;
}

long long envPositiveInteger(const char* name, long long fallback) {
  EnvValue<long long> v = envInteger(name);
  if (v.valid() && v.value > 0) return v.value;
  if (v.status != EnvStatus::Unset) DCT_WARN("%s=%s is not a positive integer; using %lld", name, v.text, fallback);
  return fallback;
}

}  // namespace dct
