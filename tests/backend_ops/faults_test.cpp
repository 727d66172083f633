// One fault, one status code, on every backend: each runnable backend (the CPU with every
// kernel set this machine executes, PoCL, lavapipe, ...) gets the same broken compute() calls
// and must refuse each with the code hal/validate.h assigns to it, never crash, and still
// compute correctly afterwards.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "bitnet/synth.h"
#include "gguf/gguf.h"
#include "hal/registry.h"
#include "model/model.h"

namespace bitnet {
namespace {

struct Fault {
  std::string name;
  StatusCode code;
  // Breaks a valid call: the graph, the tokens or the logits buffer.
  std::function<void(hal::Graph&, std::vector<int32_t>&, std::vector<float>&)> apply;
};

hal::Op& first(hal::Graph& g, hal::OpKind kind) {
  for (hal::Op& op : g.ops) {
    if (op.kind == kind) return op;
  }
  throw std::logic_error("no such op");
}

std::vector<Fault> faults(int64_t n_vocab, int64_t n_weights) {
  using K = hal::OpKind;
  using G = hal::Graph;
  using T = std::vector<int32_t>;
  using L = std::vector<float>;
  return {
      {"token_outside_vocabulary", StatusCode::kInvalidArgument,
       [=](G&, T& t, L&) { t[1] = static_cast<int32_t>(n_vocab); }},
      {"negative_token", StatusCode::kInvalidArgument, [](G&, T& t, L&) { t[0] = -3; }},
      {"token_count_differs", StatusCode::kInvalidArgument, [](G&, T& t, L&) { t.push_back(1); }},
      {"logits_buffer_too_small", StatusCode::kInvalidArgument, [](G&, T&, L& l) { l.pop_back(); }},
      {"past_the_context", StatusCode::kOutOfRange, [](G& g, T&, L&) { g.pos0 = 62; }},
      {"weight_id_out_of_range", StatusCode::kInternal,
       [=](G& g, T&, L&) { first(g, K::kMatmul).w = static_cast<int32_t>(n_weights); }},
      {"activation_id_out_of_range", StatusCode::kInternal, [](G& g, T&, L&) { first(g, K::kAdd).b = 9999; }},
      {"matmul_shapes_do_not_chain", StatusCode::kInternal,
       [](G& g, T&, L&) { first(g, K::kMatmul).w = first(g, K::kEmbed).w; }},
      {"float_activation_with_ternary_weight", StatusCode::kUnsupported,
       [](G& g, T&, L&) { first(g, K::kMatmul).a = first(g, K::kRmsNorm).dst; }},
      {"ternary_embedding", StatusCode::kUnsupported,
       [](G& g, T&, L&) { first(g, K::kEmbed).w = first(g, K::kMatmul).w; }},
      {"layer_outside_the_cache", StatusCode::kInternal, [](G& g, T&, L&) { first(g, K::kAttention).il = 7; }},
      {"negative_layer", StatusCode::kInternal, [](G& g, T&, L&) { first(g, K::kStoreKv).il = -1; }},
      {"copy_rows_out_of_range", StatusCode::kInternal, [](G& g, T&, L&) { first(g, K::kCopyRows).row0 = 5; }},
      {"empty_graph_tokens", StatusCode::kInvalidArgument, [](G& g, T& t, L&) { g.n_tokens = 0; t.clear(); }},
  };
}

class BackendFaults : public testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("faults_test_" + std::to_string(::getpid()) + ".gguf");
    SynthOptions o;
    o.output_path = path_.string();
    ASSERT_TRUE(synthesize_model(o).ok());
    auto file = gguf::File::open(path_.string());
    ASSERT_TRUE(file.ok());
    file_ = std::move(*file);
    auto model = Network::from_gguf(file_);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    model_ = std::move(*model);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // Every backend this machine can run, with a name for messages.
  std::vector<std::pair<std::string, std::unique_ptr<hal::Backend>>> backends() const {
    std::vector<std::pair<std::string, std::unique_ptr<hal::Backend>>> out;
    out.emplace_back("cpu-scalar", cpu::make_cpu_backend({1, "scalar"}));
    for (const hal::BackendProbe& p : hal::probe_backends({})) {
      if (!p.available) continue;
      for (const hal::DeviceInfo& d : p.devices) {
        auto b = hal::create_backend(d, {1, ""});
        if (b.ok()) out.emplace_back(d.id, std::move(*b));
      }
    }
    return out;
  }

  std::filesystem::path path_;
  gguf::File file_;
  Network model_;
};

TEST_F(BackendFaults, EveryBackendGivesEachFaultTheSameCodeAndKeepsWorking) {
  const ModelConfig& c = model_.config();
  const std::vector<int32_t> good_tokens = {1, 2, 3};
  for (auto& [id, backend] : backends()) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(backend->load_weights(model_.weight_table()).ok());
    // compute() before init_kv() is a call out of order.
    {
      const hal::Graph g = model_.build_graph(3, 0, LogitRows::kLast);
      std::vector<float> logits(static_cast<size_t>(c.n_vocab));
      EXPECT_EQ(backend->compute(g, good_tokens, logits).code(), StatusCode::kInternal);
    }
    ASSERT_TRUE(backend->init_kv({static_cast<int32_t>(c.n_layer), 64, c.n_embd_kv()}).ok());
    std::vector<float> want(static_cast<size_t>(c.n_vocab));
    ASSERT_TRUE(backend->compute(model_.build_graph(3, 0, LogitRows::kLast), good_tokens, want).ok());
    for (const Fault& f : faults(c.n_vocab, static_cast<int64_t>(model_.weight_table().size()))) {
      hal::Graph g = model_.build_graph(3, 0, LogitRows::kLast);
      std::vector<int32_t> tokens = good_tokens;
      std::vector<float> logits(static_cast<size_t>(c.n_vocab));
      f.apply(g, tokens, logits);
      const Status s = backend->compute(g, tokens, logits);
      EXPECT_EQ(s.code(), f.code) << f.name << ": " << s.to_string();
    }
    // Still usable: the same call as before gives the same logits.
    std::vector<float> again(static_cast<size_t>(c.n_vocab));
    ASSERT_TRUE(backend->compute(model_.build_graph(3, 0, LogitRows::kLast), good_tokens, again).ok());
    EXPECT_EQ(again, want);
  }
}

}  // namespace
}  // namespace bitnet
