// Which intercepted allreduce calls the drop-in shims compress. Every input
// of the decision is the same on every rank of a correct program (count,
// type, op, communicator size, the call's position on its communicator), so
// all ranks take the same branch; buffer addresses never enter it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dct::preload {

// A closed range [lo, hi] of a rule term; "A-", "-B", "A" and "A-B" parse.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = UINT64_MAX;
  bool contains(uint64_t v) const { return v >= lo && v <= hi; }
};

enum class Subject { CommSize, CallIndex, Bytes };
struct Term {
  Subject subject;
  Range range;
};

// What the shim knows about one call.
struct CallFacts {
  int commSize = 1;
  uint64_t callIndex = 0;  // 0-based, per communicator, every allreduce counted
  uint64_t bytes = 0;
  bool typeSupported = false;
  bool opSupported = false;
  bool capturing = false;  // inside CUDA graph capture (NCCL only)
  // Under capture: libdct can queue this call's step with nothing waiting
  // for the host (its compressor is in the fixed-capacity mode and past its
  // first step: Session::captureReady), so it may compress.
  bool captureReady = false;
};

// Why a call was compressed or passed to the layer below, in the order the
// checks run.
enum class Verdict {
  Compress,
  Disabled,    // DCT_PRELOAD=0 (or the MPI shim without DCT_MPI_COMPRESS=1), or bad settings
  Type,        // not a floating type libdct compresses
  Op,          // not a sum (or average)
  Small,       // fewer than DCT_PRELOAD_MIN_BYTES bytes
  Rule,        // DCT_PRELOAD_DENY matched, or DCT_PRELOAD_ALLOW did not
  Capturing,   // CUDA graph capture: NCCL itself must run it
  MultiComm,   // an NCCL group with several communicators (one thread, several GPUs)
  Disagree,    // the ranks' policies differ, libdct could not wrap the communicator on some
               // rank, or no agreement yet (NCCL: calls inside a group before the first outside)
  NumVerdicts
};
const char* verdictName(Verdict v);

struct Policy {
  bool enabled = true;
  uint64_t minBytes = 1ull << 20;
  std::vector<Term> allow;  // a call must satisfy every term
  std::vector<Term> deny;   // a call satisfying any term passes through
  Verdict decide(const CallFacts& call) const;
  // Equal on ranks whose policies are equal: the shims compare it once per
  // communicator (Session::admit).
  uint64_t digest() const;
};

// The policy from raw setting strings (nullptr = unset). `enable` is the
// on/off switch ("0" or "1"; unset = `enabledByDefault`). A malformed
// setting returns false with the reason in *error.
struct PolicyText {
  const char* enableName = "DCT_PRELOAD";
  const char* enable = nullptr;
  const char* minBytes = nullptr;
  const char* allow = nullptr;
  const char* deny = nullptr;
};
bool parsePolicy(const PolicyText& text, bool enabledByDefault, Policy* out, std::string* error);

// parsePolicy over DCT_PRELOAD, DCT_PRELOAD_MIN_BYTES, DCT_PRELOAD_ALLOW and
// DCT_PRELOAD_DENY; `switchVar` (DCT_MPI_COMPRESS for the MPI shim) must
// also be "1" when given. Bad settings disable the shim with a WARN line.
Policy policyFromEnv(const char* shim, const char* switchVar);

}  // namespace dct::preload
