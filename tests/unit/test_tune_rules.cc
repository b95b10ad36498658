// DCT_TUNE's rules: parsed strictly, matched first-rule-wins on half-open
// size and density ranges, fingerprinted so that equal rules agree.
#include <doctest/doctest.h>

#include <string>

#include "base/tune_rules.h"

using namespace dct;

namespace {

TuneRules parsed(const char* text) {
  TuneRules r;
  const std::string error = parseTuneRules(text, &r);
  CAPTURE(text);
  CHECK(error.empty());
  return r;
}

}  // namespace

TEST_CASE("sizes with K/M/G suffixes, open ends and * cover half-open ranges") {
  const TuneRules r = parsed("0-256K:dense, 256K-64M:allgather, 64M-:split");
  CHECK(r.algorithmFor(0, 0.01) == 2);
  CHECK(r.algorithmFor(256 * 1024 - 1, 0.01) == 2);
  CHECK(r.algorithmFor(256 * 1024, 0.01) == 1);
  CHECK(r.algorithmFor(64ull << 20, 0.01) == 3);
  CHECK(r.algorithmFor(5ull << 30, 0.01) == 3);
  CHECK(parsed("-1G:auto").algorithmFor(0, 1.0) == 0);
  CHECK(parsed("*:Dense").algorithmFor(123, 0.5) == 2);
}

TEST_CASE("the first rule that covers a step decides it; none covers: -1") {
  const TuneRules r = parsed("1M-@0.1-:dense,1M-@-0.1:split,*@0.3-:allgather");
  CHECK(r.algorithmFor(1u << 20, 0.1) == 2);
  CHECK(r.algorithmFor(1u << 20, 0.0999) == 3);
  CHECK(r.algorithmFor(1000, 0.5) == 1);
  CHECK(r.algorithmFor(1000, 0.01) == -1);
}

TEST_CASE("unset or blank is no rule; a malformed string says what is wrong") {
  TuneRules r;
  CHECK(parseTuneRules(nullptr, &r).empty());
  CHECK(parseTuneRules("  ", &r).empty());
  CHECK(r.rules.empty());
  CHECK(r.text.empty());
  const char* const bad[] = {"dense",      "0-1M",        "0-1M:fast",  "1M-0:dense", "x-1M:dense",
                             "0-1Q:dense", "0-1M@2:dense", "0-1M@0.5-0.1:dense", "0-1M:dense,", "1M:dense",
                             "0-1M@-:dense,-", "0-1.5M:dense", "-1-2K:dense"};
  for (const char* text : bad) {
    CAPTURE(text);
    const std::string error = parseTuneRules(text, &r);
    CHECK(error.find("DCT_TUNE='") == 0);
  }
}

TEST_CASE("an unknown algorithm's error names every algorithm") {
  TuneRules r;
  const std::string error = parseTuneRules("0-1M:fast", &r);
  for (const char* name : kAlgorithmNames) {
    CAPTURE(name);
    CHECK(error.find(name) != std::string::npos);
  }
}

TEST_CASE("equal rules have equal fingerprints, however written; different rules differ") {
  CHECK(parsed("0-256K:dense").fingerprint() == parsed(" 0 - 262144 : DENSE ").fingerprint());
  CHECK(parsed("0-256K:dense").fingerprint() != parsed("0-256K:split").fingerprint());
  CHECK(parsed("0-256K:dense").fingerprint() != parsed("0-256K@-0.5:dense").fingerprint());
}
