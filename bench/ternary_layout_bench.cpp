// The decode GEMV of the 2B-4T layer shapes with the weights streamed from memory, as a decoded
// token reads them, in both ternary layouts (weights.h): 2 bits per weight and T5 (5 codes per
// byte, 1.6 bits), each through the kernel set that reads it. Each layout gets its own copies of
// n_layers layers (more than the L3 holds), walked layer by layer, matrix by matrix; per shape
// the fastest of several passes is reported as time and GB/s of weight bytes read. I2_S weights
// (one scale per row) and TQ2_0 weights (one per 256 columns) are both run.
//
//   flock /tmp/bench.lock build/bin/bench_ternary_layout [n_layers=8] [rounds=2] [set=most specific]
//
// One thread is timed in thread CPU time (a shared host's other processes do not count), two in
// wall time: run it on an idle host.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "core/check.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/quant.h"

namespace bitnet::cpu {
namespace {

struct Shape {
  const char* name;
  int64_t n_rows;
  int64_t n_cols;
};
constexpr Shape kLayer[] = {{"q", 2560, 2560},    {"k", 640, 2560},   {"v", 640, 2560},   {"o", 2560, 2560},
                            {"gate", 6912, 2560}, {"up", 6912, 2560}, {"down", 2560, 6912}};
constexpr int kNMat = 7;
constexpr TernaryLayout kLayouts[] = {TernaryLayout::k2Bit, TernaryLayout::k5Trit};

struct Layer {
  CpuWeight w[2][kNMat];  // [layout][matrix]
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the calling thread.
double thread_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<std::unique_ptr<Layer>> make_layers(GgmlType type, int n_layers, const KernelSet& set,
                                                std::mt19937_64& rng) {
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<uint8_t> codes;
  for (int l = 0; l < n_layers; ++l) {
    auto layer = std::make_unique<Layer>();
    for (int m = 0; m < kNMat; ++m) {
      const Shape s = kLayer[m];
      const int64_t n = s.n_rows * s.n_cols;
      codes.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; i += 16) {
        uint64_t bits = rng();
        for (int64_t k = i; k < std::min(n, i + 16); ++k, bits >>= 4) {
          codes[static_cast<size_t>(k)] = static_cast<uint8_t>((bits & 15) % 3);
        }
      }
      std::vector<float> scales(static_cast<size_t>(n / quant::ternary_scale_block(type, n)));
      for (auto& v : scales) v = fp16_to_fp32(fp32_to_fp16(0.25f + static_cast<float>(rng() % 1000) * 1e-3f));
      const auto bytes = *quant::ternary_encode(type, codes.data(), scales.data(), n);
      const hal::WeightDesc d{"w", type, {s.n_cols, s.n_rows, 1, 1}, bytes};
      for (int k = 0; k < 2; ++k) {
        auto w = prepare_weight(d, set.ternary_rows_per_group, nullptr, kLayouts[k]);
        layer->w[k][m] = std::move(*w);
      }
    }
    layers.push_back(std::move(layer));
  }
  return layers;
}

void run_gemv(const KernelSet& set, const CpuWeight& w, const Q8Rows& x, float* y, ThreadPool& pool) {
  const int64_t rows = w.ternary.rows_per_group;
  pool.parallel_for((w.n_rows + rows - 1) / rows, 4, [&](int64_t g0, int64_t g1) {
    set.matmul_ternary(w, x, y, g0 * rows, std::min(w.n_rows, g1 * rows));
  });
}

}  // namespace
}  // namespace bitnet::cpu

int main(int argc, char** argv) {
  using namespace bitnet;
  using namespace bitnet::cpu;
  const int n_layers = argc > 1 ? std::atoi(argv[1]) : 8;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 2;
  const auto found = select_kernel_set(argc > 3 ? argv[3] : "", detect_cpu_features());
  if (!found) {
    fmt::print("{}\n", found.status().to_string());
    return 1;
  }
  const KernelSet& set = **found;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Q8Buffer act[2];  // one token of 2560 and one of 6912 columns
  for (int i = 0; i < 2; ++i) {
    const int64_t n_cols = i == 0 ? 2560 : 6912;
    std::vector<float> x(static_cast<size_t>(n_cols));
    for (auto& v : x) v = nd(rng);
    act[i].resize(1, n_cols);
    act[i].quantize(set, 0, x.data());
  }
  std::vector<float> y[2] = {std::vector<float>(6912), std::vector<float>(6912)};

  for (GgmlType type : {GgmlType::kI2_S, GgmlType::kTQ2_0}) {
    const auto layers = make_layers(type, n_layers, set, rng);
    double bytes[2][kNMat] = {};
    for (int m = 0; m < kNMat; ++m) {
      for (int k = 0; k < 2; ++k) bytes[k][m] = static_cast<double>(layers[0]->w[k][m].ternary.packed.size());
    }
    fmt::print("{}, set {}: {} layers of {:.2f} MB (2-bit) / {:.2f} MB ({})\n", ggml_type_name(type), set.name,
               n_layers, [&] { double b = 0; for (double v : bytes[0]) b += v; return b / 1e6; }(),
               [&] { double b = 0; for (double v : bytes[1]) b += v; return b / 1e6; }(),
               layers[0]->w[1][0].ternary.layout == TernaryLayout::k5Trit ? "T5" : "2-bit: this set reads no T5");
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      const auto clock = threads == 1 ? thread_s : now_s;
      for (int round = 0; round < rounds; ++round) {
        for (int k = 0; k < 2; ++k) {
          // Per shape the fastest of `passes` passes over all layers (on a shared host a pass
          // another process interrupted is dropped), and the fastest whole pass.
          const int passes = threads == 1 ? 10 : 40;
          double best_mat[kNMat];
          std::fill_n(best_mat, kNMat, 1e9);
          double best_pass = 1e9;
          for (int pass = 0; pass <= passes; ++pass) {
            double t_mat[kNMat] = {};
            for (const auto& layer : layers) {
              for (int m = 0; m < kNMat; ++m) {
                const double t0 = clock();
                run_gemv(set, layer->w[k][m], act[kLayer[m].n_cols == 2560 ? 0 : 1].rows(), y[k].data(), pool);
                t_mat[m] += clock() - t0;
              }
            }
            if (pass == 0) continue;  // warm-up
            double total = 0;
            for (int m = 0; m < kNMat; ++m) {
              best_mat[m] = std::min(best_mat[m], t_mat[m]);
              total += t_mat[m];
            }
            best_pass = std::min(best_pass, total);
          }
          std::string line = fmt::format("{} threads {} round {} {:5}", ggml_type_name(type), threads, round,
                                         k == 0 ? "2-bit" : "T5");
          for (int m = 0; m < kNMat; ++m) {
            line += fmt::format(" | {} {:.1f} GB/s {:.0f} us", kLayer[m].name, n_layers * bytes[k][m] / best_mat[m] / 1e9,
                                best_mat[m] / n_layers * 1e6);
          }
          line += fmt::format(" | layer {:.0f} us, x30 {:.2f} ms", best_pass / n_layers * 1e6, best_pass / n_layers * 30e3);
          fmt::print("{}\n", line);
        }
        BITNET_CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)) == 0);
      }
    }
  }
  return 0;
}
