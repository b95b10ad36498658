// The CPU twin's worker pool and its scratch buffers under failure: a body
// that throws (on a worker or on the caller) never terminates the process
// nor leaves a worker in a finished call, an exception inside a kernel
// comes back from the ops table as an error code, growing a Buffer never
// throws, and a forked child exits without joining workers it does not
// have. Run with DCT_NUM_THREADS=4 (tests/CMakeLists.txt).
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "base/buffer.h"
#include "kernels/kernels.h"
#include "kernels/no_throw.h"
#include "kernels/thread_pool.h"

using dct::ThreadPool;

namespace {

constexpr size_t kItems = 4000;

// Every chunk but the one of `thrower` counts its items; the thrower's
// chunk throws once it is half done.
void countOrThrow(int thrower, std::atomic<size_t>& done, size_t begin, size_t end, int worker) {
  for (size_t i = begin; i < end; i++) {
    if (worker == thrower && i == (begin + end) / 2) throw std::runtime_error("body failed");
    if (worker != thrower) std::this_thread::sleep_for(std::chrono::microseconds(20));
    done++;
  }
}

// Whether `fn`, run in a forked child, exits with status 0 within the time
// limit (a child that hangs is killed).
template <typename Fn>
bool childExitsCleanly(Fn&& fn) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    fn();
    std::exit(0);  // runs the static destructors, the pool's among them
  }
  for (int waited = 0; waited < 200; waited++) {  // 10 s
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

dctResult_t throwsBadAlloc(int) { throw std::bad_alloc(); }
dctResult_t throwsOther(int) { throw std::runtime_error("kernel failed"); }
dctResult_t succeeds(int x) { return x == 1 ? dctSuccess : dctInvalidArgument; }

// parallelFor whose body throws on worker `thrower` (0: the caller): it
// must throw, after every other chunk finished (counted in `done`).
void throwsAfterOthers(int thrower, std::atomic<size_t>& done) {
  ThreadPool& pool = ThreadPool::instance();
  REQUIRE(pool.size() > 1);
  const size_t perChunk = kItems / pool.workersFor(kItems, 1);
  CHECK_THROWS_AS(
      pool.parallelFor(kItems, 1, [&](size_t b, size_t e, int w) { countOrThrow(thrower, done, b, e, w); }),
      std::runtime_error);
  CHECK(done.load() >= kItems - perChunk - 1);
}

}  // namespace

TEST_CASE("a body that throws on a worker: rethrown on the caller once every chunk is done") {
  ThreadPool& pool = ThreadPool::instance();
  std::atomic<size_t> done{0};
  throwsAfterOthers(1, done);  // all other chunks finished before the rethrow
  // The pool is still usable.
  std::atomic<size_t> again{0};
  pool.parallelFor(kItems, 1, [&](size_t b, size_t e, int) { again += e - b; });
  CHECK(again.load() == kItems);
}

TEST_CASE("a body that throws on the caller: the workers finish before parallelFor unwinds") {
  std::atomic<size_t> done{0};
  throwsAfterOthers(0, done);
  const size_t atReturn = done.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(done.load() == atReturn);  // nothing still runs on the unwound frame
}

TEST_CASE("exceptions never cross the ops table") {
  CHECK(dct::NoThrow<throwsBadAlloc>::call(0) == dctOutOfMemory);
  CHECK(dct::NoThrow<throwsOther>::call(0) == dctInternalError);
  CHECK(dct::NoThrow<succeeds>::call(1) == dctSuccess);
  CHECK(dct::NoThrow<succeeds>::call(2) == dctInvalidArgument);
}

TEST_CASE("Buffer::reserve reports dctOutOfMemory instead of throwing, and keeps its contents") {
  dct::Buffer b;
  REQUIRE(b.reserve(64) == dctSuccess);
  b.as<char>()[0] = 'x';
  dctResult_t res = dctSuccess;
  CHECK_NOTHROW(res = b.reserve(size_t(1) << 62, 1));
  CHECK(res == dctOutOfMemory);
  CHECK(b.capacity() >= 64);
  CHECK(b.capacity() < (size_t(1) << 62));
  CHECK(b.as<char>()[0] == 'x');
}

TEST_CASE("a forked child of a process with a running pool exits without hanging") {
  ThreadPool& pool = ThreadPool::instance();
  REQUIRE(pool.size() > 1);
  std::atomic<size_t> items{0};
  pool.parallelFor(kItems, 1, [&](size_t b, size_t e, int) { items += e - b; });  // the workers are up
  CHECK(childExitsCleanly([] {}));
  // The child's calls run inline, and its exit still joins nothing.
  CHECK(childExitsCleanly([] {
    std::atomic<size_t> n{0};
    ThreadPool::instance().parallelFor(kItems, 1, [&](size_t b, size_t e, int) { n += e - b; });
    if (n.load() != kItems) std::_Exit(3);
  }));
  // The parent's pool still has its workers.
  std::atomic<int> workers{0};
  pool.parallelFor(kItems, 1, [&](size_t, size_t, int w) { workers += w > 0; });
  CHECK(workers.load() > 0);
}
