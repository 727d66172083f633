// Micro-benchmarks of every CPU kernel set this machine runs: the W2A8 ternary GEMV (decode)
// and GEMM (prefill) on the 2B-4T shapes, the F16 GEMV of a head-like matrix, activation
// quantization. Counters: GB/s = weight bytes read per second (the decode limit is memory
// bandwidth), GMAC/s = multiply-adds per second. `threads` splits rows over a thread pool as
// the backend does.
//
//   build-simd/bin/bench_cpu_kernels --benchmark_filter='gemv'
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/q6_K_lanes.h"
#include "core/fp16.h"
#include "core/huge_pages.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

// 2B-4T shapes as n_rows x n_cols: q/o and k/v-like, gate/up, down.
struct Shape {
  int64_t n_rows;
  int64_t n_cols;
};
constexpr Shape kTernaryShapes[] = {{2560, 2560}, {6912, 2560}, {2560, 6912}};
constexpr Shape kHeadShape = {32000, 2560};

// File bytes of a random weight, kept for the whole run (a CpuWeight may point into them).
const std::vector<uint8_t>& file_bytes(GgmlType type, Shape s) {
  static std::map<std::tuple<int, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& bytes = cache[{static_cast<int>(type), s.n_rows, s.n_cols}];
  if (!bytes.empty()) return bytes;
  std::mt19937 rng(1);
  const int64_t n = s.n_rows * s.n_cols;
  if (quant::is_ternary(type)) {
    std::vector<uint8_t> codes(static_cast<size_t>(n));
    for (auto& c : codes) c = static_cast<uint8_t>(rng() % 3);
    // Scales that differ from block to block: a TQ2_0 weight keeps its scale per 256 columns
    // (equal ones would be collapsed to one per row at load, as for a BitNet checkpoint).
    std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.5f + 0.125f * static_cast<float>(i % 3);
    bytes = *quant::ternary_encode(type, codes.data(), scales.data(), n);
  } else {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = d(rng);
    bytes = *quant::quantize(type, v.data(), s.n_rows, s.n_cols);
  }
  return bytes;
}

CpuWeight weight(const KernelSet& set, GgmlType type, Shape s, std::optional<TernaryLayout> layout = std::nullopt) {
  const hal::WeightDesc d{"w", type, {s.n_cols, s.n_rows, 1, 1}, file_bytes(type, s)};
  auto w = prepare_weight(d, set.ternary_rows_per_group, nullptr, layout.value_or(set.ternary_layout));
  return std::move(*w);
}

std::vector<float> activations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  return x;
}

// Runs fn(r0, r1) over all rows, split into row groups of `rows` over the pool's threads.
void split_rows(ThreadPool& pool, int64_t n_rows, int64_t rows, const auto& fn) {
  pool.parallel_for((n_rows + rows - 1) / rows, 1, [&](int64_t g0, int64_t g1) {
    fn(g0 * rows, std::min(n_rows, g1 * rows));
  });
}

void set_counters(benchmark::State& state, double weight_bytes, double macs) {
  const auto n = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(weight_bytes * n / 1e9, benchmark::Counter::kIsRate);
  state.counters["GMAC/s"] = benchmark::Counter(macs * n / 1e9, benchmark::Counter::kIsRate);
}

// The W2A8 matmul of n_tokens against `copies` weights of shape s used in turn: one stays in
// cache; 16 of 6912x2560 (70 MB) come from memory, as in a decode step of several sequences.
void bench_ternary_in(benchmark::State& state, const KernelSet* set, GgmlType type, Shape s, int64_t n_tokens,
                      int n_threads, int copies, TernaryLayout layout) {
  std::vector<CpuWeight> ws;
  for (int i = 0; i < copies; ++i) ws.push_back(weight(*set, type, s, layout));
  const auto x = activations(n_tokens * s.n_cols, 2);
  Q8Buffer q8;
  q8.resize(n_tokens, s.n_cols);
  for (int64_t t = 0; t < n_tokens; ++t) q8.quantize(*set, t, x.data() + t * s.n_cols);
  const Q8Rows q = q8.rows();
  std::vector<float> y(static_cast<size_t>(n_tokens * s.n_rows));
  ThreadPool pool(n_threads);
  int i = 0;
  for (auto _ : state) {
    const CpuWeight& w = ws[static_cast<size_t>(i++ % copies)];
    split_rows(pool, s.n_rows, set->ternary_rows_per_group,
               [&](int64_t r0, int64_t r1) { set->matmul_ternary(w, q, y.data(), r0, r1); });
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, static_cast<double>(ws[0].ternary.packed.size()),
               static_cast<double>(s.n_rows * s.n_cols * n_tokens));
}

