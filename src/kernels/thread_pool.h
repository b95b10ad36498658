// A small persistent worker pool for the CPU twin. Sized to the process's
// own cpuset (hwloc) shared fairly among local ranks, never oversubscribing
// cores; DCT_NUM_THREADS overrides. Workers are bound to cores when hwloc is
// available.
//
// A body that throws never takes the process down nor leaves a worker on a
// finished call: every chunk runs to its end or its exception, and the
// first exception is rethrown on the calling thread once all are done. A
// forked child has none of the workers: it runs every call inline (and
// joins nothing at exit).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace dct {

constexpr int kMaxWorkers = 256;

class ThreadPool {
 public:
  // body(begin, end, worker) over [0, n) split into one contiguous chunk per
  // worker; runs inline when n < minPerWorker * 2 or the pool has 1 worker.
  // Borrowed for the call: unlike a std::function, making one never
  // allocates, so a kernel that runs after a step's last vote cannot fail
  // for host memory (algo/agree.h).
  class Body {
   public:
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Body>>>
    Body(F&& f) noexcept  // NOLINT: converts from any body, as std::function did
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
          call_([](void* o, size_t b, size_t e, int w) { (*static_cast<std::remove_reference_t<F>*>(o))(b, e, w); }) {}
    void operator()(size_t begin, size_t end, int worker) const { call_(object_, begin, end, worker); }

   private:
    void* object_;
    void (*call_)(void*, size_t, size_t, int);
  };

  static ThreadPool& instance();
  int size() const { return numWorkers_; }
  // Workers that would run a range of n items at the given grain.
  int workersFor(size_t n, size_t minPerWorker) const;
  void parallelFor(size_t n, size_t minPerWorker, const Body& body);

  ~ThreadPool();

 private:
  explicit ThreadPool(int numWorkers);
  void workerLoop(int worker);
  // pthread_atfork: no call in flight across fork(); the child drops the
  // workers it does not have.
  static void beforeFork();
  static void afterForkInParent();
  static void afterForkInChild();

  int numWorkers_;
  std::unique_ptr<std::vector<std::thread>> threads_;
  std::mutex callMutex_;  // one parallelFor at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const Body* body_ = nullptr;
  size_t n_ = 0;
  int active_ = 0;
  int pending_ = 0;
  unsigned long generation_ = 0;
  bool stop_ = false;
  std::exception_ptr thrown_;  // a worker's, for the caller to rethrow
};

// Cores available to this process, as the pool sizes itself.
int defaultWorkerCount();
// Binds the calling thread to the worker-th core of the process cpuset.
void bindWorkerThread(int worker);

}  // namespace dct
