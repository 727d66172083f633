// Device tests of the CUDA kernels (ctest -L gpu): each kernel against its host twin and the
// CPU's scalar kernel. Without a CUDA device (this project's build machines: no driver) every
// test reports skipped with the runtime's reason; they have not run on a GPU yet.
#include "backends/cuda/gpu_runtime.h"
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "backends/cpu/kernel_test_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/block_math.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/mma_math.h"
#include "backends/cuda/ops_math.h"
#include "backends/cuda/w2a8_math.h"
#include "backends/cuda/w2c_weights.h"
#include "core/fp16.h"
#include "hal/top.h"
#include "hal/top_testing.h"
#include "quant/quant.h"

namespace bitnet::cuda {
namespace {

// A device copy of a host vector, freed with the test.
template <class T>
class DeviceVec {
 public:
  explicit DeviceVec(size_t n) : n_(n) { EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess); }
  explicit DeviceVec(const std::vector<T>& h) : DeviceVec(h.size()) {
    EXPECT_EQ(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  ~DeviceVec() { (void)cudaFree(p_); }
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> host() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t n_;
};

class CudaKernels : public testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) GTEST_SKIP() << "no " << kGpuApi << " device: GetDeviceCount " << cudaGetErrorName(err);
    if (count == 0) GTEST_SKIP() << "no " << kGpuApi << " device";
  }
  static void sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }
};

std::vector<float> randn(int64_t n, std::mt19937& rng, float sd = 1.0f) { return cpu::test::random_floats(n, rng, sd); }

// n_tokens rows of random activations as the norm kernels quantize them (act_quant_row_twin):
// int8 rows, one scale per row, the sums per 64 columns.
struct QuantizedActs {
  std::vector<int8_t> q;
  std::vector<float> s;
  std::vector<int32_t> sums;
};
QuantizedActs quantized_acts(int64_t n_tokens, int64_t n_cols, std::mt19937& rng) {
  const auto x = randn(n_tokens * n_cols, rng);
  QuantizedActs a{std::vector<int8_t>(x.size()), std::vector<float>(static_cast<size_t>(n_tokens)),
                  std::vector<int32_t>(static_cast<size_t>(n_tokens * n_cols / kChunkCols))};
  for (int64_t t = 0; t < n_tokens; ++t) {
    a.s[static_cast<size_t>(t)] =
        act_quant_row_twin(x.data() + t * n_cols, n_cols, a.q.data() + t * n_cols, a.sums.data() + t * n_cols / kChunkCols);
  }
  return a;
}

TEST_F(CudaKernels, W2a8GemvIsBitExactWithItsTwin) {
  std::mt19937 rng(11);
  const GgmlType types[] = {GgmlType::kI2_S, GgmlType::kTQ2_0, GgmlType::kTQ1_0};
  struct Shape { int64_t n_rows, n_cols; };
  // The 2B-4T shapes (q/o 2560x2560, k/v 640x2560, gate/up 6912x2560, down 2560x6912) and odd ones.
  for (const Shape sh : {Shape{2560, 2560}, Shape{640, 2560}, Shape{6912, 2560}, Shape{2560, 6912}, Shape{7, 256}, Shape{5, 2304}}) {
    for (GgmlType type : types) {
      for (const bool per_block : {false, true}) {
        if (per_block && type == GgmlType::kI2_S) continue;
        const int64_t n = sh.n_rows * sh.n_cols;
        auto scales = cpu::test::random_scales(type, n, rng);
        if (!per_block) std::fill(scales.begin(), scales.end(), scales[0]);
        else if (scales.size() > 1) scales[1] += 0.0078125f;
        const auto f = cpu::test::ternary_file(type, cpu::test::random_codes(n, rng), scales, sh.n_cols, sh.n_rows);
        auto w = repack_w2c(type, f.bytes, sh.n_cols, sh.n_rows);
        ASSERT_TRUE(w.ok()) << w.status().to_string();
        DeviceVec<uint32_t> words(w->words);
        DeviceVec<float> wscales(w->scales);
        for (const int64_t n_tokens : {1, 3, 9}) {
          const auto [q, s, sums] = quantized_acts(n_tokens, sh.n_cols, rng);
          DeviceVec<int8_t> dq(q);
          DeviceVec<float> ds(s);
          DeviceVec<int32_t> dsums(sums);
          DeviceVec<float> y(static_cast<size_t>(n_tokens * sh.n_rows));
          const W2cView view{words.get(), wscales.get(), sh.n_rows, sh.n_cols, w->scale_block};
          ASSERT_EQ(w2a8_gemv(view, Q8View{dq.get(), ds.get(), dsums.get()}, n_tokens, y.get(), nullptr), cudaSuccess);
          sync();
          const auto got = y.host();
          const int64_t n_blocks = sh.n_cols / w->scale_block;
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < sh.n_rows; ++r) {
              const float want = w2a8_row_twin(w->words.data() + r * sh.n_cols / kWordCols, q.data() + t * sh.n_cols,
                                               sums.data() + t * sh.n_cols / kChunkCols, s[static_cast<size_t>(t)],
                                               w->scales.data() + r * n_blocks, sh.n_cols, w->scale_block);
              ASSERT_EQ(got[static_cast<size_t>(t * sh.n_rows + r)], want)
                  << ggml_type_name(type) << " " << sh.n_rows << "x" << sh.n_cols << " row " << r << " token " << t;
            }
          }
        }
      }
    }
  }
}

