// The CUDA backend's translation of op lists, on the host: weight kinds, the kernel of each op
// for its shape and compute capability, activation layouts, KV addressing, the rope table.
#include "backends/cuda/cuda_plan.h"

#include <gtest/gtest.h>

#include <cmath>

namespace bitnet::cuda {
namespace {

using hal::ActType;
using hal::OpKind;

TEST(CudaPlan, WeightKinds) {
  EXPECT_EQ(*weight_kind("blk.0.ffn_up.weight", GgmlType::kI2_S, 2560, 6912), WeightKind::kTernary);
  EXPECT_EQ(*weight_kind("w", GgmlType::kTQ2_0, 256, 4), WeightKind::kTernary);
  EXPECT_EQ(*weight_kind("w", GgmlType::kTQ1_0, 256, 4), WeightKind::kTernary);
  EXPECT_EQ(*weight_kind("output.weight", GgmlType::kF16, 2560, 128256), WeightKind::kF16);
  EXPECT_EQ(*weight_kind("output.weight", GgmlType::kBF16, 2560, 128256), WeightKind::kBF16);
  EXPECT_EQ(*weight_kind("output.weight", GgmlType::kQ8_0, 2560, 128256), WeightKind::kQ8_0);
  EXPECT_EQ(*weight_kind("token_embd.weight", GgmlType::kF32, 300, 64), WeightKind::kF32);  // any width
  // 1-D tensors of any dequantizable type become F32.
  EXPECT_EQ(*weight_kind("blk.0.attn_norm.weight", GgmlType::kF16, 2560, 1), WeightKind::kF32);
  EXPECT_EQ(*weight_kind("blk.0.attn_q.scale", GgmlType::kF32, 1, 1), WeightKind::kF32);

  // The llama.cpp block formats are read in place; a type no weight of a model uses is refused.
  EXPECT_EQ(*weight_kind("blk.0.ffn_down.weight", GgmlType::kQ4_0, 256, 64), WeightKind::kBlocks);
  const auto q8_1 = weight_kind("blk.0.ffn_down.weight", GgmlType::kQ8_1, 256, 64);
  ASSERT_FALSE(q8_1.ok());
  EXPECT_EQ(q8_1.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(q8_1.status().message().find("blk.0.ffn_down.weight"), std::string::npos);
  EXPECT_NE(q8_1.status().message().find("q8_1"), std::string::npos) << q8_1.status().message();
  EXPECT_EQ(q8_1.status().message().find('\n'), std::string::npos);  // one line
  const auto narrow = weight_kind("w", GgmlType::kI2_S, 96, 4);
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().code(), StatusCode::kUnsupported);
}

TEST(CudaPlan, TernaryKernelByTokensAndComputeCapability) {
  // Decode and small batches: the GEMV, on every device.
  for (int cc : {7, 8, 9}) {
    for (int64_t t : {1, 2, 5, 8}) EXPECT_EQ(choose_ternary_kernel(t, cc, 2560, 2560), Kernel::kW2a8Gemv) << cc << " " << t;
  }
  // Prefill: tensor cores from sm_80, else the GEMV's token tiles.
  EXPECT_EQ(choose_ternary_kernel(9, 8, 2560, 2560), Kernel::kW2a8Mma);
  EXPECT_EQ(choose_ternary_kernel(512, 9, 2560, 256), Kernel::kW2a8Mma);
  EXPECT_EQ(choose_ternary_kernel(512, 7, 2560, 2560), Kernel::kW2a8Gemv);
  // Rows or scale blocks that are not whole 32-column steps of the mma stay on the GEMV.
  EXPECT_EQ(choose_ternary_kernel(512, 8, 2560, 256), Kernel::kW2a8Mma);
  EXPECT_EQ(choose_ternary_kernel(512, 8, 2560, 16), Kernel::kW2a8Gemv);
  EXPECT_EQ(kernel_name(Kernel::kW2a8Gemv), "cuda:w2a8_gemv");
  EXPECT_EQ(kernel_name(Kernel::kW2a8Mma), "cuda:w2a8_gemm_mma");
}

TEST(CudaPlan, ActivationLayouts) {
  const hal::ActDesc f{"x", ActType::kF32, 7, 300};
  EXPECT_EQ(act_layout(f)->bytes, 7u * 300 * 4);
  const hal::ActDesc q{"xq", ActType::kQ8, 3, 2560};
  const ActLayout l = *act_layout(q);
  EXPECT_EQ(l.scale_offset % 256, 0u);
  EXPECT_EQ(l.sum_offset % 256, 0u);
  EXPECT_GE(l.scale_offset, 3u * 2560);
  EXPECT_GE(l.sum_offset, l.scale_offset + 3 * 4);
  EXPECT_EQ(l.bytes, l.sum_offset + 3u * (2560 / 64) * 4);
  const auto odd = act_layout({"xq", ActType::kQ8, 1, 100});
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), StatusCode::kUnsupported);
}

