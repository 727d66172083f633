#include "model/quantize_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/test_util.h"
#include "quant/quant.h"

namespace bitnet {
namespace {

using gguf::testutil::shared_path;

TensorPlan plan_of(const std::vector<TensorPlan>& plans, const std::string& name) {
  for (const TensorPlan& p : plans) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no plan for " << name;
  return {};
}

TEST(QuantizePlan, LlamaQuantizeRules) {
  const std::vector<TensorShape> tied = {
      {"token_embd.weight", GgmlType::kF16, 2, 2560},
      {"blk.0.attn_norm.weight", GgmlType::kF32, 1, 2560},
      {"blk.0.attn_q.weight", GgmlType::kF16, 2, 2560},
      {"blk.0.attn_q.scale", GgmlType::kF32, 1, 1},
      {"blk.0.ffn_down.weight", GgmlType::kF16, 2, 6912},  // 6912 = 27 * 256
      {"blk.0.odd.weight", GgmlType::kF16, 2, 96},
  };
  auto p = plan_quantization(tied, GgmlType::kTQ2_0, std::nullopt, std::nullopt);
  EXPECT_EQ(plan_of(p, "token_embd.weight").to, GgmlType::kQ6_K);  // tied: the head rule
  EXPECT_EQ(plan_of(p, "blk.0.attn_norm.weight").to, GgmlType::kF32);
  EXPECT_EQ(plan_of(p, "blk.0.attn_q.weight").to, GgmlType::kTQ2_0);
  EXPECT_EQ(plan_of(p, "blk.0.attn_q.scale").to, GgmlType::kF32);
  EXPECT_EQ(plan_of(p, "blk.0.ffn_down.weight").to, GgmlType::kTQ2_0);
  EXPECT_EQ(plan_of(p, "blk.0.odd.weight").to, GgmlType::kQ4_0);  // 96 is no TQ block: Q4_0

  p = plan_quantization(tied, GgmlType::kQ4_K, GgmlType::kQ8_0, std::nullopt);
  EXPECT_EQ(plan_of(p, "token_embd.weight").to, GgmlType::kQ8_0);
  EXPECT_EQ(plan_of(p, "blk.0.odd.weight").to, GgmlType::kQ5_0);

  std::vector<TensorShape> untied = tied;
  untied.push_back({"output.weight", GgmlType::kF16, 2, 2560});
  p = plan_quantization(untied, GgmlType::kTQ1_0, std::nullopt, std::nullopt);
  EXPECT_EQ(plan_of(p, "token_embd.weight").to, GgmlType::kQ4_K);
  EXPECT_EQ(plan_of(p, "output.weight").to, GgmlType::kQ6_K);
  p = plan_quantization(untied, GgmlType::kQ8_0, std::nullopt, GgmlType::kF16);
  EXPECT_EQ(plan_of(p, "token_embd.weight").to, GgmlType::kF16);
  EXPECT_EQ(plan_of(p, "output.weight").to, GgmlType::kQ8_0);
  p = plan_quantization(untied, GgmlType::kF16, std::nullopt, std::nullopt);
  EXPECT_EQ(plan_of(p, "output.weight").to, GgmlType::kF16);
  // Q6_K rows that are not whole 256-blocks: Q8_0, as llama-quantize.
  p = plan_quantization({{"output.weight", GgmlType::kF32, 2, 576}}, GgmlType::kQ4_1, std::nullopt, std::nullopt);
  EXPECT_EQ(plan_of(p, "output.weight").to, GgmlType::kQ8_0);
}

TEST(QuantizePlan, TypeNames) {
  EXPECT_EQ(*parse_quant_type("q4_k"), GgmlType::kQ4_K);
  EXPECT_EQ(*parse_quant_type("TQ2_0"), GgmlType::kTQ2_0);
  EXPECT_EQ(*parse_quant_type("i2_s"), GgmlType::kI2_S);
  const auto bad = parse_quant_type("q3_k_m");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q6_K"), std::string::npos) << bad.status().message();
  EXPECT_EQ(file_type_of(GgmlType::kTQ2_0), 37u);
  EXPECT_EQ(file_type_of(GgmlType::kQ8_0), 7u);
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + name; }

// llama.cpp's llama-quantize wrote golden/llamacpp/tiny-bitnet-{tq2_0,tq1_0}.gguf from the F32
// file (its embedding kept F32), bitnet.cpp's the I2_S one (embedding F16): the same
// conversions here write the same tensor bytes.
TEST(QuantizeModel, SameTensorBytesAsLlamaQuantize) {
  const std::string f32 = shared_path("golden/llamacpp/tiny-bitnet-f32.gguf");
  if (!std::filesystem::exists(f32)) GTEST_SKIP() << "missing " << f32;
  struct Case {
    GgmlType type;
    const char* golden;
    GgmlType head;
  };
  for (const Case& c : {Case{GgmlType::kTQ2_0, "golden/llamacpp/tiny-bitnet-tq2_0.gguf", GgmlType::kF32},
                        Case{GgmlType::kTQ1_0, "golden/llamacpp/tiny-bitnet-tq1_0.gguf", GgmlType::kF32},
                        Case{GgmlType::kI2_S, "golden/bitnetcpp/tiny-bitnet-i2_s.gguf", GgmlType::kF16}}) {
    const char* golden = c.golden;
    SCOPED_TRACE(golden);
    const std::string out = temp_path("quantize_test.gguf");
    QuantizeOptions o{f32, out, c.type, c.head, std::nullopt, 2, nullptr};
    size_t calls = 0;
    o.progress = [&](size_t i, size_t n, const TensorPlan&) {
      EXPECT_EQ(i, calls++);
      EXPECT_GT(n, i);
    };
    auto plans = quantize_model(o);
    ASSERT_TRUE(plans.ok()) << plans.status().to_string();
    EXPECT_EQ(calls, plans->size());
    auto got = gguf::File::open(out);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = gguf::File::open(shared_path(golden));
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_EQ(*got->get_u64("general.file_type").value(), *want->get_u64("general.file_type").value());
    ASSERT_EQ(got->tensors().size(), want->tensors().size());
    for (const gguf::TensorInfo& w : want->tensors()) {
      const gguf::TensorInfo* g = got->find_tensor(w.name);
      ASSERT_NE(g, nullptr) << w.name;
      EXPECT_EQ(g->type, w.type) << w.name;
      ASSERT_EQ(g->n_bytes, w.n_bytes) << w.name;
      // bitnet.cpp leaves the 28 bytes after an I2_S tensor's scale uninitialized (heap
      // garbage in its file): only the codes and the scale are compared.
      const uint64_t meaningful = w.type == GgmlType::kI2_S ? static_cast<uint64_t>(w.n_elems() / 4 + 4) : w.n_bytes;
      EXPECT_TRUE(std::equal(g->data, g->data + meaningful, w.data)) << w.name;
    }
    // Every key of the input is in the output, with the same value bytes but the file type.
    auto in = gguf::File::open(f32);
    ASSERT_TRUE(in.ok());
    for (const gguf::KeyValue& kv : in->metadata()) {
      if (kv.key == "general.file_type" || kv.key == "general.quantization_version") continue;
      const gguf::Value* v = got->find(kv.key);
      ASSERT_NE(v, nullptr) << kv.key;
      EXPECT_EQ(v->type, kv.value.type) << kv.key;
      EXPECT_EQ(v->str, kv.value.str) << kv.key;
      EXPECT_TRUE(std::equal(v->array_bytes.begin(), v->array_bytes.end(), kv.value.array_bytes.begin(),
                             kv.value.array_bytes.end())) << kv.key;
    }
    std::remove(out.c_str());
  }
}

// stories260K (GGUF v1, F32, 64 wide) to Q4_K: no row is a whole 256-block, so every matrix
// falls back to Q5_0 (F16 where rows are not even 32-blocks) and the head to Q8_0; each tensor dequantizes close to the input.
TEST(QuantizeModel, FallbacksOnARealFile) {
  const std::string in_path = shared_path("models/stories260K-v1.gguf");
  if (!std::filesystem::exists(in_path)) GTEST_SKIP() << "missing " << in_path;
  const std::string out = temp_path("quantize_stories.gguf");
  auto plans = quantize_model({in_path, out, GgmlType::kQ4_K, std::nullopt, std::nullopt, 2, nullptr});
  ASSERT_TRUE(plans.ok()) << plans.status().to_string();
  auto in = gguf::File::open(in_path);
  auto got = gguf::File::open(out);
  ASSERT_TRUE(in.ok() && got.ok());
  EXPECT_EQ(got->version(), 3u);
  int quantized = 0;
  for (const gguf::TensorInfo& t : in->tensors()) {
    SCOPED_TRACE(t.name);
    const gguf::TensorInfo* g = got->find_tensor(t.name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->ne, t.ne);
    if (t.n_dims < 2) {
      EXPECT_EQ(g->type, t.type);
      continue;
    }
    // Rows of 172 (the FFN width) are not even Q5_0 blocks: F16, as llama-quantize.
    const bool head = t.name == "output.weight" || (t.name == "token_embd.weight" && in->find_tensor("output.weight") == nullptr);
    const GgmlType want = t.ne[0] % 32 != 0 ? GgmlType::kF16 : head ? GgmlType::kQ8_0 : GgmlType::kQ5_0;
    EXPECT_EQ(g->type, want) << ggml_type_name(g->type);
    ++quantized;
    std::vector<float> a(static_cast<size_t>(t.n_elems())), b(a.size());
    ASSERT_TRUE(quant::dequantize(t.type, {t.data, t.n_bytes}, t.n_elems(), a.data()).ok());
    ASSERT_TRUE(quant::dequantize(g->type, {g->data, g->n_bytes}, g->n_elems(), b.data()).ok());
    double err = 0.0, mag = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      err += std::abs(static_cast<double>(a[i]) - b[i]);
      mag += std::abs(static_cast<double>(a[i]));
    }
    EXPECT_LT(err / mag, 0.08);  // 5 bits: a step is 1/16 of the block's max
  }
  EXPECT_GT(quantized, 5);
  std::remove(out.c_str());
}

TEST(QuantizeModel, ClearErrors) {
  const std::string in_path = shared_path("models/stories260K-v1.gguf");
  if (!std::filesystem::exists(in_path)) GTEST_SKIP() << "missing " << in_path;
  auto same = quantize_model({in_path, in_path, GgmlType::kQ8_0, std::nullopt, std::nullopt, 1, nullptr});
  EXPECT_EQ(same.status().code(), StatusCode::kInvalidArgument);
  auto missing = quantize_model({"/nonexistent.gguf", temp_path("x.gguf"), GgmlType::kQ8_0, std::nullopt, std::nullopt, 1, nullptr});
  EXPECT_FALSE(missing.ok());
  // An output directory that does not exist: an I/O error, nothing written.
  auto bad_out = quantize_model({in_path, "/nonexistent/dir/out.gguf", GgmlType::kQ8_0, std::nullopt, std::nullopt, 1, nullptr});
  EXPECT_EQ(bad_out.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace bitnet
