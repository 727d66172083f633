// Micro-benchmarks of the kernel sets' quantized-activation row dots (KernelSet::quant_dot):
// a GEMV of a 2048 x 2048 weight of each llama.cpp quant type against one activation row
// quantized to the type's vec_dot_type, one thread, row after row as the backend calls it.
// The "scalar" set runs the twins (quant::vec_dot_fn), the baseline of the SIMD sets.
// tile_qdot_*: the prefill tiles (KernelSet::quant_tile) over 64 tokens, and over 4 and 8 tokens
// of 2560 columns (a serve step of 4 or 8 clients through the 2B model's output head).
// Counters (per CPU second, the machine may be shared): GB/s = weight bytes read per second,
// GMAC/s = multiply-adds per second.
//
//   build-x86/bin/bench_quant_dot --benchmark_filter='q4_1'
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <map>
#include <span>
#include <random>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "backends/cpu/kernels.h"
#include "core/fp16.h"
#include "gguf/types.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

constexpr int64_t kRows = 2048;
constexpr int64_t kCols = 2048;

std::vector<float> normal_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  return x;
}

// Random weights of `type` (kRows rows of kCols), kept for the whole run: normal values through
// the reference quantizer.
const std::vector<uint8_t>& weight_bytes(GgmlType type) {
  static std::map<int, std::vector<uint8_t>> cache;
  auto& bytes = cache[static_cast<int>(type)];
  if (bytes.empty()) bytes = *quant::quantize(type, normal_floats(kRows * kCols, 1).data(), kRows, kCols);
  return bytes;
}

void bench_gemv(benchmark::State& state, const KernelSet* set, GgmlType type) {
  const auto& w = weight_bytes(type);
  const auto a = *quant::quantize(*quant::vec_dot_type(type), normal_floats(kCols, 2).data(), 1, kCols);
  const QuantDotFn dot = set->quant_dot(type);
  const auto row_bytes = static_cast<int64_t>(w.size()) / kRows;
  std::vector<float> y(kRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r) y[static_cast<size_t>(r)] = dot(kCols, w.data() + r * row_bytes, a.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * n / 1e9, benchmark::Counter::kIsRate);
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(kRows * kCols) * n / 1e9, benchmark::Counter::kIsRate);
}

// Prefill: the same weight rows against kTileTokens activation rows through matmul_quant_rows
// with the set's quant_tile (quant_dot token by token where it has none), as the backend calls
// it from one thread. kTileCols columns (SmolLM2's n_embd: 18 blocks of 32, 2.25 of 256; 768
// for the 256-element formats), or kStepCols (BitNet b1.58 2B's n_embd) against each of kStepTokens.
constexpr int64_t kTileTokens = 64;
constexpr int64_t kTileCols = 576;
constexpr int64_t kStepTokens[] = {4, 8};
constexpr int64_t kStepCols = 2560;

void bench_tile(benchmark::State& state, const KernelSet* set, GgmlType type, int64_t tokens, int64_t cols_wanted) {
  const GgmlTypeTraits t = *ggml_type_traits(static_cast<uint32_t>(type));
  const int64_t cols = cols_wanted % t.block_elems == 0 ? cols_wanted : 768;
  const auto& all = weight_bytes(type);
  CpuWeight w;
  w.type = type;
  w.n_cols = cols;
  w.row_bytes = cols / t.block_elems * t.block_bytes;
  w.n_rows = static_cast<int64_t>(all.size()) / w.row_bytes;
  w.raw = std::span<const uint8_t>(all.data(), static_cast<size_t>(w.n_rows * w.row_bytes));
  const int64_t rows = w.n_rows;
  const auto a = *quant::quantize(*quant::vec_dot_type(type), normal_floats(cols * tokens, 2).data(), tokens, cols);
  const int64_t a_row_bytes = static_cast<int64_t>(a.size()) / tokens;
  const QuantTileFn tile = set->quant_tile != nullptr ? set->quant_tile(type) : nullptr;
  std::vector<float> y(static_cast<size_t>(tokens * rows));
  for (auto _ : state) {
    matmul_quant_rows(w, a.data(), a_row_bytes, tokens, y.data(), 0, rows, set->quant_dot(type), tile);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["GMAC/s"] = benchmark::Counter(static_cast<double>(rows * cols * tokens) * n / 1e9, benchmark::Counter::kIsRate);
}

void register_set(const KernelSet* set) {
  for (uint32_t t = 0; t < 64; ++t) {
    const auto type = static_cast<GgmlType>(t);
    if (!ggml_type_traits(t).has_value() || quant::vec_dot_fn(type) == nullptr) continue;
    benchmark::RegisterBenchmark(fmt::format("gemv_qdot_{}/{}/{}x{}", ggml_type_name(type), set->name, kRows, kCols).c_str(),
                                 bench_gemv, set, type);
    benchmark::RegisterBenchmark(fmt::format("tile_qdot_{}/{}/{}tok", ggml_type_name(type), set->name, kTileTokens).c_str(),
                                 bench_tile, set, type, kTileTokens, kTileCols);
    for (const int64_t tokens : kStepTokens) {
      benchmark::RegisterBenchmark(fmt::format("tile_qdot_{}/{}/{}tok", ggml_type_name(type), set->name, tokens).c_str(),
                                   bench_tile, set, type, tokens, kStepCols);
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