// A graph's int8 buffer that no op touches (a float model's ff_q8) gets no layout and no check;
// once an op reads it, its odd width is refused.
TEST(CudaPlan, UnusedActivationsAreNotLaidOut) {
  hal::Graph g;
  g.n_tokens = 1;
  g.acts = {{"x", ActType::kF32, 1, 64}, {"ff_q8", ActType::kQ8, 1, 172}, {"y", ActType::kF32, 1, 64}};
  g.ops = {{.kind = hal::OpKind::kAdd, .dst = 2, .a = 0, .b = 0}};
  g.logits = 2;
  const auto layouts = act_layouts(g);
  ASSERT_TRUE(layouts.ok()) << layouts.status().to_string();
  ASSERT_EQ(layouts->size(), 3u);
  EXPECT_EQ((*layouts)[0].bytes, 64u * 4);
  EXPECT_EQ((*layouts)[1].bytes, 0u);
  EXPECT_EQ((*layouts)[2].bytes, 64u * 4);
  g.ops.push_back({.kind = hal::OpKind::kQuantizeAct, .dst = 1, .a = 2});
  const auto refused = act_layouts(g);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
}

// A BitNet-like layer slice: embed, norm, quantize, ternary matmul, rope, store_kv, attention,
// add, the head.
struct Net {
  hal::Graph g;
  std::vector<WeightInfo> w = {
      {WeightKind::kF16, 256, 100, 0},      // 0 embedding
      {WeightKind::kF32, 256, 1, 0},        // 1 norm gain
      {WeightKind::kTernary, 256, 256, 256},  // 2 wq
      {WeightKind::kF32, 1, 1, 0},          // 3 scale
      {WeightKind::kQ8_0, 256, 100, 0},     // 4 head
      {WeightKind::kF32, 256, 1, 0},        // 5 bias
  };
  explicit Net(int64_t n_tokens, int32_t head_dim = 64) {
    g.n_tokens = n_tokens;
    g.attn = {4, 4, head_dim, 0.125f};
    g.rope = {hal::RopeStyle::kNeox, head_dim, 10000.0f, 1.0f};
    const auto act = [&](ActType t, int64_t cols) {
      g.acts.push_back({"a", t, n_tokens, cols});
      return static_cast<hal::ActId>(g.acts.size() - 1);
    };
    const auto x = act(ActType::kF32, 256), n = act(ActType::kF32, 256), q8 = act(ActType::kQ8, 256),
               q = act(ActType::kF32, 256), att = act(ActType::kF32, 256), out = act(ActType::kF32, 100);
    g.ops = {{.kind = OpKind::kEmbed, .dst = x, .w = 0},
             {.kind = OpKind::kRmsNorm, .dst = n, .a = x, .w = 1, .eps = 1e-5f},
             {.kind = OpKind::kQuantizeAct, .dst = q8, .a = n},
             {.kind = OpKind::kMatmul, .dst = q, .a = q8, .w = 2},
             {.kind = OpKind::kScale, .dst = q, .w = 3},
             {.kind = OpKind::kBias, .dst = q, .w = 5},
             {.kind = OpKind::kRope, .dst = q, .n_head = 4},
             {.kind = OpKind::kStoreKv, .a = q, .b = q, .il = 0},
             {.kind = OpKind::kAttention, .dst = att, .a = q, .il = 0},
             {.kind = OpKind::kAdd, .dst = x, .a = x, .b = att},
             {.kind = OpKind::kMatmul, .dst = out, .a = x, .w = 4}};
    g.logits = out;
  }
};