TEST_F(CudaKernels, W2a8MmaGemmIsBitExactWithTheCpu) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  if (prop.major < 8) GTEST_SKIP() << "int8 mma.m16n8k32 needs sm_80, this is sm_" << prop.major << prop.minor;
  std::mt19937 rng(19);
  struct Case {
    GgmlType type;
    int64_t n_rows, n_cols, n_tokens;
    bool per_block;
  };
  for (const Case k : {Case{GgmlType::kI2_S, 2560, 2560, 64, false}, Case{GgmlType::kI2_S, 6912, 2560, 37, false},
                       Case{GgmlType::kI2_S, 2560, 6912, 5, false}, Case{GgmlType::kTQ2_0, 77, 768, 33, true},
                       Case{GgmlType::kTQ1_0, 640, 2560, 100, true}, Case{GgmlType::kI2_S, 640, 2560, 200, false},
                       Case{GgmlType::kTQ2_0, 77, 768, 161, true}}) {  // over 128 tokens: the tiled kernel
    const int64_t n = k.n_rows * k.n_cols;
    auto scales = cpu::test::random_scales(k.type, n, rng);
    if (!k.per_block) std::fill(scales.begin(), scales.end(), scales[0]);
    else scales[1] += 0.0078125f;
    const auto f = cpu::test::ternary_file(k.type, cpu::test::random_codes(n, rng), scales, k.n_cols, k.n_rows);
    auto w = repack_w2c(k.type, f.bytes, k.n_cols, k.n_rows);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const auto [q, s, sums] = quantized_acts(k.n_tokens, k.n_cols, rng);
    DeviceVec<uint32_t> words(w->words);
    DeviceVec<float> wscales(w->scales), ds(s), y(static_cast<size_t>(k.n_tokens * k.n_rows));
    DeviceVec<int8_t> dq(q);
    DeviceVec<int32_t> dsums(sums);
    const W2cView view{words.get(), wscales.get(), k.n_rows, k.n_cols, w->scale_block};
    ASSERT_EQ(w2a8_gemm_mma(view, Q8View{dq.get(), ds.get(), dsums.get()}, k.n_tokens, y.get(), prop.major, nullptr),
              cudaSuccess);
    sync();
    std::vector<float> want(static_cast<size_t>(k.n_tokens * k.n_rows));
    w2a8_mma_twin(w->words.data(), w->scales.data(), k.n_rows, k.n_cols, w->scale_block, q.data(), s.data(),
                  sums.data(), k.n_tokens, want.data());
    ASSERT_EQ(y.host(), want) << ggml_type_name(k.type) << " " << k.n_rows << "x" << k.n_cols << " tokens " << k.n_tokens;
  }
  // Rows the file formats never have (a multiple of 64 columns, not of 128: the tiled kernel's last
  // tile is partial), from W2C words drawn directly, with per-row and 64-column scale blocks.
  for (const auto& [n_rows, n_cols, n_tokens, scale_block] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{77, 192, 145, 192}, {70, 320, 9, 64}, {129, 448, 160, 448}}) {
    std::vector<uint32_t> words(static_cast<size_t>(n_rows * n_cols / kWordCols));
    for (auto& w : words) {
      uint32_t codes[kWordCols];
      for (auto& code : codes) code = static_cast<uint32_t>(rng() % 3);
      w = pack_word(codes);
    }
    std::vector<float> wscales(static_cast<size_t>(n_rows * (n_cols / scale_block)));
    for (auto& v : wscales) v = 0.25f + static_cast<float>(rng() % 64) / 64.0f;
    const auto [q, s, sums] = quantized_acts(n_tokens, n_cols, rng);
    DeviceVec<uint32_t> dwords(words);
    DeviceVec<float> dws(wscales), ds(s), y(static_cast<size_t>(n_tokens * n_rows));
    DeviceVec<int8_t> dq(q);
    DeviceVec<int32_t> dsums(sums);
    const W2cView view{dwords.get(), dws.get(), n_rows, n_cols, scale_block};
    ASSERT_EQ(w2a8_gemm_mma(view, Q8View{dq.get(), ds.get(), dsums.get()}, n_tokens, y.get(), prop.major, nullptr),
              cudaSuccess);
    sync();
    std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
    w2a8_mma_twin(words.data(), wscales.data(), n_rows, n_cols, scale_block, q.data(), s.data(), sums.data(), n_tokens,
                  want.data());
    ASSERT_EQ(y.host(), want) << n_rows << "x" << n_cols << " tokens " << n_tokens << " blocks of " << scale_block;
  }
}

TEST_F(CudaKernels, RmsNormQuantMatchesTheCpu) {
  std::mt19937 rng(12);
  for (const int64_t n_cols : {64, 2560, 6912, 10240}) {  // 10240: wider than the rows held in registers
    const int64_t n_tokens = 3;
    const auto x = randn(n_tokens * n_cols, rng, 4.0f);
    const auto g = randn(n_cols, rng);
    DeviceVec<float> dx(x), dg(g), normed(static_cast<size_t>(n_tokens * n_cols)), ds(static_cast<size_t>(n_tokens));
    DeviceVec<int8_t> dq(static_cast<size_t>(n_tokens * n_cols));
    DeviceVec<int32_t> dsums(static_cast<size_t>(n_tokens * n_cols / kChunkCols));
    ASSERT_EQ(rms_norm_quant(dx.get(), dg.get(), n_tokens, n_cols, 1e-5f, Q8View{dq.get(), ds.get(), dsums.get()},
                             normed.get(), nullptr),
              cudaSuccess);
    sync();
    const auto got_y = normed.host();
    const auto got_q = dq.host();
    const auto got_s = ds.host();
    const auto got_sums = dsums.host();
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> y(static_cast<size_t>(n_cols));
      cpu::kScalarKernels.rms_norm_row(x.data() + t * n_cols, g.data(), n_cols, 1e-5f, y.data());
      for (int64_t i = 0; i < n_cols; ++i) {
        ASSERT_NEAR(got_y[static_cast<size_t>(t * n_cols + i)], y[static_cast<size_t>(i)], 1e-6f * (1.0f + std::fabs(y[static_cast<size_t>(i)])));
      }
      // From the device's own y the quantization is exact (act_quant_row_twin).
      std::vector<int8_t> q(static_cast<size_t>(n_cols));
      std::vector<int32_t> sums(static_cast<size_t>(n_cols / kChunkCols));
      const float s = act_quant_row_twin(got_y.data() + t * n_cols, n_cols, q.data(), sums.data());
      EXPECT_EQ(got_s[static_cast<size_t>(t)], s);
      EXPECT_TRUE(std::equal(q.begin(), q.end(), got_q.begin() + t * n_cols));
      EXPECT_TRUE(std::equal(sums.begin(), sums.end(), got_sums.begin() + t * n_cols / kChunkCols));
    }
  }
}

