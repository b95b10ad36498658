// An adversarial peer, test-only: a callbacks comm (dctCommInitCallbacks)
// whose data ops run the real exchange over MPI, except that on one chosen
// rank one chosen data op corrupts what that rank SENDS: a copy of its send
// buffer is damaged before it goes out, so every receiver (the sender too,
// where it gathers its own block) sees the same bad bytes. The headers and
// size tables the library announces travel through the same data ops, so
// sizes, counts, header fields, index streams and values are all reached.
//
// The wire is modelled as MPI moves bytes: a receiver gets what the sender
// actually sent (fewer bytes than it expected: the rest zero; more: the op
// fails on that receiver, as MPI_ERR_TRUNCATE would, after taking part).
//
// Votes (voteMax) are never corrupted: the vote is the library's trusted
// channel (a peer that lies in its vote can make the others fail or, by
// voting success, only hide its own failure), so the adversary lies only in
// data.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dct/dct.h"

namespace dcttest::adversary {

enum class Kind : int {
  BitFlips,     // 1-3 random bits
  Word64,       // an aligned 64-bit word (a size, count, offset) set to a bad value
  Word32,       // an aligned 32-bit word (a count, header field, index) likewise
  RandomBlock,  // a run of random bytes
  Truncate,     // zeros from the offset on
  Insert,       // random bytes inserted at the offset, the rest shifted (length kept)
  SwapWords,    // two 32-bit words swapped (an index stream out of order)
  ShortSend,    // only the bytes before the offset go out (receivers: zeros after)
  ExtraSend,    // random bytes sent past the end (receivers: a truncation error)
  WholeRandom,  // the whole buffer random
  kCount
};
const char* kindName(Kind k);

// Which op of which rank, and how.
struct Attack {
  int rank = -1;      // the corrupting rank (-1: none)
  long op = -1;       // its data op (allgather, allgatherv, alltoallv, allreduceSum), counted from 0
  Kind kind = Kind::BitFlips;
  uint64_t offset = 0;  // reduced modulo the buffer's length when it fires
  uint64_t bits = 0;    // the random stream of the corruption
  bool exact = false;   // Word64 / Word32: set the word to `value` (targeted tests)
  uint64_t value = 0;
};

class Adversary {
 public:
  Adversary();  // collective over MPI_COMM_WORLD
  ~Adversary();
  Adversary(const Adversary&) = delete;
  Adversary& operator=(const Adversary&) = delete;

  dctComm_t comm() const { return comm_; }
  // Starts a case: op counter at 0, the attack armed (rank -1: clean).
  void arm(const Attack& a);
  long ops() const { return ops_; }    // data ops this rank ran since arm()
  bool fired() const { return fired_; }  // the attack has damaged a send
  std::string fireNote() const { return note_; }

  // Callback state (public for the C callbacks).
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, size = 1;
  Attack attack;
  long ops_ = 0;
  bool fired_ = false;
  std::string note_;

 private:
  dctComm_t comm_ = nullptr;
};

// A seeded input with some exact zeros and, rarely, a NaN (the fuzzer's
// and the targeted cases' gradients).
inline std::vector<float> gradient(size_t n, uint64_t seed, int rank, int step) {
  std::mt19937_64 rng(seed * 1000003 + rank * 7919 + step);
  std::normal_distribution<float> d;
  std::vector<float> g(n);
  for (float& x : g) x = rng() % 5 == 0 ? 0.0f : d(rng);
  return g;
}

}  // namespace dcttest::adversary