TEST(CudaPlan, EveryOpOfALayerGetsItsKernel) {
  const Net decode(1);
  const auto plan = plan_graph(decode.g, decode.w, 8, false);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::vector<Kernel> want = {Kernel::kEmbed, Kernel::kRmsNorm, Kernel::kQuantize, Kernel::kW2a8Gemv,
                                    Kernel::kScale, Kernel::kBias, Kernel::kRope, Kernel::kStoreKv,
                                    Kernel::kAttention, Kernel::kAdd, Kernel::kMatmulFloat};
  EXPECT_EQ(*plan, want);
  // Fused: the norm's output is another activation, so it is written and the pair fuses.
  std::vector<Kernel> fused = want;
  fused[1] = Kernel::kNormQuant;
  fused[2] = Kernel::kFused;
  EXPECT_EQ(*plan_graph(decode.g, decode.w, 8), fused);
  EXPECT_TRUE(fused_normed(decode.g, 1, Kernel::kNormQuant));
  const Net prefill(64);
  EXPECT_EQ((*plan_graph(prefill.g, prefill.w, 8))[3], Kernel::kW2a8Mma);
  EXPECT_EQ((*plan_graph(prefill.g, prefill.w, 7))[3], Kernel::kW2a8Gemv);
}

// attention_f16 takes any head of up to 256 (the half2 kernels for 64, 128 and 256, the
// bounds-checked ones for the rest: stories260K's heads of 8).
TEST(CudaPlan, TakesAttentionHeadsOfOneTo256) {
  for (const int32_t head_dim : {1, 8, 32, 48, 64, 80, 96, 128, 160, 256}) {
    const Net net(1, head_dim);
    const auto plan = plan_graph(net.g, net.w, 8);
    ASSERT_TRUE(plan.ok()) << head_dim << ": " << plan.status().to_string();
    EXPECT_EQ((*plan)[8], Kernel::kAttention) << head_dim;
  }
}

TEST(CudaPlan, RefusesWhatTheKernelsCannotRunWithUnsupported) {
  const Net d320(1, 320);  // past kMaxAttentionHeadDim
  const auto a = plan_graph(d320.g, d320.w, 8);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(a.status().message().find("op 8 (attention)"), std::string::npos) << a.status().message();

  Net ternary_embed(1);
  ternary_embed.g.ops[0].w = 2;
  EXPECT_EQ(plan_graph(ternary_embed.g, ternary_embed.w, 8).status().code(), StatusCode::kUnsupported);

  Net float_act_ternary(1);
  float_act_ternary.g.ops[3].a = 1;  // the F32 norm output straight into the ternary weight
  EXPECT_EQ(plan_graph(float_act_ternary.g, float_act_ternary.w, 8).status().code(), StatusCode::kUnsupported);

  Net odd_head(1);
  odd_head.w[4] = {WeightKind::kF32, 252, 100, 0};  // rows of any width: element loads
  EXPECT_TRUE(plan_graph(odd_head.g, odd_head.w, 8).ok());
}

