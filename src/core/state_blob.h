// The byte layout of a saved compressor state (dctCompressorSaveState), and
// its parsing with every check that needs no compressor:
//
//   header    magic, format version, total bytes, checksum of the rest
//   identity  count, types, comm size and rank, the resolved config fields
//             that shape results (StateIdentity)
//   scalars   statistics, tau schedule, auto's message history, the flags
//             that go with the arrays (StateScalars); version 2 adds a
//             1-bit compressor's segments and their pending scales (a
//             state with one segment is written as version 1); 3 and 4
//             are 1 and 2 written since dctNumAlgorithms, which a 1-bit
//             step reports in stats.algorithm, became 6
//             (dctAlgoRecursiveDoubling took 5); 5 and 6 are 3 and 4 with
//             the owner's drift flag (the fixed-capacity global top-k's
//             schedule)
//   arrays    8-byte aligned, in the accumulation type: the worker residual
//             (count), the 1-bit server error (this rank's chunk, when set
//             up), the global top-k owner residual (its range, when nonzero)
//
// Fixed-width fields in the host's byte order: a blob from a host of the
// other order reads its magic swapped and is refused as such.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/compressor.h"

namespace dct {

constexpr uint32_t kStateMagic = 0x53544344u;  // "DCTS" on little-endian hosts
constexpr uint32_t kStateVersion = 6;  // the newest; 1 to 5 are read too
inline bool stateHasSegments(uint32_t version) { return version == 2 || version == 4 || version == 6; }
inline bool stateHasOwnerDrift(uint32_t version) { return version >= 5; }
constexpr size_t kStateHeaderBytes = 24;       // magic, version, bytes, checksum

// What a state must match to load: the compressor's shape and the resolved
// config fields that shape its results (rowSelection, the all-to-all's, does
// not).
struct StateIdentity {
  uint64_t count = 0;
  int32_t dtype = 0, accType = 0, wireType = 0;
  int32_t ranks = 1, rank = 0;
  double density = 0;
  int32_t thresholdInterval = 0, errorFeedback = 0, warmupSteps = 0, thresholdMethod = 0, algorithm = 0,
          compressor = 0, autoGlobalTopk = 0;
  int64_t seed = 0;
};

struct StateScalars {
  dctStats_t stats{};
  TauState tau;
  // Auto's forecast and the pipeline's slot history (not the tuner).
  uint64_t lastStepNs = 0, lastLocalNs = 0;
  std::vector<RankMessage> lastMessages;
  std::vector<uint64_t> chunkNeeds;
  uint64_t chunkElems = 0;
  // With the worker residual.
  bool residualZero = true;
  bool onebitPending = false;  // the residual holds the x the error is formed from
  double onebitPendingScale = 0;
  // With the server error (serverPresent: the 1-bit state is set up).
  bool serverPresent = false, serverPending = false;
  double serverPendingScale = 0;
  // With the owner residual.
  uint64_t ownerBegin = 0, ownerLength = 0;
  bool ownerZero = true;
  double ownerTau = 0;
  bool ownerHaveTau = false;
  uint64_t ownerLastEstimateStep = 0;
  bool ownerDriftPending = false;  // version 5 on
  // Version 2: a 1-bit compressor's segments (dctCompressorSetSegments;
  // empty: one) and the pending scales per segment and per server piece.
  std::vector<uint64_t> segments;
  std::vector<double> pendingScales, serverPendingScales;
};

struct SavedState {
  uint32_t version = 5;  // 6 with segments
  StateIdentity id;
  StateScalars s;
  // Array lengths in elements of id.accType, their offsets, and the total.
  uint64_t residualElems = 0, serverElems = 0, ownerElems = 0;
  size_t residualAt = 0, serverAt = 0, ownerAt = 0;
  size_t bytes = 0;
};

// Sets the arrays' offsets and the total size from their lengths.
void layOutState(SavedState& state);
// Writes the header and scalars into out (state.bytes long); the caller
// fills the arrays at their offsets, then seals (the checksum).
void writeState(const SavedState& state, unsigned char* out);
void sealState(unsigned char* out, size_t bytes);
// Parses a blob and checks what needs no compressor: size, magic, version,
// checksum, every field's range, array lengths against the scalars, and
// (verifyArrays) finite arrays. false: why says what is wrong.
bool readState(const unsigned char* in, size_t bytes, SavedState& state, std::string& why, bool verifyArrays = true);

}  // namespace dct