TEST_F(CudaKernels, GatedRmsNormQuantMatchesTheCpu) {
  std::mt19937 rng(18);
  const int64_t n_tokens = 2, n_cols = 6912;
  const auto a = randn(n_tokens * n_cols, rng, 2.0f), b = randn(n_tokens * n_cols, rng), g = randn(n_cols, rng);
  for (const Gate gate : {Gate::kRelu2, Gate::kSilu}) {
    DeviceVec<float> da(a), db(b), dg(g), normed(static_cast<size_t>(n_tokens * n_cols)), ds(static_cast<size_t>(n_tokens));
    DeviceVec<int8_t> dq(static_cast<size_t>(n_tokens * n_cols));
    DeviceVec<int32_t> dsums(static_cast<size_t>(n_tokens * n_cols / kChunkCols));
    ASSERT_EQ(gated_rms_norm_quant(gate, da.get(), db.get(), dg.get(), n_tokens, n_cols, 1e-5f,
                                   Q8View{dq.get(), ds.get(), dsums.get()}, normed.get(), nullptr),
              cudaSuccess);
    sync();
    const auto got_y = normed.host();
    const auto got_q = dq.host();
    const auto got_s = ds.host();
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> x(static_cast<size_t>(n_cols)), y(static_cast<size_t>(n_cols));
      if (gate == Gate::kRelu2) {
        cpu::kScalarKernels.relu2_mul(a.data() + t * n_cols, b.data() + t * n_cols, n_cols, x.data());
      } else {
        cpu::kScalarKernels.silu_mul(a.data() + t * n_cols, b.data() + t * n_cols, n_cols, x.data());
      }
      cpu::kScalarKernels.rms_norm_row(x.data(), g.data(), n_cols, 1e-5f, y.data());
      for (int64_t i = 0; i < n_cols; ++i) {
        ASSERT_NEAR(got_y[static_cast<size_t>(t * n_cols + i)], y[static_cast<size_t>(i)], 2e-6f * (1.0f + std::fabs(y[static_cast<size_t>(i)])));
      }
      std::vector<int8_t> q(static_cast<size_t>(n_cols));
      std::vector<int32_t> sums(static_cast<size_t>(n_cols / kChunkCols));
      EXPECT_EQ(got_s[static_cast<size_t>(t)], act_quant_row_twin(got_y.data() + t * n_cols, n_cols, q.data(), sums.data()));
      EXPECT_TRUE(std::equal(q.begin(), q.end(), got_q.begin() + t * n_cols));
    }
  }
}

// The residual add fused into the norm: the sum written in place over its first input (as a
// layer's x += out), and the norm, quantization and normed rows those of add then
// rms_norm_quant, bit for bit.
TEST_F(CudaKernels, AddRmsNormQuantEqualsAddThenRmsNormQuant) {
  std::mt19937 rng(21);
  const int64_t n_tokens = 3, n_cols = 2560;
  const auto a = randn(n_tokens * n_cols, rng, 2.0f), b = randn(n_tokens * n_cols, rng), g = randn(n_cols, rng);
  const auto n = static_cast<size_t>(n_tokens * n_cols);
  DeviceVec<float> dg(g);
  // Apart: add into a, then the norm and quantization of the sum.
  DeviceVec<float> pa(a), pb(b), pnormed(n), ps(static_cast<size_t>(n_tokens));
  DeviceVec<int8_t> pq(n);
  DeviceVec<int32_t> psums(n / kChunkCols);
  ASSERT_EQ(add(pa.get(), pb.get(), static_cast<int64_t>(n), pa.get(), nullptr), cudaSuccess);
  ASSERT_EQ(rms_norm_quant(pa.get(), dg.get(), n_tokens, n_cols, 1e-5f, Q8View{pq.get(), ps.get(), psums.get()},
                           pnormed.get(), nullptr),
            cudaSuccess);
  sync();
  const auto want_sum = pa.host();
  // Fused, with the sum written over a (a layer's x += out), over b, and elsewhere.
  for (const int where : {0, 1, 2}) {
    DeviceVec<float> fa(a), fb(b), other(n), fnormed(n), fs(static_cast<size_t>(n_tokens));
    DeviceVec<int8_t> fq(n);
    DeviceVec<int32_t> fsums(n / kChunkCols);
    float* sum = where == 0 ? fa.get() : where == 1 ? fb.get() : other.get();
    ASSERT_EQ(gated_rms_norm_quant(Gate::kAdd, fa.get(), fb.get(), dg.get(), n_tokens, n_cols, 1e-5f,
                                   Q8View{fq.get(), fs.get(), fsums.get()}, fnormed.get(), nullptr, sum),
              cudaSuccess);
    sync();
    const std::vector<float> got_sum = where == 0 ? fa.host() : where == 1 ? fb.host() : other.host();
    EXPECT_EQ(got_sum, want_sum) << "sum " << where;
    EXPECT_EQ(fnormed.host(), pnormed.host()) << "sum " << where;
    EXPECT_EQ(fq.host(), pq.host()) << "sum " << where;
    EXPECT_EQ(fs.host(), ps.host()) << "sum " << where;
    EXPECT_EQ(fsums.host(), psums.host()) << "sum " << where;
  }
  // The launcher refuses kAdd without a sum, and a sum without kAdd.
  DeviceVec<float> da(a), db(b), ds(static_cast<size_t>(n_tokens));
  DeviceVec<int8_t> dq(n);
  DeviceVec<int32_t> dsums(n / kChunkCols);
  EXPECT_NE(gated_rms_norm_quant(Gate::kAdd, da.get(), db.get(), dg.get(), n_tokens, n_cols, 1e-5f,
                                 Q8View{dq.get(), ds.get(), dsums.get()}, nullptr, nullptr),
            cudaSuccess);
  EXPECT_NE(gated_rms_norm_quant(Gate::kNone, da.get(), nullptr, dg.get(), n_tokens, n_cols, 1e-5f,
                                 Q8View{dq.get(), ds.get(), dsums.get()}, nullptr, nullptr, da.get()),
            cudaSuccess);
}