TEST(CudaPlan, KvAddressingIdentityOrPowerOfTwoBlocks) {
  hal::Graph g;
  g.n_tokens = 2;
  g.pos0 = 5;
  const hal::KvShape plain{1, 48, 64};
  const hal::KvRows rows = hal::resolve_kv(g, plain);
  const KvAddressing id = *kv_addressing(g, rows);
  EXPECT_TRUE(id.identity);
  EXPECT_EQ(kv_words(rows, id), (std::vector<int32_t>{5, 6}));

  g.kv.pos = {3, 9};
  g.kv.table_begin = {0, 2};
  g.kv.tables = {5, 2, 0, 7};
  const hal::KvShape paged{1, 64, 64, hal::KvType::kF16, 8};
  const hal::KvRows prow = hal::resolve_kv(g, paged);
  const KvAddressing p = *kv_addressing(g, prow);
  EXPECT_FALSE(p.identity);
  EXPECT_EQ(p.block_shift, 3);
  EXPECT_EQ(kv_words(prow, p), (std::vector<int32_t>{3, 9, 0, 2, 5, 2, 0, 7}));
  // The kernels' row formula agrees with hal::KvRows::row for every position of each token.
  const std::vector<int32_t> w = kv_words(prow, p);
  for (int64_t t = 0; t < 2; ++t) {
    for (int32_t j = 0; j <= prow.pos[static_cast<size_t>(t)]; ++j) {
      const int32_t* table = w.data() + 4 + w[static_cast<size_t>(2 + t)];
      const int64_t row = static_cast<int64_t>(table[j >> p.block_shift]) << p.block_shift | (j & 7);
      EXPECT_EQ(row, prow.row(t, j));
    }
  }
  // Several sequences over a whole-cache "block" of 48 (not a power of 2): only block 0.
  g.kv.table_begin = {0, 1};
  g.kv.tables = {0, 0};
  const hal::KvShape whole{1, 48, 64};
  EXPECT_TRUE(kv_addressing(g, hal::resolve_kv(g, whole))->identity);
  g.kv.tables = {0, 1};
  EXPECT_EQ(kv_addressing(g, hal::resolve_kv(g, whole)).status().code(), StatusCode::kUnsupported);
}

TEST(CudaPlan, RopeTableFollowsTheCpuRecurrence) {
  hal::Graph g;
  g.n_tokens = 3;
  g.pos0 = 10;
  g.rope = {hal::RopeStyle::kNeox, 8, 10000.0f, 1.0f};
  const std::vector<float> cs = rope_table(g);
  ASSERT_EQ(cs.size(), 3u * 4 * 2);
  for (int64_t t = 0; t < 3; ++t) {
    for (int i = 0; i < 4; ++i) {
      const double theta = static_cast<double>(10 + t) * std::pow(10000.0, -2.0 * i / 8);
      EXPECT_NEAR(cs[static_cast<size_t>(2 * (t * 4 + i))], std::cos(theta), 1e-5);
      EXPECT_NEAR(cs[static_cast<size_t>(2 * (t * 4 + i) + 1)], std::sin(theta), 1e-5);
    }
  }
  g.kv.pos = {0, 100, 7};  // per-token positions (several sequences)
  const std::vector<float> ps = rope_table(g);
  EXPECT_FLOAT_EQ(ps[0], 1.0f);
  EXPECT_NEAR(ps[2 * 4], std::cos(100.0), 1e-5);
}

TEST(CudaPlan, StepSignatureIgnoresPositionsAndTokensOnly) {
  const KvAddressing id;
  Net a(1), b(1);
  a.g.pos0 = 7;
  b.g.pos0 = 8;  // the next decode step: same launches, other uploads
  EXPECT_EQ(step_signature(a.g, id, 1), step_signature(b.g, id, 1));
  Net prefill(4);
  EXPECT_NE(step_signature(a.g, id, 1), step_signature(prefill.g, id, 4));
  Net eps(1);
  eps.g.ops[1].eps = 1e-6f;
  EXPECT_NE(step_signature(a.g, id, 1), step_signature(eps.g, id, 1));
  Net rows(1);
  rows.g.get_rows = {0};
  EXPECT_NE(step_signature(a.g, id, 1), step_signature(rows.g, id, 1));
  const KvAddressing paged{false, 4};
  EXPECT_NE(step_signature(a.g, id, 1), step_signature(a.g, paged, 1));
  EXPECT_NE(step_signature(a.g, paged, 4), step_signature(a.g, paged, 5));  // other block tables' sizes
}

