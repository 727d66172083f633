#include "server/scheduler.h"

namespace bitnet::server {

Scheduler::Scheduler(Engine& engine, Metrics& metrics, size_t max_queue)
    : engine_(engine), metrics_(metrics), max_queue_(max_queue), thread_([this] { worker(); }) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& j : queue_) j->cancel = true;
    if (running_) running_->cancel = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& j : queue_) j->done.set_value(unavailable("the server is shutting down"));
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= max_queue_) return false;
    queue_.push_back(std::move(job));
    metrics_.queue_depth = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_one();
  return true;
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void Scheduler::worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      running_ = job;
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    metrics_.running = 1;
    Result<GenerationResult> r = generate(engine_, job->prompt, job->request, job->max_tokens, job->cancel, job->on_text);
    metrics_.running = 0;
    metrics_.kv_used = engine_.n_past();
    if (r.ok()) metrics_.record(*r);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_.reset();
    }
    job->done.set_value(std::move(r));
  }
}

}  // namespace bitnet::server
