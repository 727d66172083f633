// The engine's recovery rules, driven by a fault-injecting backend that wraps the CPU one:
// out of memory -> release scratch and retry on the same device; device lost (or a second
// out of memory) -> the next device, with the KV cache rebuilt by replaying the tokens; strict
// mode -> an error. The logits must come out the same as a run that never failed.
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/cpu/cpu_backend.h"
#include "bitnet/synth.h"
#include "engine/engine_impl.h"

namespace bitnet {
namespace {

// Wraps a CPU backend; fails the compute calls whose (1-based) number is in `fail_at` with `code`.
class FaultyBackend final : public hal::Backend {
 public:
  FaultyBackend(std::vector<int> fail_at, StatusCode code, int* scratch_releases)
      : inner_(cpu::make_cpu_backend({1})), fail_at_(std::move(fail_at)), code_(code),
        scratch_releases_(scratch_releases) {}
  hal::BackendInfo info() const override { return {"faulty", "fault-injecting CPU", 1}; }
  Status load_weights(std::span<const hal::WeightDesc> w) override { return inner_->load_weights(w); }
  Status init_kv(const hal::KvShape& s) override { return inner_->init_kv(s); }
  Status compute(const hal::Graph& g, std::span<const int32_t> t, std::span<float> l) override {
    ++calls_;
    for (int n : fail_at_) {
      if (n == calls_) return {code_, "injected fault"};
    }
    return inner_->compute(g, t, l);
  }
  std::vector<std::string> kernels_used() const override { return inner_->kernels_used(); }
  void release_scratch() override { ++*scratch_releases_; }

 private:
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

  // An engine core whose first device is the faulty one and whose second is the CPU.
  std::unique_ptr<EngineCore> core(std::vector<int> fail_at, StatusCode code, bool strict) {
    auto c = std::make_unique<EngineCore>();
    c->options.strict = strict;
    c->options.n_threads = 1;
    auto file = gguf::File::open(path_.string());
    EXPECT_TRUE(file.ok());
    c->file = std::move(*file);
    auto model = Model::from_gguf(c->file);
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
    c->make_backend = [fail_at, code, this](const hal::DeviceInfo& d, int n) -> Result<std::unique_ptr<hal::Backend>> {
      if (d.backend == "faulty") return std::unique_ptr<hal::Backend>(new FaultyBackend(fail_at, code, &scratch_releases_));
      return hal::create_backend(d, n);
    };
    EXPECT_TRUE(c->start_device(0).ok());
    return c;
  }

  // Logits of a prompt (3 chunks) and then two single-token steps.
  static Status run(EngineCore& c, std::vector<std::vector<float>>& out) {
    const std::vector<int32_t> prompt = {1, 300, 301, 302, 303, 304, 305, 306, 307, 308};
    out.emplace_back();
    BITNET_RETURN_IF_ERROR(c.run(prompt, false, out.back()));
    for (int32_t t : {400, 401}) {
      out.emplace_back();
      BITNET_RETURN_IF_ERROR(c.run(std::vector<int32_t>{t}, false, out.back()));
    }
    return {};
  }

  std::filesystem::path path_;
  int scratch_releases_ = 0;
};

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
  EXPECT_EQ(c->history.size(), 12u);
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

}  // namespace
}  // namespace bitnet
