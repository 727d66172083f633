#include "server/scheduler.h"

#include <algorithm>
#include <chrono>

namespace bitnet::server {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

struct Scheduler::Running {
  std::shared_ptr<Job> job;
  Session session;
  std::unique_ptr<Generation> gen;
  int64_t prefilled = 0;              // prompt tokens in the cache
  std::optional<int32_t> pending;     // sampled, to be evaluated next step
  std::chrono::steady_clock::time_point t_start, t_first;
  bool done = false;
};

Scheduler::Scheduler(Model& model, Metrics& metrics, SchedulerOptions options)
    : model_(model), metrics_(metrics), opt_(options), thread_([this] { worker(); }) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (auto& j : queue_) j->done.set_value(unavailable("the server is shutting down"));
}

bool Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= opt_.max_queue) return false;
    queue_.push_back(std::move(job));
    metrics_.queue_depth = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_one();
  return true;
}

void Scheduler::cancel(const std::shared_ptr<Job>& job) {
  job->cancel = true;
  bool was_queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) {
      queue_.erase(it);
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
      was_queued = true;
    }
  }
  if (was_queued) {
    ++metrics_.requests_cancelled;
    GenerationResult r;
    r.finish_reason = "cancelled";  // nothing evaluated, nothing generated
    job->done.set_value(std::move(r));
  }
}

size_t Scheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

bool Scheduler::evict_one() {
  if (cached_.empty()) return false;
  cached_.pop_back();  // the session closes: its blocks go back to the pool
  return true;
}

// A session for the job. Its prompt's longest common prefix with a cached session (a
// finished request's) or a running one is shared, block by whole block (Session::fork: the
// blocks are referenced, not copied, and never written again); the rest is prefilled.
void Scheduler::admit(std::shared_ptr<Job> job) {
  auto r = std::make_unique<Running>();
  r->job = job;
  r->t_start = std::chrono::steady_clock::now();
  const std::vector<int32_t>& p = job->prompt;
  const Session* best = nullptr;
  int64_t best_len = 0;
  const auto consider = [&](const Session& s) {
    const std::span<const int32_t> t = s.tokens();
    int64_t n = 0;  // all but the prompt's last token may come from the cache (its logits are needed)
    while (n + 1 < static_cast<int64_t>(p.size()) && n < static_cast<int64_t>(t.size()) && t[n] == p[n]) ++n;
    if (n > best_len) {
      best_len = n;
      best = &s;
    }
  };
  for (const Session& s : cached_) consider(s);
  for (const auto& other : running_) consider(other->session);
  Result<Session> session = best != nullptr ? best->fork(best_len) : model_.open_session();
  if (!session.ok()) {
    job->done.set_value(session.status());
    return;
  }
  r->session = std::move(*session);
  r->prefilled = r->session.n_past();
  if (r->prefilled > 0) {
    ++metrics_.prefix_cache_hits;
    // The cached session it came from is the most recently useful one.
    const auto it = std::find_if(cached_.begin(), cached_.end(), [&](const Session& s) { return &s == best; });
    if (it != cached_.end()) cached_.splice(cached_.begin(), cached_, it);
  }
  r->gen = std::make_unique<Generation>(model_, job->request, p, job->max_tokens, model_.n_ctx(), job->on_text);
  r->gen->result().cached_tokens = r->prefilled;
  running_.push_back(std::move(r));
}

void Scheduler::finish(Running& r, Result<GenerationResult> result) {
  r.done = true;
  // A finished session stays cached for the next prompt that starts the same way; one whose
  // client went away (or that failed) gives its blocks back at once. The pool is counted
  // before the request is, so /metrics never shows the request done and its blocks held.
  if (result.ok() && result->finish_reason != "cancelled") {
    cached_.push_front(std::move(r.session));
    while (cached_.size() > opt_.cached_sequences) evict_one();
  } else {
    r.session.close();
  }
  metrics_.kv_used = model_.n_ctx() - model_.free_kv_positions();
  if (result.ok()) {
    result->prompt_seconds = r.t_first.time_since_epoch().count() > 0
                                 ? std::chrono::duration<double>(r.t_first - r.t_start).count()
                                 : seconds_since(r.t_start);
    result->generation_seconds = r.t_first.time_since_epoch().count() > 0 ? seconds_since(r.t_first) : 0.0;
    metrics_.record(*result);
  }
  r.job->done.set_value(std::move(result));
}

