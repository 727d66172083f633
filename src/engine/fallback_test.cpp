// The engine's recovery rules, driven by a fault-injecting backend that wraps the CPU one:
// out of memory -> release scratch and retry on the same device; device lost (or a second
// out of memory) -> the next device, with the KV cache rebuilt by replaying the tokens; strict
// mode -> an error. The logits must come out the same as a run that never failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <new>

#include "backends/cpu/cpu_backend.h"
#include "bitnet/synth.h"
#include "engine/engine_impl.h"

namespace bitnet {
namespace {

// Wraps a CPU backend; fails the compute calls whose (1-based) number is in `fail_at` with `code`.
// kBadAlloc stands for a std::bad_alloc thrown from inside the backend (a host container that
// could not grow); call number 0 in `fail_at` fails load_weights instead.
constexpr StatusCode kBadAlloc = static_cast<StatusCode>(1000);

class FaultyBackend final : public hal::Backend {
 public:
  FaultyBackend(std::vector<int> fail_at, StatusCode code, int* scratch_releases)
      : inner_(cpu::make_cpu_backend({1, ""})), fail_at_(std::move(fail_at)), code_(code),
        scratch_releases_(scratch_releases) {}
  hal::BackendInfo info() const override { return {"faulty", "fault-injecting CPU", 1}; }
  Status load_weights(std::span<const hal::WeightDesc> w) override {
    if (std::find(fail_at_.begin(), fail_at_.end(), 0) != fail_at_.end()) return fail();
    return inner_->load_weights(w);
  }
  Status init_kv(const hal::KvShape& s) override { return inner_->init_kv(s); }
  Status compute(const hal::Graph& g, std::span<const int32_t> t, std::span<float> l) override {
    ++calls_;
    if (std::find(fail_at_.begin(), fail_at_.end(), calls_) != fail_at_.end()) return fail();
    return inner_->compute(g, t, l);
  }
  std::vector<std::string> kernels_used() const override { return inner_->kernels_used(); }
  void release_scratch() override { ++*scratch_releases_; }

 private:
  Status fail() const {
    if (code_ == kBadAlloc) throw std::bad_alloc();
    return {code_, "injected fault"};
  }

  std::unique_ptr<hal::Backend> inner_;
  std::vector<int> fail_at_;
  StatusCode code_;
  int* scratch_releases_;
  int calls_ = 0;
};

class EngineFallback : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("fallback_test_" + std::to_string(::getpid()) + ".gguf");
    SynthOptions o;
    o.output_path = path_.string();
    ASSERT_TRUE(synthesize_model(o).ok());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // An engine core whose first device is the faulty one and whose second is the CPU (or,
  // with `only_faulty`, no second device).
  std::unique_ptr<EngineCore> core(std::vector<int> fail_at, StatusCode code, bool strict,
                                   bool only_faulty = false) {
    auto c = std::make_unique<EngineCore>();
    c->options.strict = strict;
    c->options.n_threads = 1;
    c->options.log = [this](std::string_view line) { log_.emplace_back(line); };
    auto file = gguf::File::open(path_.string());
    EXPECT_TRUE(file.ok());
    c->file = std::move(*file);
    auto model = Network::from_gguf(c->file);
    EXPECT_TRUE(model.ok());
    c->model = std::move(*model);
    c->n_ctx = 64;
    c->n_batch = 4;  // several chunks per prompt, so faults can land mid-prompt
    hal::DeviceInfo faulty;
    faulty.backend = "faulty";
    faulty.id = "faulty:0";
    hal::DeviceInfo cpu;
    cpu.backend = "cpu";
    cpu.id = "cpu-scalar";
    c->plan.candidates = {faulty, cpu};
    if (only_faulty) c->plan.candidates.pop_back();
    EXPECT_TRUE(c->open_sequence().ok());
    c->make_backend = [fail_at, code, this](const hal::DeviceInfo& d, const EngineOptions& o) -> Result<std::unique_ptr<hal::Backend>> {
      if (d.backend == "faulty") return std::unique_ptr<hal::Backend>(new FaultyBackend(fail_at, code, &scratch_releases_));
      return hal::create_backend(d, {o.n_threads, o.cpu_isa});
    };
    if (std::find(fail_at.begin(), fail_at.end(), 0) == fail_at.end()) {
      EXPECT_TRUE(c->start_device(0).ok());
    }
    return c;
  }

  // Logits of a prompt (3 chunks) and then two single-token steps.
  static Status run(EngineCore& c, std::vector<std::vector<float>>& out) {
    const std::vector<int32_t> prompt = {1, 300, 301, 302, 303, 304, 305, 306, 307, 308};
    out.emplace_back();
    BITNET_RETURN_IF_ERROR(c.run(0, prompt, false, out.back()));
    for (int32_t t : {400, 401}) {
      out.emplace_back();
      BITNET_RETURN_IF_ERROR(c.run(0, std::vector<int32_t>{t}, false, out.back()));
    }
    return {};
  }

  std::filesystem::path path_;
  int scratch_releases_ = 0;
  std::vector<std::string> log_;
};

// A backend that stores F32 when F16 was asked for (as the GPU backends do; the faulty one
// reports the default stats) is named in one log line; the CPU it falls back to stores F16.
TEST_F(EngineFallback, ABackendThatKeepsAnF32CacheIsLogged) {
  auto c = core({1}, StatusCode::kDeviceLost, false);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_[0], "faulty:0: F16 KV cache not supported, using F32");
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(run(*c, out).ok());
  EXPECT_EQ(c->backend->stats().kv_type, hal::KvType::kF16);
  for (const std::string& line : log_) EXPECT_EQ(line.find("cpu-scalar: F16"), std::string::npos) << line;
}

