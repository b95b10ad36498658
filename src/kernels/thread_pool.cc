#include "kernels/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <new>
#include <utility>

namespace dct {

namespace {
ThreadPool* livePool = nullptr;  // the one instance(), for the fork handlers
// A forked child's dropped worker handles: kept reachable, so leak checkers
// see them as held, not lost (volatile: a store never read back is otherwise
// optimised away, and the handles look leaked).
void* volatile droppedThreads = nullptr;
}  // namespace

ThreadPool& ThreadPool::instance() {
  static ThreadPool pool(defaultWorkerCount());
  return pool;
}

ThreadPool::ThreadPool(int numWorkers)
    : numWorkers_(std::clamp(numWorkers, 1, kMaxWorkers)), threads_(std::make_unique<std::vector<std::thread>>()) {
  livePool = this;
  pthread_atfork(beforeFork, afterForkInParent, afterForkInChild);
  // Worker 0 is the calling thread; the others wait here.
  for (int w = 1; w < numWorkers_; w++) threads_->emplace_back([this, w] { workerLoop(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (threads_)
    for (auto& t : *threads_) t.join();
  livePool = nullptr;
}

void ThreadPool::beforeFork() {
  if (livePool == nullptr) return;
  livePool->callMutex_.lock();  // a call in flight ends first
  livePool->mutex_.lock();
}

void ThreadPool::afterForkInParent() {
  if (livePool == nullptr) return;
  livePool->mutex_.unlock();
  livePool->callMutex_.unlock();
}

void ThreadPool::afterForkInChild() {
  ThreadPool* p = livePool;
  if (p == nullptr) return;
  // The workers stayed in the parent: their handles are dropped unjoined
  // (joining would wait forever) and every call runs inline. The condition
  // variables still count the parent's waiters (destroying them would wait
  // for those), so they and the locks start afresh, their old state left.
  droppedThreads = p->threads_.release();
  p->numWorkers_ = 1;
  new (&p->wake_) std::condition_variable();
  new (&p->done_) std::condition_variable();
  new (&p->mutex_) std::mutex();
  new (&p->callMutex_) std::mutex();
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
    std::exception_ptr thrown;
    try {
      (*body)(begin, end, worker);
    } catch (...) {
      thrown = std::current_exception();
    }
    lock.lock();
    if (thrown && !thrown_) thrown_ = std::move(thrown);
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
  std::exception_ptr thrown;
  try {
    body(begin, end, 0);
  } catch (...) {
    thrown = std::current_exception();  // the workers still use body: wait for them first
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  std::exception_ptr theirs = std::exchange(thrown_, nullptr);
  lock.unlock();
  if (!thrown) thrown = std::move(theirs);
  if (thrown) std::rethrow_exception(thrown);
}

}  // namespace dct