// The two kernels behind gated_rms_norm_quant agree bit for bit: rows held in registers (aligned
// pointers, up to 8192 columns) and rows read three times (here: inputs one float off 16 bytes),
// for every gate, with and without the norm's gain, in place (kAdd's sum over a) too.
TEST_F(CudaKernels, RegisterRowsEqualThreePassRows) {
  std::mt19937 rng(23);
  for (const int64_t n_cols : {64, 2560, 6912, 8192}) {
    const int64_t n_tokens = 3;
    const auto n = static_cast<size_t>(n_tokens * n_cols);
    auto a = randn(static_cast<int64_t>(n), rng, 2.0f), b = randn(static_cast<int64_t>(n), rng), g = randn(n_cols, rng);
    a[5] = 0.0f;
    for (const Gate gate : {Gate::kNone, Gate::kRelu2, Gate::kSilu, Gate::kAdd}) {
      for (const bool gain : {true, false}) {
        std::vector<float> normed[2], sum[2], scale[2];
        std::vector<int8_t> q[2];
        std::vector<int32_t> sums[2];
        for (const int off : {0, 1}) {  // 0: aligned, the register kernel; 1: misaligned, three passes
          std::vector<float> pa(n + 1), pb(n + 1), pg(static_cast<size_t>(n_cols) + 1);
          std::copy(a.begin(), a.end(), pa.begin() + off);
          std::copy(b.begin(), b.end(), pb.begin() + off);
          std::copy(g.begin(), g.end(), pg.begin() + off);
          DeviceVec<float> da(pa), db(pb), dg(pg), dn(n + 1), ds(static_cast<size_t>(n_tokens));
          DeviceVec<int8_t> dq(n);
          DeviceVec<int32_t> dsums(n / kChunkCols);
          const bool add = gate == Gate::kAdd;
          ASSERT_EQ(gated_rms_norm_quant(gate, da.get() + off, gate == Gate::kNone ? nullptr : db.get() + off,
                                         gain ? dg.get() + off : nullptr, n_tokens, n_cols, 1e-5f,
                                         Q8View{dq.get(), ds.get(), dsums.get()}, dn.get() + off, nullptr,
                                         add ? da.get() + off : nullptr),
                    cudaSuccess);
          sync();
          const auto got_n = dn.host(), got_a = da.host();
          normed[off].assign(got_n.begin() + off, got_n.begin() + off + static_cast<std::ptrdiff_t>(n));
          sum[off].assign(got_a.begin() + off, got_a.begin() + off + static_cast<std::ptrdiff_t>(n));
          scale[off] = ds.host();
          q[off] = dq.host();
          sums[off] = dsums.host();
        }
        const std::string what = "cols " + std::to_string(n_cols) + " gate " + std::to_string(static_cast<int>(gate)) +
                                 (gain ? " with gain" : " no gain");
        EXPECT_EQ(normed[0], normed[1]) << what;
        EXPECT_EQ(sum[0], sum[1]) << what;
        EXPECT_EQ(scale[0], scale[1]) << what;
        EXPECT_EQ(q[0], q[1]) << what;
        EXPECT_EQ(sums[0], sums[1]) << what;
      }
    }
  }
}

