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

EnvValue<int> envChoice(const char* name, const char* const* names, int count) {
  EnvValue<int> out;
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return out;
  for (int i = 0; i < count; i++)
    if (strcasecmp(v, names[i]) == 0) return EnvValue<int>{EnvStatus::Valid, i, v};
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
