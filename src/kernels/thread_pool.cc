#include "kernels/thread_pool.h"

#include <algorithm>

namespace dct {

ThreadPool& ThreadPool::instance() {
  static ThreadPool pool(defaultWorkerCount());
  return pool;
}

ThreadPool::ThreadPool(int numWorkers) : numWorkers_(std::clamp(numWorkers, 1, kMaxWorkers)) {
  // Worker 0 is the calling thread; the others wait here.
  for (int w = 1; w < numWorkers_; w++) threads_.emplace_back([this, w] { workerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

int ThreadPool::workersFor(size_t n, size_t minPerWorker) const {
  size_t byWork = minPerWorker == 0 ? n : n / minPerWorker;
  return static_cast<int>(std::clamp<size_t>(byWork, 1, numWorkers_));
}

static void chunkOf(size_t n, int workers, int w, size_t& begin, size_t& end) {
  begin = n * w / workers;
  end = n * (w + 1) / workers;
}

void ThreadPool::workerLoop(int worker) {
  bindWorkerThread(worker);
  unsigned long seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (worker >= active_) continue;
    const Body* body = body_;
    size_t n = n_;
    int active = active_;
    lock.unlock();
    size_t begin, end;
    chunkOf(n, active, worker, begin, end);
    (*body)(begin, end, worker);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallelFor(size_t n, size_t minPerWorker, const Body& body) {
  int workers = workersFor(n, minPerWorker);
  if (workers == 1) {
    body(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call(callMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    active_ = workers;
    pending_ = workers - 1;
    generation_++;
  }
  wake_.notify_all();
  size_t begin, end;
  chunkOf(n, workers, 0, begin, end);
  body(begin, end, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
}

}  // namespace dct