TEST_F(EngineFallback, OutOfMemoryOnceFreesScratchAndRetriesOnTheSameDevice) {
  std::vector<std::vector<float>> want, got;
  ASSERT_TRUE(run(*core({}, StatusCode::kOk, false), want).ok());
  auto c = core({2}, StatusCode::kOutOfMemory, false);
  ASSERT_TRUE(run(*c, got).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(scratch_releases_, 1);
  EXPECT_TRUE(c->fallbacks.empty());
  EXPECT_EQ(c->device().id, "faulty:0");
}

TEST_F(EngineFallback, DeviceLostMovesToTheNextDeviceAndReplaysTheCache) {
  std::vector<std::vector<float>> want, got;
  ASSERT_TRUE(run(*core({}, StatusCode::kOk, false), want).ok());
  // Fails the 5th compute: the first decode step, after the 3-chunk prompt and one good step.
  auto c = core({5}, StatusCode::kDeviceLost, false);
  ASSERT_TRUE(run(*c, got).ok());
  EXPECT_EQ(got, want);  // the CPU after replay computes what an unbroken run computes
  EXPECT_EQ(c->device().id, "cpu-scalar");
  ASSERT_EQ(c->fallbacks.size(), 1u);
  EXPECT_EQ(c->fallbacks[0].from, "faulty:0");
  EXPECT_EQ(c->fallbacks[0].to, "cpu-scalar");
  EXPECT_NE(c->fallbacks[0].reason.find("injected fault"), std::string::npos);
  EXPECT_EQ(c->seqs.at(0).tokens.size(), 12u);
}

TEST_F(EngineFallback, PersistentOutOfMemoryFallsBackAfterOneRetry) {
  std::vector<std::vector<float>> want, got;
  ASSERT_TRUE(run(*core({}, StatusCode::kOk, false), want).ok());
  auto c = core({2, 3}, StatusCode::kOutOfMemory, false);  // the retry fails too
  ASSERT_TRUE(run(*c, got).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(scratch_releases_, 1);
  EXPECT_EQ(c->device().id, "cpu-scalar");
  EXPECT_EQ(c->fallbacks.size(), 1u);
}

TEST_F(EngineFallback, StrictModeTurnsTheFallbackIntoAnError) {
  std::vector<std::vector<float>> got;
  auto c = core({2}, StatusCode::kDeviceLost, true);
  const Status s = run(*c, got);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDeviceLost);
  EXPECT_NE(s.message().find("strict mode forbids falling back"), std::string::npos) << s.message();
  EXPECT_TRUE(c->fallbacks.empty());
}

TEST_F(EngineFallback, LostDeviceWithNothingLeftRefusesEveryLaterCall) {
  std::vector<std::vector<float>> got;
  auto c = core({2}, StatusCode::kDeviceLost, false, /*only_faulty=*/true);
  const Status s = run(*c, got);
  ASSERT_EQ(s.code(), StatusCode::kDeviceLost);
  EXPECT_NE(s.message().find("no device is left"), std::string::npos) << s.message();
  EXPECT_EQ(c->backend, nullptr);
  // Later calls get the reason, never a null dereference.
  std::vector<float> logits;
  const Status again = c->run(0, std::vector<int32_t>{5}, false, logits);
  EXPECT_EQ(again.code(), StatusCode::kDeviceLost);
  EXPECT_NE(again.message().find("the engine has no working device"), std::string::npos) << again.message();
  EXPECT_FALSE(c->usable().ok());
}

TEST_F(EngineFallback, PersistentOutOfMemoryWithNothingLeftKeepsTheDevice) {
  std::vector<std::vector<float>> got;
  auto c = core({2, 3}, StatusCode::kOutOfMemory, false, /*only_faulty=*/true);
  const Status s = run(*c, got);
  ASSERT_EQ(s.code(), StatusCode::kOutOfMemory);
  ASSERT_NE(c->backend, nullptr);
  EXPECT_TRUE(c->usable().ok());
  EXPECT_EQ(c->device().id, "faulty:0");
  // The device still works for the next request, from the position the failure left.
  std::vector<float> logits;
  EXPECT_TRUE(c->run(0, std::vector<int32_t>{5, 6}, false, logits).ok());
}

TEST_F(EngineFallback, BadAllocInComputeIsAnOutOfMemoryAndIsRetried) {
  std::vector<std::vector<float>> want, got;
  ASSERT_TRUE(run(*core({}, StatusCode::kOk, false), want).ok());
  auto c = core({2}, kBadAlloc, false);
  ASSERT_TRUE(run(*c, got).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(scratch_releases_, 1);
  EXPECT_EQ(c->device().id, "faulty:0");
}

TEST_F(EngineFallback, BadAllocWhileLoadingWeightsMovesToTheNextDevice) {
  auto c = core({0}, kBadAlloc, false);
  const Status s = c->start_device(0);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory);
  EXPECT_NE(s.message().find("loading the weights"), std::string::npos) << s.message();
  EXPECT_EQ(c->backend, nullptr);
  ASSERT_TRUE(c->start_device(1).ok());
  std::vector<std::vector<float>> got;
  EXPECT_TRUE(run(*c, got).ok());
}

}  // namespace
}  // namespace bitnet
