// A small persistent worker pool for the CPU twin. Sized to the process's
// own cpuset (hwloc) shared fairly among local ranks, never oversubscribing
// cores; DCT_NUM_THREADS overrides. Workers are bound to cores when hwloc is
// available.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dct {

constexpr int kMaxWorkers = 256;

class ThreadPool {
 public:
  // body(begin, end, worker) over [0, n) split into one contiguous chunk per
  // worker; runs inline when n < minPerWorker * 2 or the pool has 1 worker.
  using Body = std::function<void(size_t begin, size_t end, int worker)>;

  static ThreadPool& instance();
  int size() const { return numWorkers_; }
  // Workers that would run a range of n items at the given grain.
  int workersFor(size_t n, size_t minPerWorker) const;
  void parallelFor(size_t n, size_t minPerWorker, const Body& body);

  ~ThreadPool();

 private:
  explicit ThreadPool(int numWorkers);
  void workerLoop(int worker);

  int numWorkers_;
  std::vector<std::thread> threads_;
  std::mutex callMutex_;  // one parallelFor at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const Body* body_ = nullptr;
  size_t n_ = 0;
  int active_ = 0;
  int pending_ = 0;
  unsigned long generation_ = 0;
  bool stop_ = false;
};

// Cores available to this process, as the pool sizes itself.
int defaultWorkerCount();
// Binds the calling thread to the worker-th core of the process cpuset.
void bindWorkerThread(int worker);

}  // namespace dct
