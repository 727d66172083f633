// The op lists the architectures build: W2A8 only where weights are ternary, sub-norms only
// for bitnet, the head only over the rows whose logits are wanted.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "bitnet/synth.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace bitnet {
namespace {

int count(const hal::Graph& g, hal::OpKind kind) {
  return static_cast<int>(std::count_if(g.ops.begin(), g.ops.end(), [&](const hal::Op& op) { return op.kind == kind; }));
}

struct Loaded {
  gguf::File file;
  Network model;
};

Loaded synth_model(const std::string& type, const std::string& arch = "bitnet-b1.58", int64_t head_dim = 0) {
  const auto path = std::filesystem::temp_directory_path() / ("graph_test_" + type + "_" + arch + ".gguf");
  SynthOptions o;
  o.output_path = path.string();
  o.weight_type = type;
  o.shape.architecture = arch;
  o.shape.n_embd_head = head_dim;
  EXPECT_TRUE(synthesize_model(o).ok());
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  Loaded l{std::move(*file), {}};
  auto model = Network::from_gguf(l.file);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  l.model = std::move(*model);
  std::filesystem::remove(path);
  return l;
}

TEST(Graph, TernaryModelQuantizesActivationsOncePerInput) {
  Loaded l = synth_model("i2_s");
  const hal::Graph g = l.model.build_graph(5, 0, LogitRows::kLast);
  const int n_layer = static_cast<int>(l.model.config().n_layer);
  // Per layer: attn input (shared by q, k, v), attn output, ffn input (gate, up), ffn down.
  EXPECT_EQ(count(g, hal::OpKind::kQuantizeAct), 4 * n_layer);
  EXPECT_EQ(count(g, hal::OpKind::kMatmul), 7 * n_layer + 1);
  // attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm per layer, plus the output norm.
  EXPECT_EQ(count(g, hal::OpKind::kRmsNorm), 4 * n_layer + 1);
  EXPECT_EQ(count(g, hal::OpKind::kRelu2Mul), n_layer);
  EXPECT_EQ(count(g, hal::OpKind::kCopyRows), 1);
  EXPECT_EQ(g.acts[static_cast<size_t>(g.logits)].n_rows, 1);
  EXPECT_EQ(g.acts[static_cast<size_t>(g.logits)].n_cols, l.model.config().n_vocab);
}

TEST(Graph, FloatWeightsTakeFloatActivations) {
  Loaded l = synth_model("f32");
  const hal::Graph g = l.model.build_graph(3, 7, LogitRows::kAll);
  EXPECT_EQ(count(g, hal::OpKind::kQuantizeAct), 0);
  EXPECT_EQ(count(g, hal::OpKind::kCopyRows), 0);
  EXPECT_EQ(g.acts[static_cast<size_t>(g.logits)].n_rows, 3);
  EXPECT_EQ(g.pos0, 7);
  for (const hal::Op& op : g.ops) {
    if (op.kind == hal::OpKind::kMatmul) {
      EXPECT_EQ(g.acts[static_cast<size_t>(op.a)].type, hal::ActType::kF32);
    }
  }
}

// The kinds of the ops of layer 0, from its attention norm to its first rope.
std::vector<hal::OpKind> attention_prefix(const hal::Graph& g) {
  std::vector<hal::OpKind> kinds;
  for (size_t i = 1; i < g.ops.size() && g.ops[i].kind != hal::OpKind::kRope; ++i) kinds.push_back(g.ops[i].kind);
  return kinds;
}

TEST(Graph, Qwen2AddsTheQkvBiasesAfterTheThreeMatmuls) {
  Loaded l = synth_model("f32", "qwen2");
  const hal::Graph g = l.model.build_graph(4, 0, LogitRows::kLast);
  const int n_layer = static_cast<int>(l.model.config().n_layer);
  EXPECT_EQ(count(g, hal::OpKind::kBias), 3 * n_layer);
  EXPECT_EQ(count(g, hal::OpKind::kRmsNorm), 2 * n_layer + 1);  // no sub-norms
  EXPECT_EQ(g.rope.style, hal::RopeStyle::kNeox);
  using K = hal::OpKind;
  // Consecutive matmuls of one input stay consecutive, so a backend can run them as one pass.
  EXPECT_EQ(attention_prefix(g), (std::vector<K>{K::kRmsNorm, K::kMatmul, K::kMatmul, K::kMatmul, K::kBias, K::kBias, K::kBias}));
}

TEST(Graph, Qwen3NormsEachHeadOfQAndKBeforeRope) {
  Loaded l = synth_model("f32", "qwen3", 96);
  const ModelConfig& c = l.model.config();
  const hal::Graph g = l.model.build_graph(4, 0, LogitRows::kLast);
  EXPECT_EQ(count(g, hal::OpKind::kBias), 0);
  std::vector<int32_t> head_norms;
  for (const hal::Op& op : g.ops) {
    if (op.kind == hal::OpKind::kRmsNorm && op.n_head > 0) head_norms.push_back(op.n_head);
  }
  ASSERT_EQ(head_norms.size(), static_cast<size_t>(2 * c.n_layer));
  EXPECT_EQ(head_norms[0], c.n_head);
  EXPECT_EQ(head_norms[1], c.n_head_kv);
  EXPECT_EQ(g.attn.head_dim, 96);
  using K = hal::OpKind;
  EXPECT_EQ(attention_prefix(g), (std::vector<K>{K::kRmsNorm, K::kMatmul, K::kMatmul, K::kMatmul, K::kRmsNorm, K::kRmsNorm}));
  // Queries and the attention output are n_head * 96 = 384 wide, not n_embd = 256.
  for (const hal::Op& op : g.ops) {
    if (op.kind == hal::OpKind::kAttention) {
      EXPECT_EQ(g.acts[static_cast<size_t>(op.dst)].n_cols, 384);
    }
  }
}

}  // namespace
}  // namespace bitnet
