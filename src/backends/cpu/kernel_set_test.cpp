// Choosing a kernel set (by name, by CPU features), the backend built on each set against the
// scalar backend on a small layer, and the thread pool's slots that per-thread scratch uses.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernel_test_util.h"
#include "core/fp16.h"
#include "core/mmap_file.h"
#include "core/test_temp_dir.h"
#include "core/thread_pool.h"

namespace bitnet::cpu {
namespace {

CpuFeatures features(std::initializer_list<const char*> names) {
  CpuFeatures f;
  for (std::string_view n : names) {
    f.avx2 |= n == "avx2";
    f.fma |= n == "fma";
    f.f16c |= n == "f16c";
    f.avx_vnni |= n == "avx_vnni";
    f.avx512f |= n == "avx512f";
    f.avx512bw |= n == "avx512bw";
    f.avx512vl |= n == "avx512vl";
    f.avx512_vnni |= n == "avx512_vnni";
    f.neon |= n == "neon";
    f.dotprod |= n == "dotprod";
    f.i8mm |= n == "i8mm";
  }
  return f;
}

std::string selected(std::string_view requested, const CpuFeatures& f) {
  auto set = select_kernel_set(requested, f);
  return set.ok() ? std::string((*set)->name) : "error: " + set.status().message();
}

TEST(KernelSets, ScalarComesFirstAndNamesAreUnique) {
  const auto sets = kernel_sets();
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(sets[0]->name, "scalar");
  EXPECT_TRUE(sets[0]->needs.empty());
  std::set<std::string_view> names;
  for (const KernelSet* s : sets) {
    EXPECT_TRUE(names.insert(s->name).second) << s->name;
    EXPECT_GE(s->ternary_rows_per_group, 1) << s->name;
    for (std::string_view need : s->needs) {
      CpuFeatures all = features({"avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"});
      all.neon = all.dotprod = all.i8mm = true;
      EXPECT_TRUE(all.has(need)) << s->name << " needs an unknown feature " << need;
    }
  }
}

TEST(KernelSets, SelectionFollowsTheFeatures) {
  EXPECT_EQ(selected("", CpuFeatures{}), "scalar");
  EXPECT_EQ(selected("scalar", features({"avx2", "fma", "f16c"})), "scalar");
#if defined(__x86_64__)
  EXPECT_EQ(selected("", features({"avx2", "fma", "f16c"})), "avx2");
  EXPECT_EQ(selected("", features({"avx2", "fma"})), "scalar");  // F16C is needed for the F16 head
  EXPECT_EQ(selected("", features({"avx2", "fma", "f16c", "avx_vnni"})), "avxvnni");
  EXPECT_EQ(selected("", features({"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"})),
            "avx512vnni");
  const std::string lacking = selected("avx512vnni", features({"avx2", "fma", "f16c", "avx512f"}));
  EXPECT_NE(lacking.find("lacks avx512bw avx512vl avx512_vnni"), std::string::npos) << lacking;
  EXPECT_NE(lacking.find("it runs: scalar, avx2"), std::string::npos) << lacking;
#elif defined(__aarch64__)
  EXPECT_EQ(selected("", features({"neon"})), "neon");  // a Cortex-A72 (Raspberry Pi 4)
  EXPECT_EQ(selected("", features({"neon", "dotprod"})), "neon-dotprod");
  EXPECT_EQ(selected("", features({"neon", "dotprod", "i8mm"})), "neon-i8mm");
  EXPECT_EQ(selected("", features({"neon", "i8mm"})), "neon");  // neon-i8mm also needs SDOT
  EXPECT_EQ(selected("neon", features({"neon", "dotprod", "i8mm"})), "neon");
  const std::string lacking = selected("neon-i8mm", features({"neon"}));
  EXPECT_NE(lacking.find("lacks dotprod i8mm"), std::string::npos) << lacking;
  EXPECT_NE(lacking.find("it runs: scalar, neon"), std::string::npos) << lacking;
#endif
  const std::string unknown = selected("bogus", CpuFeatures{});
  EXPECT_NE(unknown.find("unknown CPU kernel set 'bogus'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("known: scalar"), std::string::npos) << unknown;
}

TEST(ResolveCpuIsa, OnThisMachine) {
  const CpuFeatures f = detect_cpu_features();
  auto best = resolve_cpu_isa("");
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  EXPECT_EQ(*best, selected("", f));
  EXPECT_EQ(*resolve_cpu_isa("scalar"), "scalar");
  auto bogus = resolve_cpu_isa("bogus");
  ASSERT_FALSE(bogus.ok());
  for (const KernelSet* s : kernel_sets()) EXPECT_NE(bogus.status().message().find(s->name), std::string::npos) << bogus.status().message();
#if defined(__x86_64__)
  if (!f.avx2 || !f.fma || !f.f16c) GTEST_SKIP() << "this CPU lacks avx2, fma or f16c";
  EXPECT_EQ(*resolve_cpu_isa("avx2"), "avx2");
  auto vnni = resolve_cpu_isa("avx512vnni");
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni) {
    EXPECT_EQ(*vnni, "avx512vnni");
    return;
  }
  ASSERT_FALSE(vnni.ok());
  EXPECT_NE(vnni.status().message().find("avx512_vnni"), std::string::npos) << vnni.status().message();
  EXPECT_NE(vnni.status().message().find("avx2"), std::string::npos) << "names what it runs: " << vnni.status().message();
#elif defined(__aarch64__)
  EXPECT_EQ(*resolve_cpu_isa("neon"), "neon");  // Advanced SIMD is mandatory on AArch64
  const char* best_arm = f.dotprod && f.i8mm ? "neon-i8mm" : f.dotprod ? "neon-dotprod" : "neon";
  EXPECT_EQ(*best, best_arm);
  auto i8mm = resolve_cpu_isa("neon-i8mm");
  if (f.dotprod && f.i8mm) {
    EXPECT_EQ(*i8mm, "neon-i8mm");
    return;
  }
  ASSERT_FALSE(i8mm.ok());
  EXPECT_NE(i8mm.status().message().find("i8mm"), std::string::npos) << i8mm.status().message();
  EXPECT_NE(i8mm.status().message().find("it runs: scalar, neon"), std::string::npos) << i8mm.status().message();
#endif
}

TEST(CpuFeatures, NamesAndHasAgree) {
  const CpuFeatures f = detect_cpu_features();
  for (const std::string& n : f.names()) EXPECT_TRUE(f.has(n)) << n;
  EXPECT_FALSE(f.has("no such feature"));
#if defined(__aarch64__)
  EXPECT_TRUE(f.neon);
#endif
}

// The vendor and family as the kernel /proc/cpuinfo reports them (vendor_id, "cpu family").
TEST(CpuFeatures, VendorAndFamilyAsProcCpuinfo) {
#if defined(__x86_64__)
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo to compare with";
  std::string line, vendor;
  int family = -1;
  while (std::getline(cpuinfo, line) && (vendor.empty() || family < 0)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(colon + 2);
    if (line.rfind("cpu family", 0) == 0) family = std::stoi(line.substr(colon + 2));
  }
  if (vendor.empty() || family < 0) GTEST_SKIP() << "/proc/cpuinfo names no vendor_id or cpu family";
  const CpuFeatures f = detect_cpu_features();
  EXPECT_EQ(f.amd, vendor == "AuthenticAMD") << vendor;
  EXPECT_EQ(f.family, family);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(ThreadPool, SlotsAreDistinctPerThreadAndInRange) {
  ThreadPool pool(3);
  std::atomic<int> busy[3] = {};
  std::atomic<int64_t> items{0};
  std::atomic<bool> clash{false};
  pool.parallel_for(3000, 1, [&](int slot, int64_t b, int64_t e) {
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, 3);
    if (busy[slot].fetch_add(1) != 0) clash = true;  // two chunks on one slot at once
    items += e - b;
    busy[slot].fetch_sub(1);
  });
  EXPECT_EQ(items.load(), 3000);
  EXPECT_FALSE(clash.load());
}

// A small decoder layer as one graph: embed, rms_norm, W2A8 q/k/v, rope, KV cache, attention,
// W2A8 output and FFN (squared ReLU), F16 head.
struct Layer {
  static constexpr int64_t kVocab = 50, kEmbd = 256, kHeadDim = 64, kHeads = 4, kHeadsKv = 2, kFf = 512;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<hal::WeightDesc> table;

  hal::WeightId add(GgmlType type, int64_t n_cols, int64_t n_rows, std::vector<uint8_t> bytes) {
    storage.push_back(std::move(bytes));
    table.push_back({fmt::format("w{}", table.size()), type, {n_cols, n_rows, 1, 1}, storage.back()});
    return static_cast<hal::WeightId>(table.size() - 1);
  }
  hal::WeightId add_float(GgmlType type, int64_t n_cols, int64_t n_rows, std::mt19937& rng, float sd) {
    const auto v = test::random_floats(n_cols * n_rows, rng, sd);
    return add(type, n_cols, n_rows, *quant::quantize(type, v.data(), n_rows, n_cols));
  }
  hal::WeightId add_ternary(GgmlType type, int64_t n_cols, int64_t n_rows, std::mt19937& rng) {
    const auto codes = test::random_codes(n_cols * n_rows, rng);
    return add(type, n_cols, n_rows, test::ternary_file(type, codes, test::random_scales(type, n_cols * n_rows, rng), n_cols, n_rows).bytes);
  }
};

hal::Graph layer_graph(int64_t pos0, int64_t n_tokens) {
  using hal::ActType;
  using hal::OpKind;
  using L = Layer;
  hal::Graph g;
  g.n_tokens = n_tokens;
  g.pos0 = pos0;
  g.rope = {hal::RopeStyle::kNeox, L::kHeadDim, 10000.0f, 1.0f};
  g.attn = {L::kHeads, L::kHeadsKv, L::kHeadDim, 1.0f / 8.0f};
  const auto act = [&](int64_t cols, ActType t = ActType::kF32) {
    g.acts.push_back({"a", t, n_tokens, cols});
    return static_cast<hal::ActId>(g.acts.size() - 1);
  };
  const int64_t kv = L::kHeadsKv * L::kHeadDim;
  const auto x = act(L::kEmbd), n = act(L::kEmbd), nq = act(L::kEmbd, ActType::kQ8);
  const auto q = act(L::kEmbd), k = act(kv), v = act(kv), o = act(L::kEmbd), oq = act(L::kEmbd, ActType::kQ8);
  const auto h = act(L::kEmbd), up = act(L::kFf), gate = act(L::kFf), ff = act(L::kFf);
  const auto ffq = act(L::kFf, ActType::kQ8), down = act(L::kEmbd), out = act(L::kEmbd), logits = act(L::kVocab);
  g.ops = {
      {.kind = OpKind::kEmbed, .dst = x, .w = 0},
      {.kind = OpKind::kRmsNorm, .dst = n, .a = x, .w = 1, .eps = 1e-5f},
      {.kind = OpKind::kQuantizeAct, .dst = nq, .a = n},
      {.kind = OpKind::kMatmul, .dst = q, .a = nq, .w = 2},
      {.kind = OpKind::kMatmul, .dst = k, .a = nq, .w = 3},
      {.kind = OpKind::kMatmul, .dst = v, .a = nq, .w = 4},
      {.kind = OpKind::kRope, .dst = q, .n_head = L::kHeads},
      {.kind = OpKind::kRope, .dst = k, .n_head = L::kHeadsKv},
      {.kind = OpKind::kStoreKv, .a = k, .b = v},
      {.kind = OpKind::kAttention, .dst = o, .a = q},
      {.kind = OpKind::kQuantizeAct, .dst = oq, .a = o},
      {.kind = OpKind::kMatmul, .dst = h, .a = oq, .w = 5},
      {.kind = OpKind::kAdd, .dst = h, .a = h, .b = x},
      {.kind = OpKind::kQuantizeAct, .dst = nq, .a = h},
      {.kind = OpKind::kMatmul, .dst = up, .a = nq, .w = 6},
      {.kind = OpKind::kMatmul, .dst = gate, .a = nq, .w = 7},
      {.kind = OpKind::kRelu2Mul, .dst = ff, .a = gate, .b = up},
      {.kind = OpKind::kQuantizeAct, .dst = ffq, .a = ff},
      {.kind = OpKind::kMatmul, .dst = down, .a = ffq, .w = 8},
      {.kind = OpKind::kAdd, .dst = out, .a = down, .b = h},
      {.kind = OpKind::kMatmul, .dst = logits, .a = out, .w = 0},
  };
  g.logits = logits;
  return g;
}

Layer make_layer(GgmlType ternary) {
  std::mt19937 rng(21);
  Layer l;
  const int64_t kv = Layer::kHeadsKv * Layer::kHeadDim;
  l.add_float(GgmlType::kF16, Layer::kEmbd, Layer::kVocab, rng, 1.0f);  // embedding and head
  l.add_float(GgmlType::kF32, Layer::kEmbd, 1, rng, 1.0f);
  l.add_ternary(ternary, Layer::kEmbd, Layer::kEmbd, rng);
  l.add_ternary(ternary, Layer::kEmbd, kv, rng);
  l.add_ternary(ternary, Layer::kEmbd, kv, rng);
  l.add_ternary(ternary, Layer::kEmbd, Layer::kEmbd, rng);
  l.add_ternary(ternary, Layer::kEmbd, Layer::kFf, rng);
  l.add_ternary(ternary, Layer::kEmbd, Layer::kFf, rng);
  l.add_ternary(ternary, Layer::kFf, Layer::kEmbd, rng);
  return l;
}

// Logits of a prefill of 7 tokens and 3 decode steps.
std::vector<std::vector<float>> run_layer(hal::Backend& b, const Layer& l, hal::KvType kv_type = hal::KvType::kF32) {
  EXPECT_TRUE(b.load_weights(l.table).ok());
  EXPECT_TRUE(b.init_kv({1, 16, Layer::kHeadsKv * Layer::kHeadDim, kv_type}).ok());
  std::vector<std::vector<float>> out;
  int64_t pos = 0;
  for (int64_t n : {7, 1, 1, 1}) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((pos + t) * 7 % Layer::kVocab);
    std::vector<float> logits(static_cast<size_t>(n * Layer::kVocab));
    const Status s = b.compute(layer_graph(pos, n), tokens, logits);
    EXPECT_TRUE(s.ok()) << s.to_string();
    out.push_back(std::move(logits));
    pos += n;
  }
  return out;
}

class BackendOnSet : public test::EverySet {};

TEST_P(BackendOnSet, LayerMatchesTheScalarBackend) {
  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0}) {
    const Layer l = make_layer(type);
    auto reference = make_cpu_backend({1, "scalar"});
    auto backend = make_cpu_backend({2, GetParam()});
    EXPECT_EQ(backend->info().name, "cpu-" + GetParam());
    const auto want = run_layer(*reference, l);
    const auto got = run_layer(*backend, l);
    ASSERT_EQ(got.size(), want.size());
    for (size_t s = 0; s < want.size(); ++s) {
      ASSERT_EQ(got[s].size(), want[s].size());
      for (size_t i = 0; i < want[s].size(); ++i) {
        // Float sums (rms_norm, attention, the F16 head) round differently and the W2A8 steps
        // may move an activation by one int8 step; the logits stay within 1e-3 relative.
        EXPECT_NEAR(got[s][i], want[s][i], 1e-3 * (1.0 + std::abs(want[s][i]))) << "step " << s << " logit " << i;
      }
    }
    const auto names = backend->kernels_used();
    for (const char* kernel : {"act_quant_i8_", "matmul_f16_", "attention_f32_", "rope_neox_"}) {
      EXPECT_NE(std::find(names.begin(), names.end(), kernel + GetParam()), names.end()) << kernel << GetParam();
    }
    // The W2A8 matmul is named with the ternary layout it read: "t5" for 5 codes per byte.
    const KernelSet* set = *select_kernel_set(GetParam(), detect_cpu_features());
    const std::string w2a8 = set->ternary_layout == TernaryLayout::k5Trit ? "matmul_w2a8_t5_" : "matmul_w2a8_";
    EXPECT_NE(std::find(names.begin(), names.end(), w2a8 + GetParam()), names.end()) << w2a8 << GetParam();
    EXPECT_GT(backend->stats().weight_bytes, 0u);
    // Each weight's bytes as this set reads them: the file's for float weights, the repack's for
    // ternary ones (on 256 columns a T5 row still takes one 64-byte vector); all within the
    // resident total.
    uint64_t total = 0;
    for (size_t i = 0; i < l.table.size(); ++i) {
      const auto id = static_cast<hal::WeightId>(i);
      total += backend->weight_bytes(id);
      if (quant::is_ternary(l.table[i].type)) {
        EXPECT_GT(backend->weight_bytes(id), 0u) << i;
      } else {
        EXPECT_EQ(backend->weight_bytes(id), l.table[i].bytes.size()) << i;
      }
    }
    EXPECT_LE(total, backend->stats().weight_bytes);
    EXPECT_EQ(backend->weight_bytes(static_cast<hal::WeightId>(l.table.size())), 0u);
  }
}