// BitNet's FFN tail as model/arch builds it: gate = relu2(gate) * up in place, the sub-norm in
// place, the down projection's int8 input, the product, the residual add.
struct Ffn {
  hal::Graph g;
  std::vector<WeightInfo> w = {{WeightKind::kF32, 256, 1, 0}, {WeightKind::kTernary, 256, 128, 256}};
  hal::ActId gate, up, q8, out, x;
  explicit Ffn(hal::OpKind act = OpKind::kRelu2Mul) {
    g.n_tokens = 2;
    const auto a = [&](ActType t, int64_t cols) {
      g.acts.push_back({"a", t, 2, cols});
      return static_cast<hal::ActId>(g.acts.size() - 1);
    };
    gate = a(ActType::kF32, 256), up = a(ActType::kF32, 256), q8 = a(ActType::kQ8, 256), out = a(ActType::kF32, 128),
    x = a(ActType::kF32, 128);
    g.ops = {{.kind = act, .dst = gate, .a = gate, .b = up},
             {.kind = OpKind::kRmsNorm, .dst = gate, .a = gate, .w = 0, .eps = 1e-5f},
             {.kind = OpKind::kQuantizeAct, .dst = q8, .a = gate},
             {.kind = OpKind::kMatmul, .dst = out, .a = q8, .w = 1},
             {.kind = OpKind::kAdd, .dst = x, .a = x, .b = out}};
    g.logits = x;
  }
};

TEST(CudaPlan, FusesTheFfnGateNormAndQuantizationWhereNothingReadsWhatIsSkipped) {
  for (OpKind act : {OpKind::kRelu2Mul, OpKind::kSiluMul}) {
    const Ffn f(act);
    const auto plan = plan_graph(f.g, f.w, 8);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ((*plan)[0], Kernel::kGateNormQuant);
    EXPECT_EQ((*plan)[1], Kernel::kFused);
    EXPECT_EQ((*plan)[2], Kernel::kFused);
    EXPECT_EQ((*plan)[3], Kernel::kW2a8Gemv);
    // The norm's output is the gate's input: not written (it would alias the kernel's input).
    EXPECT_FALSE(fused_normed(f.g, 0, Kernel::kGateNormQuant));
    EXPECT_FALSE(fused_writes_normed(f.g, 0, Kernel::kGateNormQuant));  // what the launch passes
  }
  // The normed gate read again after the quantization (a float product): no fusion of the gate
  // (its normed output would be lost); the norm alone cannot fuse either (in place, read later).
  Ffn read(OpKind::kRelu2Mul);
  read.g.ops.push_back({.kind = OpKind::kAdd, .dst = read.gate, .a = read.gate, .b = read.up});
  const auto plan = plan_graph(read.g, read.w, 8);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)[0], Kernel::kRelu2Mul);
  EXPECT_EQ((*plan)[1], Kernel::kRmsNorm);
  EXPECT_EQ((*plan)[2], Kernel::kQuantize);
  // The norm into another activation: the gate fuses, writing the normed rows there; the gate's
  // own output is then unread (rewritten by nothing before the end, and not the logits).
  Ffn other(OpKind::kRelu2Mul);
  other.g.ops[1].dst = other.up;
  other.g.ops[2].a = other.up;
  const auto p2 = plan_graph(other.g, other.w, 8);
  EXPECT_EQ((*p2)[0], Kernel::kGateNormQuant);
  EXPECT_FALSE(fused_normed(other.g, 0, Kernel::kGateNormQuant));  // `up` is the gate's b input
  // ... but if the gate's output is read later the gate stays apart; the norm (out of place,
  // into `up`) and the quantization still fuse, writing the normed rows.
  other.g.ops.push_back({.kind = OpKind::kAdd, .dst = other.x, .a = other.x, .b = other.gate});
  const auto p3 = plan_graph(other.g, other.w, 8);
  EXPECT_EQ((*p3)[0], Kernel::kRelu2Mul);
  EXPECT_EQ((*p3)[1], Kernel::kNormQuant);
  EXPECT_EQ((*p3)[2], Kernel::kFused);
  EXPECT_TRUE(fused_normed(other.g, 1, Kernel::kNormQuant));
}

