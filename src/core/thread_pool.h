// A fixed pool of worker threads for data-parallel loops. The calling thread takes part,
// so a pool of n threads starts n-1 workers. Workers spin briefly between jobs (a decode
// step dispatches hundreds of small loops) and then sleep on a condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bitnet {

class ThreadPool {
 public:
  // Body of a parallel loop: handles items [begin, end).
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  explicit ThreadPool(int n_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int n_threads() const { return n_threads_; }

  // Runs fn over [0, n) in chunks of at least `min_chunk` items and returns when all are done.
  void parallel_for(int64_t n, int64_t min_chunk, const RangeFn& fn);

  // The number of hardware threads (at least 1).
  static int hardware_threads();

 private:
  void worker_loop();
  void run_chunks();

  int n_threads_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_ = false;

  // The current job.
  const RangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
};

}  // namespace bitnet
