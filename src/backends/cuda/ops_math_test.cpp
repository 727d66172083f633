// The host halves of the non-GEMV kernels (ops_math.h) against the CPU's scalar kernels: the
// rope table and rotation (bit for bit), relu2, the paged cache rows, and the split-K online
// softmax of attention.cu replayed on the host (its slices, warps and merges) against
// attention_head_f16.
#include "backends/cuda/ops_math.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backends/cpu/kernel_set.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/attention_shape.h"
#include "core/fp16.h"

namespace bitnet::cuda {
namespace {

TEST(CudaOpsMath, RopeTableAndRotationMatchTheCpuBitForBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const bool neox : {true, false}) {
    for (const int64_t pos : {0, 1, 17, 4095, 100000}) {
      const int32_t n_head = 3, head_dim = 128, n_rot = neox ? 128 : 64;
      hal::RopeParams p;
      p.style = neox ? hal::RopeStyle::kNeox : hal::RopeStyle::kNorm;
      p.n_rot = n_rot;
      p.freq_base = 500000.0f;
      p.freq_scale = 1.0f;
      std::vector<float> x(static_cast<size_t>(n_head * head_dim));
      for (auto& v : x) v = d(rng);
      std::vector<float> want = x;
      cpu::rope_row(want.data(), n_head, head_dim, pos, p);
      std::vector<float> cs(static_cast<size_t>(n_rot));
      rope_cos_sin(pos, n_rot, p.freq_base, p.freq_scale, cs.data());
      for (int32_t h = 0; h < n_head; ++h) {
        for (int32_t i = 0; i < n_rot / 2; ++i) {
          int32_t a, b;
          rope_pair_index(i, n_rot, neox, a, b);
          rope_pair(x[static_cast<size_t>(h * head_dim + a)], x[static_cast<size_t>(h * head_dim + b)],
                    cs[static_cast<size_t>(2 * i)], cs[static_cast<size_t>(2 * i + 1)]);
        }
      }
      ASSERT_EQ(x, want) << (neox ? "neox" : "norm") << " pos " << pos;
    }
  }
}

TEST(CudaOpsMath, Relu2MatchesTheCpu) {
  const std::vector<float> a = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, 1e20f, -1e-30f};
  const std::vector<float> b = {1.0f, 2.0f, -3.0f, 4.0f, -0.25f, 1e-20f, 7.0f};
  std::vector<float> want(a.size());
  cpu::kScalarKernels.relu2_mul(a.data(), b.data(), static_cast<int64_t>(a.size()), want.data());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(relu2(a[i], b[i]), want[i]) << i;
}

TEST(CudaOpsMath, KvRowsFollowTheBlockTable) {
  const std::vector<int32_t> table = {5, 2, 9};
  const cpu::KvRowMap map{table.data(), 4};
  for (int64_t j = 0; j < 48; ++j) EXPECT_EQ(kv_row(j, table.data(), 4), map.row(j)) << j;
  EXPECT_EQ(kv_row(37, nullptr, 0), 37);
}

// attention.cu's algorithm on the host: slices of split_len positions, 4 "warps" per slice
// taking every 4th position with softmax_add, merged with softmax_merge, then the slices merged.
std::vector<float> split_attention(const std::vector<float>& q, const std::vector<uint16_t>& k,
                                   const std::vector<uint16_t>& v, int64_t n_pos, int32_t head_dim, int64_t kv_off,
                                   int64_t n_embd_kv, float kq_scale, int32_t n_splits, int32_t split_len) {
  std::vector<float> o_all(static_cast<size_t>(head_dim), 0.0f);
  SoftmaxState total{-INFINITY, 0.0f};
  for (int32_t s = 0; s < n_splits; ++s) {
    const int64_t p0 = static_cast<int64_t>(s) * split_len, p1 = std::min<int64_t>(p0 + split_len, n_pos);
    SoftmaxState slice{-INFINITY, 0.0f};
    std::vector<float> o_slice(static_cast<size_t>(head_dim), 0.0f);
    for (int w = 0; w < 4; ++w) {
      SoftmaxState st{-INFINITY, 0.0f};
      std::vector<float> o(static_cast<size_t>(head_dim), 0.0f);
      for (int64_t j = p0 + w; j < p1; j += 4) {
        float dot = 0.0f;
        for (int32_t d = 0; d < head_dim; ++d) dot += q[static_cast<size_t>(d)] * fp16_to_fp32(k[static_cast<size_t>(j * n_embd_kv + kv_off + d)]);
        float p;
        const float corr = softmax_add(st, dot * kq_scale, p);
        for (int32_t d = 0; d < head_dim; ++d) {
          o[static_cast<size_t>(d)] = o[static_cast<size_t>(d)] * corr + p * fp16_to_fp32(v[static_cast<size_t>(j * n_embd_kv + kv_off + d)]);
        }
      }
      float fa, fb;
      softmax_merge(slice, st, fa, fb);
      for (int32_t d = 0; d < head_dim; ++d) o_slice[static_cast<size_t>(d)] = o_slice[static_cast<size_t>(d)] * fa + o[static_cast<size_t>(d)] * fb;
    }
    float fa, fb;
    softmax_merge(total, slice, fa, fb);
    for (int32_t d = 0; d < head_dim; ++d) o_all[static_cast<size_t>(d)] = o_all[static_cast<size_t>(d)] * fa + o_slice[static_cast<size_t>(d)] * fb;
  }
  for (auto& x : o_all) x /= total.l;
  return o_all;
}