// An F16 KV cache: the same layer on each set matches the scalar backend with an F16 cache as
// closely as F32 does, runs the F16 attention kernel and holds half the bytes.
TEST_P(BackendOnSet, F16CacheMatchesTheScalarBackendInHalfTheBytes) {
  const Layer l = make_layer(GgmlType::kI2_S);
  auto reference = make_cpu_backend({1, "scalar"});
  auto backend = make_cpu_backend({2, GetParam()});
  auto backend_f32 = make_cpu_backend({2, GetParam()});
  const auto want = run_layer(*reference, l, hal::KvType::kF16);
  const auto got = run_layer(*backend, l, hal::KvType::kF16);
  const auto got_f32 = run_layer(*backend_f32, l, hal::KvType::kF32);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    for (size_t i = 0; i < want[s].size(); ++i) {
      EXPECT_NEAR(got[s][i], want[s][i], 1e-3 * (1.0 + std::abs(want[s][i]))) << "step " << s << " logit " << i;
    }
  }
  EXPECT_NE(got, got_f32);  // the cache really holds halves
  const auto names = backend->kernels_used();
  EXPECT_NE(std::find(names.begin(), names.end(), "attention_f16_" + GetParam()), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "attention_f32_" + GetParam()), names.end());
  const hal::BackendStats f16 = backend->stats(), f32 = backend_f32->stats();
  EXPECT_EQ(f16.kv_type, hal::KvType::kF16);
  EXPECT_EQ(f32.kv_type, hal::KvType::kF32);
  EXPECT_EQ(f32.kv_bytes, 2u * 16 * Layer::kHeadsKv * Layer::kHeadDim * 4);
  EXPECT_EQ(f16.kv_bytes * 2, f32.kv_bytes);
}

