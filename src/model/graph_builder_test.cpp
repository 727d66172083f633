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
  Model model;
};

Loaded synth_model(const std::string& type) {
  const auto path = std::filesystem::temp_directory_path() / ("graph_test_" + type + ".gguf");
  SynthOptions o;
  o.output_path = path.string();
  o.weight_type = type;
  EXPECT_TRUE(synthesize_model(o).ok());
  auto file = gguf::File::open(path.string());
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  Loaded l{std::move(*file), {}};
  auto model = Model::from_gguf(l.file);
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

}  // namespace
}  // namespace bitnet