// bench_ternary_in in the set's own layout.
void bench_ternary(benchmark::State& state, const KernelSet* set, GgmlType type, Shape s, int64_t n_tokens,
                   int n_threads, int copies) {
  bench_ternary_in(state, set, type, s, n_tokens, n_threads, copies, set->ternary_layout);
}

void bench_float(benchmark::State& state, const KernelSet* set, GgmlType type, Shape s, int64_t n_tokens, int n_threads) {
  const CpuWeight w = weight(*set, type, s);
  const auto x = activations(n_tokens * s.n_cols, 3);
  std::vector<float> y(static_cast<size_t>(n_tokens * s.n_rows));
  ThreadPool pool(n_threads);
  for (auto _ : state) {
    split_rows(pool, s.n_rows, 8, [&](int64_t r0, int64_t r1) { set->matmul_float(w, x.data(), n_tokens, y.data(), r0, r1); });
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, static_cast<double>(w.raw.size()), static_cast<double>(s.n_rows * s.n_cols * n_tokens));
}

// A quant-format weight against n_tokens tokens as the backend runs it: activations quantized
// once (the weight's activation format), each thread's share of rows through matmul_quant_rows
// with the set's tile. lanes: Q6_K weights and activations in lane order (q6_K_lanes.h) through
// the set's q6_K_lanes_dot / _tile, as the backend runs a file-backed Q6_K head.
void bench_quant_tile(benchmark::State& state, const KernelSet* set, GgmlType type, Shape s, int64_t n_tokens, int n_threads,
                      bool lanes) {
  CpuWeight w = weight(*set, type, s);
  const QuantActFormat f = *quant_act_format(type);
  const auto x = activations(n_tokens * s.n_cols, 3);
  const int64_t act_row_bytes = f.row_bytes(s.n_cols);
  std::vector<uint8_t> act(static_cast<size_t>(n_tokens * act_row_bytes));
  for (int64_t t = 0; t < n_tokens; ++t) f.quantize_row(x.data() + t * s.n_cols, s.n_cols, act.data() + t * act_row_bytes);
  QuantDotFn dot = set->quant_dot(type);
  QuantTileFn tile = set->quant_tile != nullptr ? set->quant_tile(type) : nullptr;
  if (lanes) {
    w.owned.resize(w.raw.size());
    for (size_t b = 0; b < w.raw.size() / 210; ++b) q6_K_block_to_lanes(w.raw.data() + 210 * b, w.owned.data() + 210 * b);
    w.raw = std::span<const uint8_t>(w.owned.data(), w.owned.size());
    for (size_t b = 0; b < act.size() / f.bytes; ++b) q8_K_block_to_lanes(act.data() + f.bytes * b);
    dot = set->q6_K_lanes_dot();
    tile = set->q6_K_lanes_tile();
  }
  std::vector<float> y(static_cast<size_t>(n_tokens * s.n_rows));
  ThreadPool pool(n_threads);
  for (auto _ : state) {
    split_rows(pool, s.n_rows, 8, [&](int64_t r0, int64_t r1) {
      matmul_quant_rows(w, act.data(), act_row_bytes, n_tokens, y.data(), r0, r1, dot, tile);
    });
    benchmark::DoNotOptimize(y.data());
  }
  set_counters(state, static_cast<double>(w.raw.size()), static_cast<double>(s.n_rows * s.n_cols * n_tokens));
}

