#include "core/thread_pool.h"

#include <algorithm>

namespace bitnet {

namespace {
constexpr int kSpinIterations = 20000;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::run_chunks() {
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_, std::memory_order_relaxed);
    if (begin >= n_) break;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, const RangeFn& fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  if (workers_.empty() || n <= min_chunk) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances uneven rows without much contention.
  const int64_t target = (n + 4 * n_threads_ - 1) / (4 * n_threads_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunk_ = std::max(min_chunk, target);
    next_.store(0, std::memory_order_relaxed);
    active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks();
  // Wait for the workers to finish their last chunk.
  for (int spin = 0; active_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin > kSpinIterations) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return active_.load(std::memory_order_acquire) == 0; });
      break;
    }
  }
  fn_ = nullptr;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin a while for the next job, then sleep.
    int spin = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spin < kSpinIterations) ++spin;
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    run_chunks();
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace bitnet