// q, k and v (rows of 2B-4T's 2560 and 640, and odd counts) in one launch: each output as its own
// w2a8_gemv writes it, bit for bit, for 1, 3 and 8 tokens; and groups of two.
TEST_F(CudaKernels, W2a8GemvGroupEqualsOneLaunchPerWeight) {
  std::mt19937 rng(22);
  const int64_t n_cols = 2560;
  const int64_t rows[kGemvGroupMax] = {2560, 637, 13};
  // TQ2_0 with a scale per 256-column block, I2_S with one per tensor (a scale per row: what
  // the 2B-4T file runs).
  for (const GgmlType type : {GgmlType::kTQ2_0, GgmlType::kI2_S}) {
    std::vector<std::unique_ptr<DeviceVec<uint32_t>>> words;
    std::vector<std::unique_ptr<DeviceVec<float>>> scales;
    W2cView views[kGemvGroupMax];
    for (int i = 0; i < kGemvGroupMax; ++i) {
      const int64_t n = rows[i] * n_cols;
      const auto f = cpu::test::ternary_file(type, cpu::test::random_codes(n, rng),
                                             cpu::test::random_scales(type, n, rng), n_cols, rows[i]);
      auto w = repack_w2c(type, f.bytes, n_cols, rows[i]);
      ASSERT_TRUE(w.ok()) << w.status().to_string();
      words.push_back(std::make_unique<DeviceVec<uint32_t>>(w->words));
      scales.push_back(std::make_unique<DeviceVec<float>>(w->scales));
      views[i] = W2cView{words.back()->get(), scales.back()->get(), rows[i], n_cols, w->scale_block};
    }
    ASSERT_EQ(views[0].scale_block, views[2].scale_block);
    ASSERT_EQ(views[0].scale_block == n_cols, type == GgmlType::kI2_S) << ggml_type_name(type);
    for (const int64_t n_tokens : {1, 3, 8}) {
      const auto [q, s, sums] = quantized_acts(n_tokens, n_cols, rng);
      DeviceVec<int8_t> dq(q);
      DeviceVec<float> ds(s);
      DeviceVec<int32_t> dsums(sums);
      const Q8View xv{dq.get(), ds.get(), dsums.get()};
      for (const int n : {3, 2}) {
        std::vector<std::unique_ptr<DeviceVec<float>>> grouped, single;
        float* ys[kGemvGroupMax] = {};
        for (int i = 0; i < n; ++i) {
          grouped.push_back(std::make_unique<DeviceVec<float>>(static_cast<size_t>(n_tokens * rows[i])));
          single.push_back(std::make_unique<DeviceVec<float>>(static_cast<size_t>(n_tokens * rows[i])));
          ys[i] = grouped.back()->get();
          ASSERT_EQ(w2a8_gemv(views[i], xv, n_tokens, single.back()->get(), nullptr), cudaSuccess);
        }
        ASSERT_EQ(w2a8_gemv_group(views, ys, n, xv, n_tokens, nullptr), cudaSuccess);
        sync();
        for (int i = 0; i < n; ++i) {
          EXPECT_EQ(grouped[static_cast<size_t>(i)]->host(), single[static_cast<size_t>(i)]->host())
              << ggml_type_name(type) << " weight " << i << " of " << n << ", " << n_tokens << " tokens";
        }
      }
    }
    if (type != GgmlType::kI2_S) continue;
    // Weights of different widths are refused.
    W2cView mixed[2] = {views[0], views[1]};
    mixed[1].n_cols = 256;
    float* ys[2] = {nullptr, nullptr};
    EXPECT_NE(w2a8_gemv_group(mixed, ys, 2, Q8View{}, 1, nullptr), cudaSuccess);
  }
}

TEST_F(CudaKernels, RopeIsBitExactWithTheCpu) {
  std::mt19937 rng(13);
  const int32_t n_head = 20, head_dim = 128;
  const int64_t n_tokens = 4;
  hal::RopeParams p{hal::RopeStyle::kNeox, head_dim, 500000.0f, 1.0f};
  auto x = randn(n_tokens * n_head * head_dim, rng);
  std::vector<float> cs(static_cast<size_t>(n_tokens * head_dim));
  const int64_t pos[] = {0, 1, 777, 4095};
  for (int64_t t = 0; t < n_tokens; ++t) rope_cos_sin(pos[t], head_dim, p.freq_base, p.freq_scale, cs.data() + t * head_dim);
  DeviceVec<float> dx(x), dcs(cs);
  ASSERT_EQ(rope(dx.get(), dcs.get(), n_tokens, n_head, head_dim, head_dim, true, nullptr), cudaSuccess);
  sync();
  for (int64_t t = 0; t < n_tokens; ++t) cpu::rope_row(x.data() + t * n_head * head_dim, n_head, head_dim, pos[t], p);
  EXPECT_EQ(dx.host(), x);
}

// rope of q and k and the F16 store of k and v in one launch equal the three launches: q and k
// rotated in place, the cache rows (paged, blocks of 4 positions in a scrambled order) written
// with the same bits; with every dimension rotated and with half of them (n_rot < head_dim),
// NEOX and NORM pairs.
TEST_F(CudaKernels, RopeStoreKvEqualsRopeRopeStoreKv) {
  std::mt19937 rng(23);
  const int32_t n_head = 20, n_head_kv = 5, head_dim = 128;
  const int64_t n_tokens = 3, n_embd_kv = n_head_kv * head_dim, n_ctx = 64;
  const std::vector<int32_t> pos = {5, 6, 40}, begin = {0, 0, 0};
  std::vector<int32_t> table(n_ctx / 4);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 5 + 2) % table.size());
  DeviceVec<int32_t> dpos(pos), dbegin(begin), dtable(table);
  const KvRows rows{dpos.get(), dbegin.get(), dtable.get(), 2};
  for (const int32_t n_rot : {128, 64}) {
    for (const bool neox : {true, false}) {
      const auto q = randn(n_tokens * n_head * head_dim, rng), k = randn(n_tokens * n_embd_kv, rng),
                 v = randn(n_tokens * n_embd_kv, rng);
      std::vector<float> cs(static_cast<size_t>(n_tokens * n_rot));
      for (int64_t t = 0; t < n_tokens; ++t) rope_cos_sin(pos[static_cast<size_t>(t)], n_rot, 10000.0f, 1.0f, cs.data() + t * n_rot);
      DeviceVec<float> dcs(cs), dv(v);
      DeviceVec<float> fq(q), fk(k), pq(q), pk(k);
      const size_t cache = static_cast<size_t>(n_ctx * n_embd_kv);
      DeviceVec<uint16_t> fkc(std::vector<uint16_t>(cache, 0x7e00)), fvc(std::vector<uint16_t>(cache, 0x7e00)),
          pkc(std::vector<uint16_t>(cache, 0x7e00)), pvc(std::vector<uint16_t>(cache, 0x7e00));
      ASSERT_EQ(rope_store_kv_f16(fq.get(), fk.get(), dv.get(), dcs.get(), n_tokens, n_head, n_head_kv, head_dim, n_rot,
                                  neox, rows, fkc.get(), fvc.get(), nullptr),
                cudaSuccess);
      ASSERT_EQ(rope(pq.get(), dcs.get(), n_tokens, n_head, head_dim, n_rot, neox, nullptr), cudaSuccess);
      ASSERT_EQ(rope(pk.get(), dcs.get(), n_tokens, n_head_kv, head_dim, n_rot, neox, nullptr), cudaSuccess);
      ASSERT_EQ(store_kv_f16(pk.get(), dv.get(), n_tokens, n_embd_kv, rows, pkc.get(), pvc.get(), nullptr), cudaSuccess);
      sync();
      const std::string what = fmt::format("n_rot {}, {}", n_rot, neox ? "neox" : "norm");
      EXPECT_EQ(fq.host(), pq.host()) << what;
      EXPECT_EQ(fk.host(), pk.host()) << what;
      EXPECT_EQ(fkc.host(), pkc.host()) << what;
      EXPECT_EQ(fvc.host(), pvc.host()) << what;
    }
  }
}

