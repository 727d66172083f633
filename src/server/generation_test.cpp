// The generation loop on the scheduler: stop strings never leak, UTF-8 is never split,
// cancellation, prefix reuse.
#include "server/generation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "server/metrics.h"
#include "server/scheduler.h"

namespace bitnet::server {
namespace {

TEST(HeldBack, UnfinishedUtf8AndStopPrefixes) {
  const std::vector<std::string> none;
  EXPECT_EQ(held_back("abc", none), 0u);
  EXPECT_EQ(held_back("ab\xC3", none), 1u);          // first byte of a 2-byte character
  EXPECT_EQ(held_back("ab\xE2\x82", none), 2u);      // 2 of 3 bytes
  EXPECT_EQ(held_back("ab\xE2\x82\xAC", none), 0u);  // complete
  EXPECT_EQ(held_back("\xF0\x9F\xA6", none), 3u);
  const std::vector<std::string> stop = {"END", "\n\n"};
  EXPECT_EQ(held_back("the E", stop), 1u);
  EXPECT_EQ(held_back("the EN", stop), 2u);
  EXPECT_EQ(held_back("the X", stop), 0u);
  EXPECT_EQ(held_back("line\n", stop), 1u);
}

// The real path: a Scheduler over a Model with a paged cache runs each job in a Session.
class Generate : public testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.model_path = (std::filesystem::path(BITNET_SOURCE_DIR) / "models/tiny-stories-b158.gguf").string();
    o.device = "cpu";
    o.n_ctx = 256;
    o.n_threads = 1;
    o.kv_block = 16;
    auto m = Model::load(o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(*m);
    scheduler_ = std::make_unique<Scheduler>(*model_, metrics_, SchedulerOptions{});
  }
  void TearDown() override { scheduler_.reset(); }

  // Runs one job to its end; `streamed` gets the deltas; on_text answers false after
  // `deltas_before_cancel` deltas (-1: never).
  Result<GenerationResult> run(const std::vector<int32_t>& prompt, GenerationRequest request, int64_t max_tokens,
                               std::string* streamed = nullptr, int deltas_before_cancel = -1, bool cancelled = false) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->request = std::move(request);
    job->max_tokens = max_tokens;
    job->cancel = cancelled;
    int deltas = 0;
    job->on_text = [streamed, deltas_before_cancel, &deltas](std::string_view d) {
      if (streamed != nullptr) *streamed += d;
      return deltas_before_cancel < 0 || ++deltas < deltas_before_cancel;
    };
    std::future<Result<GenerationResult>> done = job->done.get_future();
    EXPECT_TRUE(scheduler_->submit(job));
    return done.get();
  }

  Metrics metrics_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Scheduler> scheduler_;
};

GenerationRequest greedy(std::vector<std::string> stop = {}) {
  GenerationRequest r;
  r.sampling.temperature = 0.0f;
  r.stop = std::move(stop);
  return r;
}

TEST_F(Generate, StreamsTheSameTextItReturnsAndReusesTheCachedPrefix) {
  const std::vector<int32_t> prompt =
      model_->tokenize("Once upon a time, there was a little girl named Lily. She loved to play outside in the sun", true, false);
  ASSERT_GT(prompt.size(), 17u);
  std::string streamed;
  auto r = run(prompt, greedy(), 24, &streamed);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->completion_tokens, 24);
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->cached_tokens, 0);
  // The same prompt again: the whole blocks of all but its last token come from the finished
  // request's session, and the greedy text is the same.
  auto again = run(prompt, greedy(), 24);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->cached_tokens, static_cast<int64_t>((prompt.size() - 1) / 16 * 16));
  EXPECT_EQ(again->text, r->text);
  EXPECT_EQ(metrics_.prefix_cache_hits.load(), 1);

  // A stop string cuts the text before it, and no part of it was streamed.
  ASSERT_GT(r->text.size(), 12u);
  const std::string stop = r->text.substr(8, 4);
  streamed.clear();
  auto stopped = run(prompt, greedy({stop}), 24, &streamed);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish_reason, "stop");
  EXPECT_EQ(stopped->text, r->text.substr(0, r->text.find(stop)));
  EXPECT_EQ(streamed, stopped->text);
}

