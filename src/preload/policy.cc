#include "preload/policy.h"

#include <cstdlib>
#include <cstring>

#include "base/debug.h"
#include "base/env.h"

namespace dct::preload {
namespace {

bool parseRange(const std::string& s, Range* out) {
  const size_t dash = s.find('-');
  if (dash == std::string::npos) {
    if (!parseAmount(s, &out->lo)) return false;
    out->hi = out->lo;
    return true;
  }
  const std::string lo = s.substr(0, dash), hi = s.substr(dash + 1);
  if (lo.empty() && hi.empty()) return false;
  if (!lo.empty() && !parseAmount(lo, &out->lo)) return false;
  if (!hi.empty() && !parseAmount(hi, &out->hi)) return false;
  return out->lo <= out->hi;
}

// "size=2-64,call=10-,bytes=4M-1G"
bool parseTerms(const char* name, const char* text, std::vector<Term>* out, std::string* error) {
  if (*text == '\0') return true;
  for (std::string rest = text;;) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    Term t{Subject::CommSize, {}};
    if (key == "call") t.subject = Subject::CallIndex;
    else if (key == "bytes") t.subject = Subject::Bytes;
    else if (key != "size") eq = std::string::npos;
    if (eq == std::string::npos || !parseRange(item.substr(eq + 1), &t.range)) {
      *error = std::string(name) + ": '" + item + "' is not size=A-B, call=A-B or bytes=A-B";
      return false;
    }
    out->push_back(t);
    if (comma == std::string::npos) return true;
    rest = rest.substr(comma + 1);
  }
}

void mix(uint64_t& h, uint64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
}

bool holds(const Term& t, const CallFacts& c) {
  switch (t.subject) {
    case Subject::CommSize: return t.range.contains(static_cast<uint64_t>(c.commSize));
    case Subject::CallIndex: return t.range.contains(c.callIndex);
    default: return t.range.contains(c.bytes);
  }
}

}  // namespace

const char* verdictName(Verdict v) {
  static const char* const names[] = {"compressed", "disabled", "type", "op", "below min bytes",
                                      "rule", "graph capture", "multi-comm group", "not agreed across ranks"};
  const int i = static_cast<int>(v);
  return i >= 0 && i < static_cast<int>(Verdict::NumVerdicts) ? names[i] : "?";
}

uint64_t Policy::digest() const {
  uint64_t h = 14695981039346656037ull;
  mix(h, enabled);
  mix(h, minBytes);
  for (const auto* terms : {&allow, &deny}) {
    mix(h, terms->size());
    for (const Term& t : *terms) {
      mix(h, static_cast<uint64_t>(t.subject));
      mix(h, t.range.lo);
      mix(h, t.range.hi);
    }
  }
  return h;
}

Verdict Policy::decide(const CallFacts& call) const {
  if (!enabled) return Verdict::Disabled;
  if (!call.typeSupported) return Verdict::Type;
  if (!call.opSupported) return Verdict::Op;
  if (call.bytes == 0 || call.bytes < minBytes) return Verdict::Small;
  for (const Term& t : deny)
    if (holds(t, call)) return Verdict::Rule;
  for (const Term& t : allow)
    if (!holds(t, call)) return Verdict::Rule;
  if (call.capturing && !call.captureReady) return Verdict::Capturing;
  return Verdict::Compress;
}

bool parsePolicy(const PolicyText& text, bool enabledByDefault, Policy* out, std::string* error) {
  Policy p;
  p.enabled = enabledByDefault;
  if (text.enable && *text.enable) {
    if (std::strcmp(text.enable, "0") != 0 && std::strcmp(text.enable, "1") != 0) {
      *error = std::string(text.enableName) + ": '" + text.enable + "' is not 0 or 1";
      return false;
    }
    p.enabled = text.enable[0] == '1';
  }
  if (text.minBytes && *text.minBytes && !parseAmount(text.minBytes, &p.minBytes)) {
    *error = std::string("DCT_PRELOAD_MIN_BYTES: '") + text.minBytes + "' is not a byte count (e.g. 4M)";
    return false;
  }
  if (text.allow && !parseTerms("DCT_PRELOAD_ALLOW", text.allow, &p.allow, error)) return false;
  if (text.deny && !parseTerms("DCT_PRELOAD_DENY", text.deny, &p.deny, error)) return false;
  *out = p;
  return true;
}

Policy policyFromEnv(const char* shim, const char* switchVar) {
  PolicyText text{"DCT_PRELOAD", std::getenv("DCT_PRELOAD"), std::getenv("DCT_PRELOAD_MIN_BYTES"),
                  std::getenv("DCT_PRELOAD_ALLOW"), std::getenv("DCT_PRELOAD_DENY")};
  Policy p;
  std::string error;
  if (!parsePolicy(text, true, &p, &error)) {
    DCT_WARN("%s: %s; compression disabled, every call goes to the layer below", shim, error.c_str());
    p.enabled = false;
    return p;
  }
  if (switchVar != nullptr) {
    Policy on;
    if (!parsePolicy(PolicyText{switchVar, std::getenv(switchVar)}, false, &on, &error)) {
      DCT_WARN("%s: %s; compression disabled", shim, error.c_str());
      on.enabled = false;
    }
    p.enabled = p.enabled && on.enabled;
  }
  return p;
}

}  // namespace dct::preload