bool Scheduler::step() {
  for (auto& r : running_) {
    if (r->job->cancel.load(std::memory_order_relaxed)) {
      r->gen->cancel();
      finish(*r, r->gen->result());
    }
  }
  std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });
  if (running_.empty()) return false;

  // Decode tokens first, then prompt chunks in admission order within the budget.
  std::vector<Model::StepInput> batch;
  std::vector<Running*> who;
  std::vector<int64_t> chunk;
  int64_t budget = opt_.step_tokens;
  for (auto& r : running_) {
    if (r->pending) {
      batch.push_back({&r->session, std::span<const int32_t>(&*r->pending, 1)});
      who.push_back(r.get());
      chunk.push_back(0);
      --budget;
    }
  }
  for (auto& r : running_) {
    const int64_t left = static_cast<int64_t>(r->job->prompt.size()) - r->prefilled;
    if (r->pending || left <= 0 || budget <= 0) continue;
    const int64_t n = std::min(left, budget);
    batch.push_back({&r->session, std::span<const int32_t>(r->job->prompt).subspan(static_cast<size_t>(r->prefilled),
                                                                               static_cast<size_t>(n))});
    who.push_back(r.get());
    chunk.push_back(n);
    budget -= n;
  }
  if (batch.empty()) return false;
  // An entry whose step ends its prompt or decodes samples next: only the part of the row its
  // sampler needs comes back (selected on the device by a GPU backend); mid-prompt chunks'
  // rows are not used, so they take the smallest part.
  for (size_t i = 0; i < batch.size(); ++i) {
    const bool samples = chunk[i] == 0 || who[i]->prefilled + chunk[i] >= static_cast<int64_t>(who[i]->job->prompt.size());
    if (!samples) {
      batch[i].top = 1;
    } else if (const std::optional<hal::TopRequest>& want = who[i]->gen->wants()) {
      batch[i].top = want->k;
      batch[i].also = want->also;
    }
  }
  Result<std::vector<Model::StepOutput>> logits = model_.step(batch);
  if (!logits.ok() && logits.status().code() == StatusCode::kOutOfRange) {
    if (evict_one()) return true;  // room from a cached sequence; try again
    // No room left: the request that came last ends here, as a full context does.
    Running& last = *running_.back();
    if (last.t_first.time_since_epoch().count() == 0) {
      finish(last, unavailable("the KV cache is full; retry later"));
    } else {
      last.gen->result().finish_reason = "length";
      finish(last, last.gen->result());
    }
    std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });
    return true;
  }
  if (!logits.ok()) {
    for (auto& r : running_) finish(*r, logits.status());
    running_.clear();
    return true;
  }
  metrics_.running = static_cast<int64_t>(batch.size());
  ++metrics_.steps;
  if (metrics_.running > metrics_.running_peak) metrics_.running_peak = metrics_.running.load();
  for (size_t i = 0; i < who.size(); ++i) {
    Running& r = *who[i];
    if (chunk[i] > 0) {
      r.prefilled += chunk[i];
      if (r.prefilled < static_cast<int64_t>(r.job->prompt.size())) continue;  // more prompt to go
      r.t_first = std::chrono::steady_clock::now();
    }
    r.pending = r.gen->next((*logits)[i]);
    if (!r.pending) finish(r, r.gen->result());
  }
  std::erase_if(running_, [](const std::unique_ptr<Running>& r) { return r->done; });
  metrics_.kv_used = model_.n_ctx() - model_.free_kv_positions();
  return true;
}

void Scheduler::worker() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
      if (stopping_) break;
      while (running_.size() + admitted.size() < opt_.parallel && !queue_.empty()) {
        admitted.push_back(queue_.front());
        queue_.pop_front();
      }
      metrics_.queue_depth = static_cast<int64_t>(queue_.size());
    }
    for (auto& job : admitted) admit(std::move(job));
    if (!step()) metrics_.running = 0;
  }
  for (auto& r : running_) {
    r->gen->cancel();
    finish(*r, unavailable("the server is shutting down"));
  }
  running_.clear();
}

}  // namespace bitnet::server
