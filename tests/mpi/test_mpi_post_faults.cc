// A failed MPI_Isend/MPI_Irecv post in the MPI transport's nonblocking
// exchanges (iallgatherv, ialltoallv, the split alltoallv): the rank whose
// post fails still completes every send and receive of that exchange, so no
// peer is stranded and the next exchange on the comm matches its own
// messages. The n-th post fails on one rank or on all (transport/
// mpi_post_fault.h), for every n, at int-sized and split (piecewise) sizes.
// A hang is a failure: a watchdog ends the process.
#include <doctest/doctest.h>
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "exchange_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/mpi_limits.h"
#include "transport/mpi_post_fault.h"

using namespace dcttest;

namespace {

// Ends the process (so mpirun ends the job) unless destroyed within `limit`:
// a stranded peer would otherwise spin until the CTest timeout.
class Watchdog {
 public:
  explicit Watchdog(const char* what, std::chrono::seconds limit = std::chrono::seconds(30))
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "test_mpi_post_faults: %s did not complete (a peer was stranded)\n", what);
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Tests a request until done (yielding: ranks share cores).
dctResult_t finish(const World& w, void* request) {
  for (;;) {
    int done = 0;
    const dctResult_t res = w.comm->transport->test(w.comm, request, &done);
    if (done) return res;
    std::this_thread::yield();
  }
}

// One exchange: post() starts it (a request, or null when done or failed),
// check() says whether this rank received what every peer sent.
struct Exchange {
  std::function<dctResult_t(void**)> post;
  std::function<bool()> check;
};

// iallgatherv: rank r sends 13 + 5r bytes into blocks of capacity 40.
Exchange gatherv(const World& w, std::vector<unsigned char>& buf, std::vector<size_t>& caps,
                 std::vector<size_t>& offsets) {
  const int P = w.size;
  constexpr size_t kCap = 40;
  caps.assign(P, kCap);
  offsets.resize(P);
  for (int r = 0; r < P; r++) offsets[r] = r * kCap;
  auto len = [](int r) { return size_t(13 + 5 * r) < kCap ? size_t(13 + 5 * r) : kCap; };
  Exchange e;
  e.post = [&w, &buf, &caps, &offsets, len, P](void** request) {
    buf.assign(P * kCap, 0xEE);
    std::vector<unsigned char> mine(len(w.rank));
    for (size_t b = 0; b < mine.size(); b++) mine[b] = pattern(w.rank, 0, b);
    return w.comm->transport->iallgatherv(w.comm, mine.data(), mine.size(), buf.data(), caps.data(), offsets.data(),
                                          request);
  };
  e.check = [&buf, &offsets, len, P] {
    for (int r = 0; r < P; r++)
      for (size_t b = 0; b < len(r); b++)
        if (buf[offsets[r] + b] != pattern(r, 0, b)) return false;
    return true;
  };
  return e;
}

Exchange ialltoallv(const World& w, Alltoall& a) {
  Exchange e;
  e.post = [&w, &a](void** request) {
    a.recv.assign(a.recv.size(), 0xEE);
    return w.comm->transport->ialltoallv(w.comm, a.send.data(), a.sendBytes.data(), a.sendOffsets.data(),
                                         a.recv.data(), a.recvBytes.data(), a.recvOffsets.data(), request);
  };
  e.check = [&w, &a] { return a.ok(w.rank); };
  return e;
}

// The blocking alltoallv, whose split path (past the count limit) posts too.
Exchange alltoallv(const World& w, Alltoall& a) {
  Exchange e;
  e.post = [&w, &a](void** request) {
    *request = nullptr;
    a.recv.assign(a.recv.size(), 0xEE);
    return w.comm->transport->alltoallv(w.comm, a.send.data(), a.sendBytes.data(), a.sendOffsets.data(),
                                        a.recv.data(), a.recvBytes.data(), a.recvOffsets.data(), a.total, nullptr);
  };
  e.check = [&w, &a] { return a.ok(w.rank); };
  return e;
}

dctResult_t run(const World& w, const Exchange& e) {
  void* request = nullptr;
  const dctResult_t posted = e.post(&request);
  const dctResult_t done = finish(w, request);
  return posted != dctSuccess ? posted : done;
}

bool anyRank(bool mine) { return !allTrue(!mine); }

// Post `n` (counted from the start of `e`) fails on `victim` (-1: on every
// rank). With `before`, an exchange posted ahead of `e` is still in flight
// while `e` posts. Returns whether the fault fired anywhere.
bool postFault(const World& w, const Exchange& e, int victim, uint64_t n, const Exchange* before) {
  const bool armed = victim < 0 || victim == w.rank;
  dctResult_t res = dctSuccess, first = dctSuccess;
  bool fired = false;
  {
    Watchdog dog("an exchange with a failed post");
    void *early = nullptr, *request = nullptr;
    if (before) first = before->post(&early);
    if (armed) dct::armMpiPostFault(n);
    const dctResult_t posted = e.post(&request);
    fired = armed && !dct::mpiPostFaultArmed();
    dct::armMpiPostFault(UINT64_MAX);
    if (before && first == dctSuccess) first = finish(w, early);
    const dctResult_t done = finish(w, request);
    res = posted != dctSuccess ? posted : done;
  }
  const bool any = anyRank(fired);
  if (before) {
    CHECK(first == dctSuccess);
    CHECK(before->check());
  }
  if (!any) {
    CHECK(res == dctSuccess);
    CHECK(e.check());
    return false;
  }
  if (fired) CHECK(res == dctTransportError);
  else {
    CHECK(res == dctSuccess);
    CHECK(e.check());  // the failed rank still sent its data
  }
  // The caller's vote fails every rank; the comm's next exchange is exact.
  CHECK(anyRank(res != dctSuccess));
  Watchdog dog("the exchange after a failed post");
  CHECK(run(w, e) == dctSuccess);
  CHECK(allTrue(e.check()));
  return true;
}

// Every post in turn on every rank in turn, then on all ranks at once.
void everyPost(const World& w, const Exchange& e, const Exchange* before = nullptr) {
  for (int victim = -1; victim < w.size; victim++)
    for (uint64_t n = 0;; n++) {
      CAPTURE(victim);
      CAPTURE(n);
      REQUIRE(n < 1000);
      if (!postFault(w, e, victim, n, before)) break;
    }
}

void everyExchange(const World& w) {
  std::vector<unsigned char> buf, buf2;
  std::vector<size_t> caps, offsets, caps2, offsets2;
  Alltoall a(w.rank, w.size), b(w.rank, w.size);
  SUBCASE("iallgatherv") { everyPost(w, gatherv(w, buf, caps, offsets)); }
  SUBCASE("iallgatherv behind another in flight") {
    const Exchange ahead = gatherv(w, buf2, caps2, offsets2);
    everyPost(w, gatherv(w, buf, caps, offsets), &ahead);
  }
  SUBCASE("ialltoallv") { everyPost(w, ialltoallv(w, a)); }
  SUBCASE("ialltoallv behind another in flight") {
    const Exchange ahead = ialltoallv(w, b);
    everyPost(w, ialltoallv(w, a), &ahead);
  }
  SUBCASE("alltoallv") { everyPost(w, alltoallv(w, a)); }
}

}  // namespace

TEST_CASE("a failed post on one rank or all: every rank completes, the next exchange is exact") {
  World w;
  everyExchange(w);
}

TEST_CASE("a failed post in the split (piecewise) exchanges") {
  World w;
  dct::setMpiCountLimitForTesting(7);
  everyExchange(w);
  dct::setMpiCountLimitForTesting(0);
}
