// Continuous batching over one Model with a paged KV cache: requests wait in a bounded queue,
// up to `parallel` run at once, each in a Session of its own, and every step is one forward
// pass (Model::step) over all of them: the
// decode tokens first, then prompt chunks within the step's token budget (chunked prefill),
// so a long prompt never stalls the streams already running. Requests join and leave between
// steps; a cancelled one (client gone) stops at the next step, prefill included.
// Prefix caching: a finished request's session stays open (LRU, bounded); a new request whose
// prompt starts with the same tokens as a cached or running session forks it (Session::fork:
// those tokens' whole KV blocks are shared, reference counted, never copied) and evaluates
// only the rest.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bitnet/model.h"
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

struct SchedulerOptions {
  size_t max_queue = 16;        // requests waiting; more are refused
  size_t parallel = 4;          // requests running at once (sequences in a step)
  int64_t step_tokens = 512;    // tokens per forward step (decode tokens + prompt chunks)
  size_t cached_sequences = 8;  // finished sequences kept for prefix reuse
};

class Scheduler {
 public:
  // `model` must have a paged KV cache (EngineOptions::kv_block > 0); the worker thread is
  // the only one that runs it (and its sessions) until the Scheduler is destroyed.
  Scheduler(Model& model, Metrics& metrics, SchedulerOptions options);
  // Cancels what is queued or running and joins the worker: the step under way (if any) is
  // the last; every job's future is set before it returns.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; false (and the job untouched) when max_queue jobs are already waiting.
  bool submit(std::shared_ptr<Job> job);
  // Stops a submitted job: one still waiting leaves the queue at once (finish_reason
  // "cancelled"), a running one finishes at the start of the next step. Its future is set
  // by then; wait on it to know that no step will touch the job again.
  void cancel(const std::shared_ptr<Job>& job);
  size_t queued() const;

 private:
  struct Running;
  void worker();
  void admit(std::shared_ptr<Job> job);
  bool step();  // one forward pass; false when nothing ran
  void finish(Running& r, Result<GenerationResult> result);
  bool evict_one();  // closes the least recently used cached session

  Model& model_;
  Metrics& metrics_;
  const SchedulerOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  // Worker-only state.
  std::vector<std::unique_ptr<Running>> running_;
  std::list<Session> cached_;  // finished requests' sessions, most recent first
  std::thread thread_;
};

}  // namespace bitnet::server