void bench_quantize(benchmark::State& state, const KernelSet* set, int64_t n_cols) {
  const auto x = activations(n_cols, 4);
  Q8Buffer q8;
  q8.resize(1, n_cols);
  for (auto _ : state) {
    q8.quantize(*set, 0, x.data());
    benchmark::DoNotOptimize(q8.rows().q);
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n_cols * 4) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// One decode token of 2B-4T's attention (20 query heads over 5 kv heads of 128, an F16 cache of
// n_pos positions): per head (attention_head_f16), or per kv group of 4 (attention_heads_f16:
// each K and V row read once for the group). GB/s counts the cache once per token. prefetch:
// as a decode token (the kernels prefetch the rows ahead) or as a prompt's token (not).
void bench_attention(benchmark::State& state, const KernelSet* set, int64_t n_pos, bool grouped, bool prefetch) {
  constexpr int32_t kHeads = 20, kKvHeads = 5, kDim = 128;
  constexpr int64_t kEmbdKv = kKvHeads * kDim;
  const auto q = activations(kHeads * kDim, 5);
  const auto kv = activations(2 * n_pos * kEmbdKv, 6);
  std::vector<uint16_t> kv16(kv.size());
  fp32_to_fp16_row(kv.data(), static_cast<int64_t>(kv.size()), kv16.data());
  const uint16_t* k = kv16.data();
  const uint16_t* v = kv16.data() + n_pos * kEmbdKv;
  constexpr int32_t kGroup = kHeads / kKvHeads;
  std::vector<float> scores(static_cast<size_t>(kGroup * n_pos)), out(static_cast<size_t>(kHeads * kDim));
  const float scale = 0.0884f;
  const KvRowMap rows{nullptr, 0, prefetch};
  for (auto _ : state) {
    if (grouped) {
      for (int32_t g = 0; g < kKvHeads; ++g) {
        set->attention_heads_f16(q.data() + g * kGroup * kDim, kGroup, k, v, n_pos, rows, kEmbdKv, g * kDim, kDim,
                                 scale, scores.data(), out.data() + g * kGroup * kDim);
      }
    } else {
      for (int32_t h = 0; h < kHeads; ++h) {
        const int64_t kv_off = (h / kGroup) * kDim;
        set->attention_head_f16(q.data() + h * kDim, k, v, n_pos, rows, kEmbdKv, kv_off, kDim, scale, scores.data(),
                                out.data() + h * kDim);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kv16.size() * 2) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// One decode token's attention over one layer of 2B-4T's F16 cache at n_pos positions, laid
// out as the CPU backend's (head-major, on huge pages), the layers taken in turn from 8 (84 MB
// at 4096 positions: past the L3, as a decode step's cache), items of `heads` query heads over
// n_threads. GB/s counts the layer's K and V rows once.
void bench_attention_streamed(benchmark::State& state, const KernelSet* set, int64_t n_pos, int32_t heads, int n_threads) {
  constexpr int32_t kHeads = 20, kKvHeads = 5, kDim = 128, kLayers = 8;
  constexpr int32_t kGroup = kHeads / kKvHeads;
  const int64_t layer_elems = n_pos * kKvHeads * kDim;
  const size_t n_bytes = static_cast<size_t>(2 * kLayers * layer_elems) * sizeof(uint16_t);
  const std::unique_ptr<uint16_t, std::function<void(uint16_t*)>> kv(
      static_cast<uint16_t*>(allocate_zeroed(n_bytes)), [n_bytes](uint16_t* p) { free_zeroed(p, n_bytes); });
  {
    const auto x = activations(layer_elems, 6);
    for (int l = 0; l < 2 * kLayers; ++l) fp32_to_fp16_row(x.data(), layer_elems, kv.get() + l * layer_elems);
  }
  const auto q = activations(kHeads * kDim, 5);
  ThreadPool pool(n_threads);
  std::vector<float> scores(static_cast<size_t>(n_threads * kMaxGroupHeads * n_pos)), out(static_cast<size_t>(kHeads * kDim));
  const float scale = 0.0884f;
  int layer = 0;
  for (auto _ : state) {
    const uint16_t* k = kv.get() + 2 * (layer++ % kLayers) * layer_elems;
    const uint16_t* v = k + layer_elems;
    pool.parallel_for(kHeads / heads, 1, [&](int slot, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t h = static_cast<int32_t>(i) * heads;
        set->attention_heads_f16(q.data() + h * kDim, heads, k, v, n_pos, KvRowMap{}, kDim, (h / kGroup) * n_pos * kDim, kDim,
                                 scale, scores.data() + slot * kMaxGroupHeads * n_pos, out.data() + h * kDim);
      }
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n_bytes / kLayers) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void register_set(const KernelSet* set) {
  const std::string name(set->name);
  for (Shape s : kTernaryShapes) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(fmt::format("gemv_w2a8/{}/{}x{}/threads:{}", name, s.n_rows, s.n_cols, threads).c_str(),
                                   bench_ternary, set, GgmlType::kI2_S, s, int64_t{1}, threads, 1)->UseRealTime();
    }
    // Prefill: a partial token tile (8 + 5), a prompt of 32 and of 128 tokens.
    for (int64_t n_tokens : {13, 32, 128}) {
      benchmark::RegisterBenchmark(fmt::format("gemm_w2a8/{}/{}x{}/tokens:{}", name, s.n_rows, s.n_cols, n_tokens).c_str(),
                                   bench_ternary, set, GgmlType::kI2_S, s, n_tokens, 1, 1)->UseRealTime();
    }
    benchmark::RegisterBenchmark(fmt::format("gemm_w2a8/{}/{}x{}/tokens:128/threads:2", name, s.n_rows, s.n_cols).c_str(),
                                 bench_ternary, set, GgmlType::kI2_S, s, int64_t{128}, 2, 1)->UseRealTime();
  }
  // A decode step of 8 sequences: the same tile on weights in L1 and L2 (32 and 256 rows), in
  // L3, then streamed from memory.
  for (Shape s : {Shape{32, 2560}, Shape{256, 2560}, Shape{6912, 2560}}) {
    benchmark::RegisterBenchmark(fmt::format("gemm_w2a8/{}/{}x{}/tokens:8", name, s.n_rows, s.n_cols).c_str(), bench_ternary,
                                 set, GgmlType::kI2_S, s, int64_t{8}, 1, 1)->UseRealTime();
  }
  for (int threads : {1, 2}) {
    benchmark::RegisterBenchmark(fmt::format("gemm_w2a8_streamed/{}/6912x2560/tokens:8/threads:{}", name, threads).c_str(),
                                 bench_ternary, set, GgmlType::kI2_S, Shape{6912, 2560}, int64_t{8}, threads, 16)->UseRealTime();
  }
  // Decode and batched steps in the 2-bit layout where the set's own is another (one Zen 4
  // thread reads 2 bits, ternary_layout_for_threads); decode in L3 and streamed (6 copies, 53 MB).
  if (set->ternary_layout != TernaryLayout::k2Bit) {
    benchmark::RegisterBenchmark(fmt::format("gemv_w2a8_2bit/{}/6912x2560/threads:1", name).c_str(), bench_ternary_in, set,
                                 GgmlType::kI2_S, Shape{6912, 2560}, int64_t{1}, 1, 1, TernaryLayout::k2Bit)->UseRealTime();
    // The 2-bit tiles of a batched decode step (8 sequences): in L2, and streamed.
    benchmark::RegisterBenchmark(fmt::format("gemm_w2a8_2bit/{}/256x2560/tokens:8", name).c_str(), bench_ternary_in, set,
                                 GgmlType::kI2_S, Shape{256, 2560}, int64_t{8}, 1, 1, TernaryLayout::k2Bit)->UseRealTime();
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(fmt::format("gemm_w2a8_2bit_streamed/{}/6912x2560/tokens:8/threads:{}", name, threads).c_str(),
                                   bench_ternary_in, set, GgmlType::kI2_S, Shape{6912, 2560}, int64_t{8}, threads, 16,
                                   TernaryLayout::k2Bit)->UseRealTime();
    }
    benchmark::RegisterBenchmark(fmt::format("gemv_w2a8_2bit_streamed/{}/13824x2560/threads:1", name).c_str(), bench_ternary_in,
                                 set, GgmlType::kI2_S, Shape{13824, 2560}, int64_t{1}, 1, 6, TernaryLayout::k2Bit)->UseRealTime();
  }
  // Decode of one sequence, and steps of 2 and 4 (two rows per pass; 8 tokens take one).
  for (int64_t n_tokens : {1, 2, 4}) {
    benchmark::RegisterBenchmark(fmt::format("gemm_w2a8_streamed/{}/13824x2560/tokens:{}/threads:2", name, n_tokens).c_str(),
                                 bench_ternary, set, GgmlType::kI2_S, Shape{13824, 2560}, n_tokens, 2, 6)->UseRealTime();
  }
  // The 2B-4T step's shapes (Q/K/V and gate/up each one weight, the output and down
  // projections), decode and a step of 8 sequences, streamed: at least 80 MB of copies, past
  // the 32 MB L3 of the machines seen.
  for (int64_t n_tokens : {1, 8}) {
    for (Shape s : {Shape{3840, 2560}, Shape{2560, 2560}, Shape{13824, 2560}, Shape{2560, 6912}}) {
      const int copies = static_cast<int>(1 + (int64_t{80} << 20) / (s.n_rows * s.n_cols / 5));
      benchmark::RegisterBenchmark(
          fmt::format("gemm_w2a8_streamed/{}/{}x{}/tokens:{}/threads:2/copies:{}", name, s.n_rows, s.n_cols, n_tokens, copies).c_str(),
          bench_ternary, set, GgmlType::kI2_S, s, n_tokens, 2, copies)->UseRealTime();
    }
  }
  // TQ2_0: a scale per 256 columns, so a float update (and, in a GEMM, a reduction of the
  // tile's accumulators) per 2 groups instead of per row.
  benchmark::RegisterBenchmark(fmt::format("gemv_w2a8_tq2_0/{}/2560x2560/threads:1", name).c_str(), bench_ternary, set,
                               GgmlType::kTQ2_0, Shape{2560, 2560}, int64_t{1}, 1, 1)->UseRealTime();
  benchmark::RegisterBenchmark(fmt::format("gemm_w2a8_tq2_0/{}/2560x2560/tokens:128", name).c_str(), bench_ternary, set,
                               GgmlType::kTQ2_0, Shape{2560, 2560}, int64_t{128}, 1, 1)->UseRealTime();
  // Decode's head: F16 rows through matmul_float; the types dotted against quantized
  // activations (Q8_0, Q6_K) as the backend runs them, activations quantized once and each row
  // through the set's quant_dot (bench_float would take matmul_float's own path, which is the
  // AVX2 set's and quantizes per call).
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    for (int threads : {1, 2}) {
      const std::string label = fmt::format("gemv_{}/{}/{}x{}/threads:{}", ggml_type_name(type), name, kHeadShape.n_rows,
                                            kHeadShape.n_cols, threads);
      if (type == GgmlType::kF16) {
        benchmark::RegisterBenchmark(label.c_str(), bench_float, set, type, kHeadShape, int64_t{1}, threads)->UseRealTime();
      } else {
        benchmark::RegisterBenchmark(label.c_str(), bench_quant_tile, set, type, kHeadShape, int64_t{1}, threads, false)->UseRealTime();
      }
    }
  }
  // The Q6_K row dot on rows in the L2 (537 KB) on one thread: the rate its instructions allow,
  // against the streamed rows above.
  benchmark::RegisterBenchmark(fmt::format("gemv_q6_K/{}/256x2560/threads:1", name).c_str(), bench_quant_tile, set,
                               GgmlType::kQ6_K, Shape{256, 2560}, int64_t{1}, 1, false)->UseRealTime();
  // The same rows in lane order where the set reads them so (a file-backed head).
  if (set->q6_K_lanes_dot != nullptr) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(fmt::format("gemv_q6_K_lanes/{}/{}x{}/threads:{}", name, kHeadShape.n_rows, kHeadShape.n_cols, threads).c_str(),
                                   bench_quant_tile, set, GgmlType::kQ6_K, kHeadShape, int64_t{1}, threads, true)->UseRealTime();
    }
    benchmark::RegisterBenchmark(fmt::format("gemv_q6_K_lanes/{}/256x2560/threads:1", name).c_str(), bench_quant_tile, set,
                                 GgmlType::kQ6_K, Shape{256, 2560}, int64_t{1}, 1, true)->UseRealTime();
    benchmark::RegisterBenchmark(fmt::format("gemm_q6_K_lanes/{}/2048x2560/tokens:8/threads:1", name).c_str(), bench_quant_tile, set,
                                 GgmlType::kQ6_K, Shape{2048, 2560}, int64_t{8}, 1, true)->UseRealTime();
    benchmark::RegisterBenchmark(fmt::format("gemm_q6_K_lanes/{}/{}x{}/tokens:8/threads:2", name, kHeadShape.n_rows, kHeadShape.n_cols).c_str(),
                                 bench_quant_tile, set, GgmlType::kQ6_K, kHeadShape, int64_t{8}, 2, true)->UseRealTime();
  }
  // The Q6_K head of a decode step of 8 sequences: rows in the L3 on one thread, then the
  // head's shape streamed from memory on two.
  if (set->quant_tile != nullptr) {
    benchmark::RegisterBenchmark(fmt::format("gemm_q6_K/{}/2048x2560/tokens:8/threads:1", name).c_str(), bench_quant_tile, set,
                                 GgmlType::kQ6_K, Shape{2048, 2560}, int64_t{8}, 1, false)->UseRealTime();
    benchmark::RegisterBenchmark(fmt::format("gemm_q6_K/{}/{}x{}/tokens:8/threads:2", name, kHeadShape.n_rows, kHeadShape.n_cols).c_str(),
                                 bench_quant_tile, set, GgmlType::kQ6_K, kHeadShape, int64_t{8}, 2, false)->UseRealTime();
  }
  benchmark::RegisterBenchmark(fmt::format("gemm_f16/{}/2560x2560/tokens:8", name).c_str(), bench_float, set,
                               GgmlType::kF16, Shape{2560, 2560}, int64_t{8}, 1)->UseRealTime();
  benchmark::RegisterBenchmark(fmt::format("quantize_act/{}/6912", name).c_str(), bench_quantize, set, int64_t{6912});
  for (int64_t n_pos : {128, 512, 4096}) {
    benchmark::RegisterBenchmark(fmt::format("attention_f16/{}/pos:{}", name, n_pos).c_str(), bench_attention, set, n_pos,
                                 false, true);
    if (set->attention_heads_f16 != nullptr) {
      benchmark::RegisterBenchmark(fmt::format("attention_heads_f16/{}/pos:{}", name, n_pos).c_str(), bench_attention, set,
                                   n_pos, true, true);
      benchmark::RegisterBenchmark(fmt::format("attention_heads_f16/{}/pos:{}/prompt", name, n_pos).c_str(), bench_attention,
                                   set, n_pos, true, false);
    }
  }
  if (set->attention_heads_f16 != nullptr) {
    for (int32_t heads : {2, 4}) {
      benchmark::RegisterBenchmark(fmt::format("attention_streamed_f16/{}/pos:4096/heads:{}/threads:2", name, heads).c_str(),
                                   bench_attention_streamed, set, int64_t{4096}, heads, 2)->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace bitnet::cpu

int main(int argc, char** argv) {
  const bitnet::CpuFeatures features = bitnet::detect_cpu_features();
  for (const bitnet::cpu::KernelSet* set : bitnet::cpu::kernel_sets()) {
    if (set->supported(features)) bitnet::cpu::register_set(set);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
