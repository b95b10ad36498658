// The MPI transport past MPI's int counts (the count limit lowered by
// setMpiCountLimitForTesting): no size limit leaks (transport.h), split ops
// give the bytes the unsplit ones give, and sizes that cannot be expressed
// fail alike on every rank with a clear error instead of wrapping.
#include <doctest/doctest.h>
#include <mpi.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "exchange_util.h"
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

namespace {

// Address space of `bytes` whose pages cost nothing until touched (so a
// block can sit past 2^31 without 2 GiB of memory per rank).
class Sparse {
 public:
  explicit Sparse(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ptr_ = p == MAP_FAILED ? nullptr : static_cast<unsigned char*>(p);
  }
  ~Sparse() {
    if (ptr_) munmap(ptr_, bytes_);
  }
  Sparse(const Sparse&) = delete;
  Sparse& operator=(const Sparse&) = delete;
  unsigned char* get() const { return ptr_; }

 private:
  size_t bytes_;
  unsigned char* ptr_ = nullptr;
};

constexpr size_t k31 = size_t{1} << 31, k32 = size_t{1} << 32;

// An alltoallv whose blocks for rank q lie at sendAt + q * stride of a
// sparse buffer (3 + q bytes each), received packed.
void farAlltoallv(const World& w, size_t sendAt, size_t stride) {
  const int P = w.size, me = w.rank;
  const size_t span = sendAt + stride * P + 64;
  Sparse send(span);
  REQUIRE(send.get() != nullptr);
  std::vector<size_t> sendBytes(P), sendOffsets(P), recvBytes(P), recvOffsets(P);
  size_t total = 0, r = 0;
  for (int q = 0; q < P; q++) {
    sendBytes[q] = 3 + q;
    sendOffsets[q] = sendAt + q * stride;
    for (size_t b = 0; b < sendBytes[q]; b++) send.get()[sendOffsets[q] + b] = pattern(me, q, b);
    recvBytes[q] = 3 + me;
    recvOffsets[q] = r;
    r += recvBytes[q];
    total += P * (3 + q);
  }
  std::vector<unsigned char> recv(r, 0xEE);
  const dctResult_t res = w.comm->transport->alltoallv(w.comm, send.get(), sendBytes.data(), sendOffsets.data(),
                                                       recv.data(), recvBytes.data(), recvOffsets.data(), total,
                                                       nullptr);
  CHECK(res == dctSuccess);
  bool ok = true;
  for (int q = 0; q < P; q++)
    for (size_t b = 0; b < recvBytes[q]; b++) ok = ok && recv[recvOffsets[q] + b] == pattern(q, me, b);
  CHECK(ok);
}

// Every rank fails alike, with a message naming the op.
void allRefuse(const World& w, dctResult_t res, const char* what) {
  CAPTURE(what);
  CHECK(res == dctInvalidArgument);
  CHECK(allTrue(res == dctInvalidArgument));
  CHECK(std::strstr(dctGetLastError(w.comm), what) != nullptr);
}

}  // namespace

TEST_CASE("alltoallv: displacements past 2^31 and 2^32 become ints counted from the first block") {
  World w;
  farAlltoallv(w, k31 + 5, 16);
  farAlltoallv(w, k32 + 1, 1000);
}

TEST_CASE("alltoallv: blocks further apart than int displacements go packed") {
  World w;
  {
    ScopedLimit scoped(40);  // the total fits, the spread of a rank's blocks does not
    farAlltoallv(w, 3, 100);
  }
  if (w.size > 1) farAlltoallv(w, 0, k31);  // the real limit: blocks 2^31 apart
}

TEST_CASE("allgatherv: offsets past 2^31, rebased or split") {
  World w;
  const int P = w.size;
  for (size_t limit : {size_t(0), size_t(40)}) {
    CAPTURE(limit);
    ScopedLimit scoped(limit);
    Sparse recv(k31 + 64 * P + 64);
    REQUIRE(recv.get() != nullptr);
    std::vector<size_t> bytes(P), offsets(P);
    for (int q = 0; q < P; q++) {
      bytes[q] = 5 + 3 * q;
      offsets[q] = k31 + 64 * q;
    }
    std::vector<unsigned char> mine(bytes[w.rank]);
    for (size_t b = 0; b < mine.size(); b++) mine[b] = pattern(w.rank, 0, b);
    CHECK(w.comm->transport->allgatherv(w.comm, mine.data(), mine.size(), recv.get(), bytes.data(), offsets.data(),
                                        nullptr) == dctSuccess);
    bool ok = true;
    for (int q = 0; q < P; q++)
      for (size_t b = 0; b < bytes[q]; b++) ok = ok && recv.get()[offsets[q] + b] == pattern(q, 0, b);
    CHECK(ok);
  }
}