INSTANTIATE_TEST_SUITE_P(Sets, BackendOnSet, testing::ValuesIn(test::set_names()), test::set_param_name);

// A tied Q6_K embedding and head read from a mapped file, large enough to be copied (the copy a
// set may take in lane order, q6_K_lanes.h): the embedding rows and the logits of a prompt
// (the tile) and of one token (the row dot) match the scalar backend's, which reads the file's
// order.
TEST_P(BackendOnSet, AFileBackedQ6_KHeadMatchesTheScalarBackend) {
  constexpr int64_t kCols = 256, kRows = 25000;  // 5.2 MB: above kHugeBlockBytes
  std::mt19937 rng(23);
  const auto values = test::random_floats(kCols * kRows, rng);
  const auto bytes = *quant::quantize(GgmlType::kQ6_K, values.data(), kRows, kCols);
  const auto path = bitnet::test::process_temp_dir("bitnet_kernel_set_test_") / "q6_K_head.bin";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  auto map = MappedFile::open(path.string());
  ASSERT_TRUE(map.ok()) << map.status().message();
  hal::WeightDesc d{"token_embd", GgmlType::kQ6_K, {kCols, kRows, 1, 1}, map->bytes()};
  d.file_backed = true;
  const std::vector<hal::WeightDesc> table = {d};

  const auto run = [&](hal::Backend& b) {
    EXPECT_TRUE(b.load_weights(table).ok());
    EXPECT_TRUE(b.init_kv({1, 16, 64, hal::KvType::kF32}).ok());
    std::vector<std::vector<float>> out;
    for (int64_t n : {5, 1}) {
      hal::Graph g;
      g.n_tokens = n;
      g.acts.push_back({"x", hal::ActType::kF32, n, kCols});
      g.acts.push_back({"logits", hal::ActType::kF32, n, kRows});
      g.ops = {{.kind = hal::OpKind::kEmbed, .dst = 0, .w = 0}, {.kind = hal::OpKind::kMatmul, .dst = 1, .a = 0, .w = 0}};
      g.logits = 1;
      std::vector<int32_t> tokens(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7919 + 11) % kRows);
      std::vector<float> logits(static_cast<size_t>(n * kRows));
      const Status s = b.compute(g, tokens, logits);
      EXPECT_TRUE(s.ok()) << s.to_string();
      out.push_back(std::move(logits));
    }
    return out;
  };
  auto reference = make_cpu_backend({1, "scalar"});
  auto backend = make_cpu_backend({2, GetParam()});
  const auto want = run(*reference);
  const auto got = run(*backend);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size());
    double worst = 0.0;
    for (size_t i = 0; i < want[s].size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[s][i]) - want[s][i]) / (1.0 + std::abs(want[s][i])));
    // The same int32 block sums, the float steps in another order; a lane-order copy read in
    // the wrong order would be off by the logits' own size.
    EXPECT_LT(worst, 1e-4) << "test " << s;
  }
  // The set that has lane-order kernels ran them.
  const KernelSet* set = *select_kernel_set(GetParam(), detect_cpu_features());
  const std::string matmul = set->q6_K_lanes_dot != nullptr ? "matmul_q6_K_lanes_" : "matmul_q6_K_";
  const auto names = backend->kernels_used();
  EXPECT_NE(std::find(names.begin(), names.end(), matmul + GetParam()), names.end()) << matmul << GetParam();
}

TEST(CpuBackend, AnUnknownSetIsALoadError) {
  auto backend = make_cpu_backend({1, "bogus"});
  const Layer l = make_layer(GgmlType::kI2_S);
  const Status s = backend->load_weights(l.table);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bogus"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace bitnet::cpu
