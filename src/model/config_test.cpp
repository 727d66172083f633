#include "model/config.h"

#include <gtest/gtest.h>

#include "gguf/gguf.h"

namespace bitnet {
namespace {

// A metadata-only model file (plus the token embedding the config reads n_vocab from).
gguf::Writer model_writer(const std::string& arch) {
  gguf::Writer w;
  w.set_string("general.architecture", arch);
  w.set_u32(arch + ".embedding_length", 256);
  w.set_u32(arch + ".block_count", 2);
  w.set_u32(arch + ".attention.head_count", 4);
  w.set_u32(arch + ".attention.head_count_kv", 2);
  w.set_u32(arch + ".feed_forward_length", 768);
  w.set_u32(arch + ".context_length", 4096);
  w.set_f32(arch + ".rope.freq_base", 500000.0f);
  EXPECT_TRUE(w.add_tensor("token_embd.weight", GgmlType::kF32, {256, 8}, std::vector<uint8_t>(256 * 8 * 4)).ok());
  return w;
}

Result<ModelConfig> parse(const gguf::Writer& w) {
  const std::vector<uint8_t> bytes = w.serialize();
  auto file = gguf::File::parse(bytes, "test.gguf");
  if (!file.ok()) return file.status();
  return ModelConfig::from_gguf(*file);
}

TEST(ModelConfig, ActivationFollowsArchitectureAndHiddenAct) {
  struct Case { const char* arch; FfnAct act; };
  for (const Case c : {Case{"bitnet-b1.58", FfnAct::kRelu2}, Case{"bitnet-25", FfnAct::kRelu2},
                       Case{"bitnet", FfnAct::kSilu}, Case{"llama", FfnAct::kSilu},
                       Case{"qwen2", FfnAct::kSilu}, Case{"qwen3", FfnAct::kSilu}}) {
    auto cfg = parse(model_writer(c.arch));
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    EXPECT_EQ(cfg->ffn_act, c.act) << c.arch;
    EXPECT_EQ(cfg->rope_style, std::string(c.arch) == "llama" ? hal::RopeStyle::kNorm : hal::RopeStyle::kNeox);
  }
  gguf::Writer w = model_writer("bitnet");
  w.set_string("bitnet.hidden_act", "relu2");
  auto cfg = parse(w);
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->ffn_act, FfnAct::kRelu2);
}

TEST(ModelConfig, ReadsShapes) {
  auto cfg = parse(model_writer("bitnet-b1.58"));
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->n_embd, 256);
  EXPECT_EQ(cfg->n_embd_head, 64);
  EXPECT_EQ(cfg->n_embd_kv(), 128);
  EXPECT_EQ(cfg->n_rot, 64);
  EXPECT_EQ(cfg->n_vocab, 8);
  EXPECT_FLOAT_EQ(cfg->rope_freq_base, 500000.0f);
  EXPECT_FLOAT_EQ(cfg->rms_eps, 1e-5f);
}

// qwen3 files name a head size apart from n_embd / n_head (Qwen3-0.6B: 1024 wide, 16 heads of 128).
TEST(ModelConfig, HeadSizeFromKeyLength) {
  gguf::Writer w = model_writer("qwen3");
  w.set_u32("qwen3.attention.key_length", 96);
  w.set_u32("qwen3.attention.value_length", 96);
  w.set_u32("qwen3.rope.dimension_count", 96);
  auto cfg = parse(w);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->n_embd_head, 96);
  EXPECT_EQ(cfg->n_embd_q(), 384);
  EXPECT_EQ(cfg->n_embd_kv(), 192);
  EXPECT_EQ(cfg->n_rot, 96);
  EXPECT_FALSE(cfg->is_bitnet());

  gguf::Writer v = model_writer("qwen3");
  v.set_u32("qwen3.attention.key_length", 96);
  v.set_u32("qwen3.attention.value_length", 64);
  auto differ = parse(v);
  ASSERT_FALSE(differ.ok());
  EXPECT_EQ(differ.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(differ.status().message().find("value_length"), std::string::npos);

  gguf::Writer z = model_writer("qwen3");
  z.set_u32("qwen3.attention.key_length", 0);
  EXPECT_EQ(parse(z).status().code(), StatusCode::kCorruptFile);
}

TEST(ModelConfig, ClearErrors) {
  auto unknown = parse(model_writer("mamba"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("unknown architecture 'mamba'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find(std::string(supported_arch_names())), std::string::npos);
  EXPECT_NE(std::string(supported_arch_names()).find("qwen2"), std::string::npos);

  gguf::Writer bad_act = model_writer("bitnet");
  bad_act.set_string("bitnet.hidden_act", "gelu");
  EXPECT_FALSE(parse(bad_act).ok());

  gguf::Writer bad_heads = model_writer("llama");
  bad_heads.set_u32("llama.attention.head_count_kv", 3);
  auto r = parse(bad_heads);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("head_count_kv"), std::string::npos);

  gguf::Writer no_layers;
  no_layers.set_string("general.architecture", "llama");
  no_layers.set_u32("llama.embedding_length", 64);
  auto missing = parse(no_layers);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace bitnet