TEST_CASE("allreduce and reduce: count x element size past SIZE_MAX fails on every rank, nothing read") {
  World w;
  float x[2] = {1, 2}, y[2] = {0, 0};
  for (size_t count : {SIZE_MAX / 4 + 2, SIZE_MAX, SIZE_MAX / 2 + 1}) {
    CAPTURE(count);
    allRefuse(w, w.comm->transport->allreduce(w.comm, x, y, count, dctFloat32, nullptr), "allreduce");
    allRefuse(w, w.comm->transport->allreduce(w.comm, y, y, count, dctFloat32, nullptr), "allreduce");
    allRefuse(w, w.comm->transport->reduce(w.comm, x, y, count, dctFloat32, 0, nullptr), "reduce");
  }
  allRefuse(w, w.comm->transport->allreduce(w.comm, x, y, SIZE_MAX / 8 + 1, dctFloat64, nullptr), "allreduce");
  allRefuse(w, w.comm->transport->allreduce(w.comm, x, y, SIZE_MAX / 2 + 1, dctFloat16, nullptr), "allreduce");
  CHECK(y[0] == 0);
  // The comm still works, and a lowered limit below one element still moves one per call.
  ScopedLimit scoped(1);
  CHECK(w.comm->transport->allreduce(w.comm, x, y, 2, dctFloat32, nullptr) == dctSuccess);
  CHECK(y[0] == static_cast<float>(w.size));
  CHECK(y[1] == static_cast<float>(2 * w.size));
}

TEST_CASE("allgather and alltoall: bytes x ranks past SIZE_MAX fails on every rank") {
  World w;
  if (w.size < 2) return;  // bytes x 1 always fits
  unsigned char in[8] = {}, out[64] = {};
  for (size_t bytes : {SIZE_MAX / w.size + 1, SIZE_MAX / 2 + 1, SIZE_MAX}) {
    CAPTURE(bytes);
    allRefuse(w, w.comm->transport->allgather(w.comm, in, out, bytes, nullptr), "allgather");
    allRefuse(w, w.comm->transport->alltoall(w.comm, in, out, bytes, nullptr), "alltoall");
  }
}

TEST_CASE("alltoallv: a layout whose offset + bytes wraps fails on that rank, the others finish") {
  World w;
  const int P = w.size;
  for (size_t limit : {size_t(0), size_t(7)})
    for (int bad = 0; bad < P; bad++) {
      CAPTURE(limit);
      CAPTURE(bad);
      ScopedLimit scoped(limit);
      Alltoall a(w.rank, P);
      std::vector<size_t> recvOffsets = a.recvOffsets;
      if (w.rank == bad) recvOffsets[(bad + 1) % P] = SIZE_MAX - 1;  // no buffer holds this block
      a.recv.assign(a.recv.size(), 0xEE);
      const dctResult_t res =
          w.comm->transport->alltoallv(w.comm, a.send.data(), a.sendBytes.data(), a.sendOffsets.data(),
                                       a.recv.data(), a.recvBytes.data(), recvOffsets.data(), a.total, nullptr);
      if (w.rank == bad) {
        CHECK(res == dctInvalidArgument);
        CHECK(std::strstr(dctGetLastError(w.comm), "alltoallv") != nullptr);
      } else {
        CHECK(res == dctSuccess);
        CHECK(a.okFrom(w.rank, bad));
      }
      // The comm's next exchange is exact everywhere.
      CHECK(w.comm->transport->alltoallv(w.comm, a.send.data(), a.sendBytes.data(), a.sendOffsets.data(),
                                         a.recv.data(), a.recvBytes.data(), a.recvOffsets.data(), a.total,
                                         nullptr) == dctSuccess);
      CHECK(allTrue(a.ok(w.rank)));
    }
}