TEST_F(CudaKernels, ElementwiseOpsMatchTheCpu) {
  std::mt19937 rng(14);
  const int64_t n = 6912 * 3 + 5;
  const auto a = randn(n, rng, 3.0f), b = randn(n, rng);
  DeviceVec<float> da(a), db(b), dst(static_cast<size_t>(n));
  std::vector<float> want(static_cast<size_t>(n));
  ASSERT_EQ(add(da.get(), db.get(), n, dst.get(), nullptr), cudaSuccess);
  cpu::kScalarKernels.add(a.data(), b.data(), n, want.data());
  EXPECT_EQ(dst.host(), want);
  ASSERT_EQ(relu2_mul(da.get(), db.get(), n, dst.get(), nullptr), cudaSuccess);
  cpu::kScalarKernels.relu2_mul(a.data(), b.data(), n, want.data());
  EXPECT_EQ(dst.host(), want);
  ASSERT_EQ(silu_mul(da.get(), db.get(), n, dst.get(), nullptr), cudaSuccess);
  cpu::kScalarKernels.silu_mul(a.data(), b.data(), n, want.data());
  const auto got = dst.host();
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)], 4e-7f * (1.0f + std::fabs(want[static_cast<size_t>(i)])));
}

// Heads of 128 (2B-4T) and 64 take the half2 kernels; 8 (stories260K), 80 and 200 the
// bounds-checked ones.
class CudaAttention : public CudaKernels, public testing::WithParamInterface<int32_t> {};

