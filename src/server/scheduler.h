// The worker that owns the Engine: requests queue up (bounded) and run one at a time on its
// thread. This is the seam where the batched multi-sequence step (issue: shared Model,
// Sessions, paged KV) replaces one-at-a-time: submit/cancel/metrics stay as they are.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bitnet/engine.h"
#include "server/generation.h"
#include "server/metrics.h"

namespace bitnet::server {

struct Job {
  std::vector<int32_t> prompt;
  GenerationRequest request;
  int64_t max_tokens = 0;
  std::atomic<bool> cancel{false};
  // Called on the worker thread with each text delta; false cancels.
  std::function<bool(std::string_view)> on_text;
  std::promise<Result<GenerationResult>> done;
};

class Scheduler {
 public:
  Scheduler(Engine& engine, Metrics& metrics, size_t max_queue);
  ~Scheduler();  // cancels what is queued or running and joins the worker
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; false (and the job untouched) when max_queue jobs are already waiting.
  bool submit(std::shared_ptr<Job> job);
  size_t queued() const;

 private:
  void worker();

  Engine& engine_;
  Metrics& metrics_;
  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::shared_ptr<Job> running_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace bitnet::server