// x += o, then the norm and quantization of x, then q, k and v of the quantized rows: what each
// layer starts its attention with (and, without v, its FFN).
struct AttnStart {
  hal::Graph g;
  std::vector<WeightInfo> w = {{WeightKind::kF32, 256, 1, 0},
                               {WeightKind::kTernary, 256, 256, 256},
                               {WeightKind::kTernary, 256, 64, 256},
                               {WeightKind::kTernary, 256, 64, 256}};
  hal::ActId x{}, o{}, n{}, q8{}, q{}, k{}, v{};
  explicit AttnStart(int64_t n_tokens) {
    g.n_tokens = n_tokens;
    const auto a = [&](ActType t, int64_t cols) {
      g.acts.push_back({"a", t, n_tokens, cols});
      return static_cast<hal::ActId>(g.acts.size() - 1);
    };
    x = a(ActType::kF32, 256), o = a(ActType::kF32, 256), n = a(ActType::kF32, 256), q8 = a(ActType::kQ8, 256),
    q = a(ActType::kF32, 256), k = a(ActType::kF32, 64), v = a(ActType::kF32, 64);
    g.ops = {{.kind = OpKind::kAdd, .dst = x, .a = x, .b = o},
             {.kind = OpKind::kRmsNorm, .dst = n, .a = x, .w = 0, .eps = 1e-5f},
             {.kind = OpKind::kQuantizeAct, .dst = q8, .a = n},
             {.kind = OpKind::kMatmul, .dst = q, .a = q8, .w = 1},
             {.kind = OpKind::kMatmul, .dst = k, .a = q8, .w = 2},
             {.kind = OpKind::kMatmul, .dst = v, .a = q8, .w = 3}};
    g.logits = v;
  }
};

TEST(CudaPlan, FusesTheResidualAddIntoTheNextNormAndGroupsTheGemvsOfOneInput) {
  const AttnStart decode(1);
  const auto plan = plan_graph(decode.g, decode.w, 8);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(*plan, (std::vector<Kernel>{Kernel::kAddNormQuant, Kernel::kFused, Kernel::kFused, Kernel::kW2a8GemvGroup,
                                        Kernel::kFused, Kernel::kFused}));
  EXPECT_EQ(gemv_group_size(*plan, 3), 3u);
  EXPECT_TRUE(fused_normed(decode.g, 1, Kernel::kNormQuant));  // n is not the add's output
  EXPECT_TRUE(fused_writes_normed(decode.g, 0, Kernel::kAddNormQuant));
  // The norm in place over the sum: the fused kernel must not write normed rows over its sum.
  AttnStart in_place(1);
  in_place.g.ops[1].dst = in_place.x;
  in_place.g.ops[2].a = in_place.x;
  EXPECT_FALSE(fused_writes_normed(in_place.g, 0, Kernel::kAddNormQuant));
  EXPECT_EQ(*plan_graph(decode.g, decode.w, 8, false),
            (std::vector<Kernel>{Kernel::kAdd, Kernel::kRmsNorm, Kernel::kQuantize, Kernel::kW2a8Gemv, Kernel::kW2a8Gemv,
                                 Kernel::kW2a8Gemv}));
  // Prefill runs the GEMM on tensor cores, one launch per weight.
  const AttnStart prefill(64);
  EXPECT_EQ(*plan_graph(prefill.g, prefill.w, 8),
            (std::vector<Kernel>{Kernel::kAddNormQuant, Kernel::kFused, Kernel::kFused, Kernel::kW2a8Mma, Kernel::kW2a8Mma,
                                 Kernel::kW2a8Mma}));
  // Scale blocks that differ end a group: q and k, then v alone.
  AttnStart blocks(1);
  blocks.w[3].scale_block = 128;
  const auto p2 = plan_graph(blocks.g, blocks.w, 8);
  EXPECT_EQ(*p2, (std::vector<Kernel>{Kernel::kAddNormQuant, Kernel::kFused, Kernel::kFused, Kernel::kW2a8GemvGroup,
                                      Kernel::kFused, Kernel::kW2a8Gemv}));
  EXPECT_EQ(gemv_group_size(*p2, 3), 2u);
  // A norm that does not read the sum: the add stays apart.
  AttnStart other(1);
  other.g.ops[1].a = other.o;
  EXPECT_EQ((*plan_graph(other.g, other.w, 8))[0], Kernel::kAdd);
  EXPECT_EQ((*plan_graph(other.g, other.w, 8))[1], Kernel::kNormQuant);
}