TEST_F(Generate, CancelStopsAtTheNextStep) {
  const std::vector<int32_t> prompt = model_->tokenize("Once upon a time", true, false);
  auto r = run(prompt, greedy(), 100, nullptr, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, "cancelled");
  EXPECT_LE(r->completion_tokens, 5);
  auto before = run(prompt, greedy(), 100, nullptr, -1, /*cancelled=*/true);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->finish_reason, "cancelled");
  EXPECT_EQ(before->completion_tokens, 0);
  // A cancelled request's session is closed at once: nothing of it stays in the pool.
  EXPECT_EQ(model_->free_kv_positions(), model_->n_ctx());
}

// Scheduler::cancel: a queued job leaves the queue at once, a running one stops at the next step.
TEST_F(Generate, CancelTakesAQueuedJobOutAtOnce) {
  SchedulerOptions one;
  one.parallel = 1;
  scheduler_ = std::make_unique<Scheduler>(*model_, metrics_, one);
  const std::vector<int32_t> prompt = model_->tokenize("Once upon a time", true, false);
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<std::future<Result<GenerationResult>>> done;
  std::promise<void> started;
  std::atomic<bool> signalled{false};
  for (int i = 0; i < 2; ++i) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->request = greedy();
    job->max_tokens = 200;
    job->on_text = [&](std::string_view) {
      if (!signalled.exchange(true)) started.set_value();
      return true;
    };
    done.push_back(job->done.get_future());
    ASSERT_TRUE(scheduler_->submit(job));
    jobs.push_back(std::move(job));
  }
  started.get_future().wait();  // the first is generating
  scheduler_->cancel(jobs[1]);  // waiting behind the first
  ASSERT_EQ(done[1].wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(done[1].get()->finish_reason, "cancelled");
  EXPECT_EQ(scheduler_->queued(), 0u);
  scheduler_->cancel(jobs[0]);
  auto first = done[0].get();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->finish_reason, "cancelled");
  EXPECT_LT(first->completion_tokens, 200);
}

// Found by fuzz_server: a generation stepping on while the process tore down. Destroying the
// scheduler ends every job (running: "shutting down", queued: the same) and no job's text
// callback runs after it returns.
TEST_F(Generate, DestroyingTheSchedulerEndsEveryJobAndStepsNoMore) {
  SchedulerOptions one;
  one.parallel = 1;
  scheduler_ = std::make_unique<Scheduler>(*model_, metrics_, one);
  const std::vector<int32_t> prompt = model_->tokenize("Once upon a time", true, false);
  std::atomic<bool> destroyed{false}, late{false};
  std::promise<void> started;
  std::atomic<bool> signalled{false};
  std::vector<std::future<Result<GenerationResult>>> done;
  for (int i = 0; i < 2; ++i) {
    auto job = std::make_shared<Job>();
    job->prompt = prompt;
    job->request = greedy();
    job->max_tokens = 200;
    job->on_text = [&](std::string_view) {
      if (destroyed) late = true;
      if (!signalled.exchange(true)) started.set_value();
      return true;
    };
    done.push_back(job->done.get_future());
    ASSERT_TRUE(scheduler_->submit(job));
  }
  started.get_future().wait();  // the first is generating, the second waits
  const int64_t steps_before = metrics_.steps.load();
  scheduler_.reset();
  destroyed = true;
  const int64_t steps_after = metrics_.steps.load();
  EXPECT_GE(steps_after, steps_before);
  for (auto& d : done) {
    ASSERT_EQ(d.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    const auto r = d.get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(metrics_.steps.load(), steps_after);
  EXPECT_FALSE(late.load());
  EXPECT_EQ(model_->free_kv_positions(), model_->n_ctx());  // every session closed
}

}  // namespace
}  // namespace bitnet::server