TEST(CudaOpsMath, SplitKOnlineSoftmaxMatchesTheCpuAttention) {
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // The split-K algorithm for heads of 128, 80 and 8 (the host model of the algorithm only: the
  // kernels' loads and masks are checked on a device, cuda_kernels_test CudaAttention).
  const int32_t n_head_kv = 2;
  for (const int32_t head_dim : {128, 80, 8}) {
    const int64_t n_embd_kv = n_head_kv * head_dim, n_ctx = 700;
    std::vector<uint16_t> k(static_cast<size_t>(n_ctx * n_embd_kv)), v(k.size());
    for (auto& x : k) x = fp32_to_fp16(dist(rng) * 2.0f);
    for (auto& x : v) x = fp32_to_fp16(dist(rng));
    std::vector<float> q(static_cast<size_t>(head_dim));
    for (auto& x : q) x = dist(rng);
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    for (const int64_t n_pos : {1, 3, 129, 700}) {
      std::vector<float> scores(static_cast<size_t>(n_ctx)), want(static_cast<size_t>(head_dim));
      cpu::kScalarKernels.attention_head_f16(q.data(), k.data(), v.data(), n_pos, cpu::KvRowMap{}, n_embd_kv, head_dim,
                                             head_dim, kq_scale, scores.data(), want.data());
      AttentionShape shape;
      shape.n_head = 8;
      choose_attention_split(shape, n_ctx, 16);  // slices past n_pos stay empty
      const auto got = split_attention(q, k, v, n_pos, head_dim, head_dim, n_embd_kv, kq_scale, shape.n_splits, shape.split_len);
      for (int32_t d = 0; d < head_dim; ++d) {
        ASSERT_NEAR(got[static_cast<size_t>(d)], want[static_cast<size_t>(d)], 2e-5f)
            << "head_dim " << head_dim << " n_pos " << n_pos << " dim " << d;
      }
    }
  }
}

TEST(CudaOpsMath, AttentionSplitFillsTheDeviceWithoutTinySlices) {
  AttentionShape s;
  s.n_head = 20;
  choose_attention_split(s, 4096, 132);  // H100: 132 SMs -> 264 blocks wanted, 14 slices
  EXPECT_EQ(s.n_splits, 14);
  EXPECT_GE(static_cast<int64_t>(s.n_splits) * s.split_len, 4096);
  choose_attention_split(s, 100, 132);  // short context: one slice
  EXPECT_EQ(s.n_splits, 1);
  EXPECT_EQ(s.split_len, 100);
  choose_attention_split(s, 4096, 132, 8);  // 8 sequences: 160 (token, head) rows, 2 slices
  EXPECT_EQ(s.n_splits, 2);
  // A 512-token prompt chunk fills the device with (token, head) blocks: one slice, so its
  // scratch is 512 x 20 x (128 + 2) floats, not 14 times that (75 MB).
  s.head_dim = 128;
  choose_attention_split(s, 4096, 132, 512);
  EXPECT_EQ(s.n_splits, 1);
  EXPECT_EQ(s.split_len, 4096);
  EXPECT_EQ(attention_scratch_floats(s, 512), 512 * 20 * 130);
}

}  // namespace
}  // namespace bitnet::cuda