// rope(q), rope(k), store_kv(k, v): one launch, where the rows are whole heads.
TEST(CudaPlan, FusesTheRopesAndTheKvStore) {
  hal::Graph g;
  g.n_tokens = 2;
  g.attn = {4, 2, 64, 0.125f};
  g.rope = {hal::RopeStyle::kNeox, 64, 10000.0f, 1.0f};
  g.acts = {{"q", ActType::kF32, 2, 256}, {"k", ActType::kF32, 2, 128}, {"v", ActType::kF32, 2, 128},
            {"o", ActType::kF32, 2, 256}};
  g.ops = {{.kind = OpKind::kRope, .dst = 0, .n_head = 4},
           {.kind = OpKind::kRope, .dst = 1, .n_head = 2},
           {.kind = OpKind::kStoreKv, .a = 1, .b = 2, .il = 0},
           {.kind = OpKind::kAttention, .dst = 3, .a = 0, .il = 0}};
  g.logits = 3;
  const std::vector<WeightInfo> none;
  EXPECT_EQ(*plan_graph(g, none, 8), (std::vector<Kernel>{Kernel::kRopeStoreKv, Kernel::kFused, Kernel::kFused,
                                                          Kernel::kAttention}));
  EXPECT_EQ(*plan_graph(g, none, 8, false),
            (std::vector<Kernel>{Kernel::kRope, Kernel::kRope, Kernel::kStoreKv, Kernel::kAttention}));
  // q's rows wider than its heads (rope runs per token then): apart.
  hal::Graph wide = g;
  wide.acts[0].n_cols = 320;
  wide.acts[3].n_cols = 320;
  EXPECT_EQ((*plan_graph(wide, none, 8))[0], Kernel::kRope);
  // The store of another k than the one rotated: apart.
  hal::Graph other = g;
  other.ops[2].a = 2;
  EXPECT_EQ((*plan_graph(other, none, 8))[0], Kernel::kRope);
}

TEST(CudaPlan, ReadLater) {
  const Ffn f;
  EXPECT_TRUE(read_later(f.g, 3, f.q8));
  EXPECT_FALSE(read_later(f.g, 4, f.q8));
  EXPECT_TRUE(read_later(f.g, 4, f.x));  // read by the add, and the logits
  EXPECT_FALSE(read_later(f.g, 3, f.gate));
  Ffn scaled;
  scaled.g.ops.push_back({.kind = OpKind::kScale, .dst = scaled.gate, .w = 0});
  EXPECT_TRUE(read_later(scaled.g, 3, scaled.gate));  // in place: reads its dst
}

}  // namespace
}  // namespace bitnet::cuda
