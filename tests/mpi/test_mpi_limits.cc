// The MPI transport past MPI's int counts (the count limit lowered by
// setMpiCountLimitForTesting): no size limit leaks (transport.h), split ops
// give the bytes the unsplit ones give, and sizes that cannot be expressed
// fail alike on every rank with a clear error instead of wrapping.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

// The count limit for a scope (0: MPI's own).
class ScopedLimit {
 public:
  explicit ScopedLimit(size_t limit) { dct::setMpiCountLimitForTesting(limit); }
  ~ScopedLimit() { dct::setMpiCountLimitForTesting(0); }
  ScopedLimit(const ScopedLimit&) = delete;
  ScopedLimit& operator=(const ScopedLimit&) = delete;
};

unsigned char pattern(int from, int to, size_t b) { return static_cast<unsigned char>(29 * from + 13 * to + 5 * b + 3); }

// alltoall of `bytes` per rank under `limit` (0: unsplit).
std::vector<unsigned char> alltoall(const World& w, size_t bytes, size_t limit, dctResult_t& res) {
  const int P = w.size;
  std::vector<unsigned char> send(bytes * P), recv(bytes * P, 0xEE);
  for (int q = 0; q < P; q++)
    for (size_t b = 0; b < bytes; b++) send[q * bytes + b] = pattern(w.rank, q, b);
  ScopedLimit scoped(limit);
  res = w.comm->transport->alltoall(w.comm, send.data(), recv.data(), bytes, nullptr);
  return recv;
}

}  // namespace

TEST_CASE("alltoall past the count limit splits instead of refusing: the same bytes as unsplit") {
  World w;
  REQUIRE(static_cast<bool>(w.comm->transport->alltoall));
  for (size_t bytes : {size_t(1), size_t(16), size_t(37)})
    for (size_t limit : {size_t(1), size_t(7), size_t(16), size_t(16 * w.size - 1), size_t(16 * w.size)}) {
      CAPTURE(bytes);
      CAPTURE(limit);
      dctResult_t whole = dctInternalError, split = dctInternalError;
      const std::vector<unsigned char> expect = alltoall(w, bytes, 0, whole);
      const std::vector<unsigned char> got = alltoall(w, bytes, limit, split);
      CHECK(whole == dctSuccess);
      CHECK(split == dctSuccess);
      CHECK(got == expect);
      for (int q = 0; q < w.size; q++) CHECK(got[q * bytes] == pattern(q, w.rank, 0));
    }
}