TEST_P(CudaAttention, StoreKvAndSplitAttentionMatchTheCpu) {
  std::mt19937 rng(15);
  AttentionShape shape;
  shape.n_head = 20;
  shape.n_head_kv = 5;
  shape.head_dim = GetParam();
  shape.n_embd_kv = 5 * int64_t{shape.head_dim};
  shape.kq_scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  const int64_t n_ctx = 1024;
  choose_attention_split(shape, n_ctx, 132);
  // A paged cache of 64-row blocks in a scrambled order; positions 0..n_pos-1 written by store_kv.
  const int32_t shift = 6;
  std::vector<int32_t> table(static_cast<size_t>(n_ctx >> shift));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>((i * 7 + 3) % table.size());
  for (const int64_t n_pos : {1, 100, 1024}) {
    const auto k = randn(n_pos * shape.n_embd_kv, rng), v = randn(n_pos * shape.n_embd_kv, rng);
    std::vector<int32_t> pos(static_cast<size_t>(n_pos)), begin(static_cast<size_t>(n_pos), 0);
    for (int64_t j = 0; j < n_pos; ++j) pos[static_cast<size_t>(j)] = static_cast<int32_t>(j);
    DeviceVec<float> dk(k), dv(v);
    DeviceVec<int32_t> dpos(pos), dbegin(begin), dtable(table);
    DeviceVec<uint16_t> kc(static_cast<size_t>(n_ctx * shape.n_embd_kv)), vc(static_cast<size_t>(n_ctx * shape.n_embd_kv));
    const KvRows store_rows{dpos.get(), dbegin.get(), dtable.get(), shift};
    ASSERT_EQ(store_kv_f16(dk.get(), dv.get(), n_pos, shape.n_embd_kv, store_rows, kc.get(), vc.get(), nullptr), cudaSuccess);
    // One query token at position n_pos - 1.
    const auto q = randn(shape.n_head * shape.head_dim, rng);
    const std::vector<int32_t> qpos = {static_cast<int32_t>(n_pos - 1)}, qbegin = {0};
    DeviceVec<float> dq(q), out(static_cast<size_t>(shape.n_head * shape.head_dim));
    DeviceVec<float> scratch(static_cast<size_t>(attention_scratch_floats(shape, 1)));
    DeviceVec<int32_t> dqpos(qpos), dqbegin(qbegin);
    const KvRows rows{dqpos.get(), dqbegin.get(), dtable.get(), shift};
    ASSERT_EQ(attention_f16(dq.get(), kc.get(), vc.get(), rows, shape, 1, scratch.get(), out.get(), nullptr), cudaSuccess);
    sync();
    const auto kch = kc.host(), vch = vc.host();
    const cpu::KvRowMap map{table.data(), shift};
    for (int64_t j = 0; j < n_pos; ++j) {
      for (int64_t d = 0; d < shape.n_embd_kv; d += 37) {
        ASSERT_EQ(kch[static_cast<size_t>(map.row(j) * shape.n_embd_kv + d)], fp32_to_fp16(k[static_cast<size_t>(j * shape.n_embd_kv + d)]));
      }
    }
    const auto got = out.host();
    std::vector<float> scores(static_cast<size_t>(n_ctx)), want(static_cast<size_t>(shape.head_dim));
    for (int32_t h = 0; h < shape.n_head; ++h) {
      const int64_t kv_off = int64_t{h / 4} * shape.head_dim;
      cpu::kScalarKernels.attention_head_f16(q.data() + h * shape.head_dim, kch.data(), vch.data(), n_pos, map,
                                             shape.n_embd_kv, kv_off, shape.head_dim, shape.kq_scale, scores.data(),
                                             want.data());
      for (int32_t d = 0; d < shape.head_dim; ++d) {
        ASSERT_NEAR(got[static_cast<size_t>(h * shape.head_dim + d)], want[static_cast<size_t>(d)], 2e-5f)
            << "n_pos " << n_pos << " head " << h << " dim " << d;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, CudaAttention, testing::Values(128, 64, 8, 80, 200),
                         [](const auto& p) { return fmt::format("head{}", p.param); });

// One row of a block format as the float GEMV adds it: lane l takes columns 8l + 256s (s = 0,
// 1, ...), adding each step's 8 products in order to its sum, then the warp's butterfly (lane l
// adds lane l ^ off's sum, off = 16 ... 1); lane 0's result is written. The device's kernels
// (the generic one and Q6_K's read-ahead one) must give exactly this.
float block_gemv_row_twin(BlockFormat f, const uint8_t* row, int64_t n_cols, const float* x) {
  float lane_sum[kWarp] = {};
  const int elems = block_elems(f), bytes = block_bytes(f);
  for (int l = 0; l < kWarp; ++l) {
    for (int64_t k = 8 * l; k < n_cols; k += 8 * kWarp) {
      float w[8];
      for (int j = 0; j < 8; ++j) w[j] = block_value(f, row + (k + j) / elems * bytes, static_cast<int>((k + j) % elems));
      const float* a = x + k;
      lane_sum[l] += w[0] * a[0] + w[1] * a[1] + w[2] * a[2] + w[3] * a[3] + w[4] * a[4] + w[5] * a[5] + w[6] * a[6] +
                     w[7] * a[7];
    }
  }
  for (int off = kWarp / 2; off >= 1; off /= 2) {
    float next[kWarp];
    for (int l = 0; l < kWarp; ++l) next[l] = lane_sum[l] + lane_sum[l ^ off];
    std::copy(next, next + kWarp, lane_sum);
  }
  return lane_sum[0];
}

// (tokens, columns): one token (decode: the Q6_K head's read-ahead kernel), five (the 4-token
// tiles), and rows of 3 blocks of 256 (a Q6_K row shorter than one read-ahead round).
class CudaFloatGemv : public CudaKernels, public testing::WithParamInterface<std::pair<int64_t, int64_t>> {};

TEST_P(CudaFloatGemv, MatchesTheCpu) {
  std::mt19937 rng(16);
  const int64_t n_rows = 1003, n_cols = GetParam().second, n_tokens = GetParam().first;
  const auto wf = randn(n_rows * n_cols, rng, 0.05f);
  const auto x = randn(n_tokens * n_cols, rng);
  for (const GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                              GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
                              GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS}) {
    const std::optional<BlockFormat> block = block_format_of(type);
    auto bytes = quant::quantize(type, wf.data(), n_rows, n_cols);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    const cpu::test::FileWeight f{*bytes, type, n_cols, n_rows};
    const cpu::CpuWeight cw = cpu::test::prepare(f, 1);
    std::vector<float> want(static_cast<size_t>(n_tokens * n_rows));
    cpu::kScalarKernels.matmul_float(cw, x.data(), n_tokens, want.data(), 0, n_rows);
    // Q8_0 and the block formats on the CPU dot with 8-bit activations; the GPU dots the floats.
    const bool cpu_quantizes_acts = type == GgmlType::kQ8_0 || block.has_value();
    std::vector<float> deq(wf.size());
    ASSERT_TRUE(quant::dequantize(type, *bytes, n_rows * n_cols, deq.data()).ok());
    FloatWeightView view;
    view.n_rows = n_rows;
    view.n_cols = n_cols;
    DeviceVec<uint8_t> data(type == GgmlType::kQ8_0 ? std::vector<uint8_t>(1) : *bytes);
    std::unique_ptr<DeviceVec<int8_t>> q8;
    std::unique_ptr<DeviceVec<float>> q8d;
    view.data = data.get();
    view.format = type == GgmlType::kF32 ? FloatFormat::kF32 : type == GgmlType::kF16 ? FloatFormat::kF16
                : type == GgmlType::kBF16 ? FloatFormat::kBF16 : block ? FloatFormat::kBlocks : FloatFormat::kQ8_0;
    if (block) view.block = *block;
    if (type == GgmlType::kQ8_0) {
      auto split = split_q8_0(*bytes, n_cols, n_rows);
      ASSERT_TRUE(split.ok());
      q8 = std::make_unique<DeviceVec<int8_t>>(split->q);
      q8d = std::make_unique<DeviceVec<float>>(split->d);
      view.data = q8->get();
      view.q8_d = q8d->get();
    }
    DeviceVec<float> dx(x), y(static_cast<size_t>(n_tokens * n_rows));
    ASSERT_EQ(matmul_float(view, dx.get(), n_tokens, y.get(), nullptr), cudaSuccess);
    sync();
    const auto got = y.host();
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < n_rows; ++r) {
        double exact = 0.0, mag = 0.0;
        for (int64_t k = 0; k < n_cols; ++k) {
          exact += double{deq[static_cast<size_t>(r * n_cols + k)]} * x[static_cast<size_t>(t * n_cols + k)];
          mag += std::fabs(double{deq[static_cast<size_t>(r * n_cols + k)]} * x[static_cast<size_t>(t * n_cols + k)]);
        }
        const size_t i = static_cast<size_t>(t * n_rows + r);
        ASSERT_NEAR(got[i], exact, 1e-5 * mag + 1e-6) << ggml_type_name(type) << " row " << r;
        if (block && t == 0) {  // the device's order of sums, bit for bit (first token)
          const float twin = block_gemv_row_twin(*block, bytes->data() + r * (n_cols / block_elems(*block)) * block_bytes(*block),
                                                 n_cols, x.data());
          ASSERT_EQ(std::memcmp(&got[i], &twin, 4), 0) << ggml_type_name(type) << " row " << r << ": " << got[i] << " vs " << twin;
        }
        if (!cpu_quantizes_acts) {
          ASSERT_NEAR(got[i], want[i], 2e-5 * mag + 1e-6) << ggml_type_name(type) << " row " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaFloatGemv,
                         testing::Values(std::pair<int64_t, int64_t>{1, 2560}, std::pair<int64_t, int64_t>{5, 2560},
                                         std::pair<int64_t, int64_t>{1, 768}),
                         [](const auto& p) { return fmt::format("tokens{}_cols{}", p.param.first, p.param.second); });

// The device's part of each row equals hal::select_top's (hal/top_testing.h's rows: ties at the
// boundary and everywhere, NaN, -0, infinities; k = 1, k past the row, named ids), on rows of
// a 128K vocabulary.
TEST_F(CudaKernels, TopKAndEmbedMatchTheHost) {
  std::mt19937 rng(17);
  const int64_t n_rows = hal::testing::kTopTestRows, n_cols = 128256;
  const std::vector<float> x = hal::testing::top_test_rows(n_cols);
  const std::vector<hal::TopRequest> req = hal::testing::top_test_requests(n_cols);
  hal::TopPlan plan;
  ASSERT_TRUE(hal::plan_top(req, n_cols, plan));
  DeviceVec<float> dx(x);
  DeviceVec<int32_t> words(plan.words);
  DeviceVec<TopEntry> out(static_cast<size_t>(plan.n_out));
  const int32_t* w = words.get();
  const TopArgs args{w, w + n_rows, w + 2 * n_rows + 1, w + hal::TopPlan::also_offset(n_rows)};
  ASSERT_EQ(top_k_rows(dx.get(), n_rows, n_cols, args, out.get(), nullptr), cudaSuccess);
  sync();
  const std::vector<TopEntry> entries = out.host();
  std::vector<std::vector<hal::TokenLogit>> got;
  hal::unpack_top(plan, entries.data(), got);
  hal::testing::expect_top_matches(x, n_cols, req, got);
  EXPECT_EQ(top_k_rows(dx.get(), 0, n_cols, args, out.get(), nullptr), kGpuInvalidValue);

  const int64_t n_vocab = 50, n_embd = 64;
  const auto e = randn(n_vocab * n_embd, rng);
  auto bytes = quant::quantize(GgmlType::kF16, e.data(), n_vocab, n_embd);
  ASSERT_TRUE(bytes.ok());
  DeviceVec<uint8_t> de(*bytes);
  const std::vector<int32_t> tokens = {3, 49, 0};
  DeviceVec<int32_t> dt(tokens);
  DeviceVec<float> rows(tokens.size() * n_embd);
  FloatWeightView view{FloatFormat::kF16, de.get(), nullptr, n_vocab, n_embd};
  ASSERT_EQ(embed_rows(view, dt.get(), 3, rows.get(), nullptr), cudaSuccess);
  sync();
  const auto got_rows = rows.host();
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t k = 0; k < n_embd; ++k) {
      uint16_t h;
      std::memcpy(&h, bytes->data() + (tokens[t] * n_embd + k) * 2, 2);
      ASSERT_EQ(got_rows[t * n_embd + static_cast<size_t>(k)], fp16_to_fp32(h));
    }
  }
  // The block formats: the dequantized rows, bit for bit.
  const auto eb = randn(n_vocab * 256, rng, 0.1f);
  for (const GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                              GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL,
                              GgmlType::kIQ4_XS}) {
    auto qb = quant::quantize(type, eb.data(), n_vocab, 256);
    ASSERT_TRUE(qb.ok());
    std::vector<float> deq(eb.size());
    ASSERT_TRUE(quant::dequantize(type, *qb, n_vocab * 256, deq.data()).ok());
    DeviceVec<uint8_t> dq(*qb);
    DeviceVec<float> brows(tokens.size() * 256);
    FloatWeightView bview{FloatFormat::kBlocks, dq.get(), nullptr, n_vocab, 256, *block_format_of(type)};
    ASSERT_EQ(embed_rows(bview, dt.get(), 3, brows.get(), nullptr), cudaSuccess);
    sync();
    const auto got_b = brows.host();
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int64_t k = 0; k < 256; ++k) {
        ASSERT_EQ(got_b[t * 256 + static_cast<size_t>(k)], deq[static_cast<size_t>(tokens[t] * 256 + k)])
            << ggml_type_name(type) << " token " << tokens[t] << " column " << k;
      }
    }
  }
}

}  // namespace
}  // namespace bitnet::cuda
