// NEON set (baseline AArch64 Advanced SIMD, every AArch64 CPU), W2A8 part: the ternary matmul
// on widening multiplies (SMULL/SMLAL into int16, drained into int32), and the activation
// quantization. Decode takes a row group of 4 rows at a time; prefill takes one row against a
// tile of 8 tokens, walking the rows in cache blocks so that every token tile finds the
// block's codes in L2. Bit-identical to the scalar twin: integer dots are exact, and the float
// update per scale block is the scalar expression evaluated lane by lane with separate
// multiply, divide and add (the backend is compiled with -ffp-contract=off).
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_neon.h"
#include "backends/cpu/kernels_ternary_driver.h"
#include "quant/act_quant.h"

namespace bitnet::cpu::neon {

namespace {

constexpr int kRows = kTernaryRows;

// Groups whose products are summed in int16 lanes before widening. A lane of one output's
// int16 sum takes 16 products per group (4 fields x 2 halves x low/high 8 bytes), each
// |code * q| <= 2 * 128: at most 4096 per group, 16384 over 4 groups, half the int16 range
// (8 groups could reach -32768, the very edge; bitnet.cpp's AVX2 kernel overflows, #629).
constexpr int64_t kInt16Groups = 4;

// One 128-column group's codes (32 bytes) as int8 vectors in {0, 1, 2}: c[k][h] is 2-bit
// field k (bits 7-6 for k = 0 ... bits 1-0 for k = 3) of code bytes 16h .. 16h+15, which
// meets the activations of columns 32k + 16h .. 32k + 16h + 15.
struct GroupCodes {
  int8x16_t c[4][2];
};

GroupCodes unpack_codes(const uint8_t* bytes) {
  const uint8x16_t mask = vdupq_n_u8(3);
  GroupCodes g;
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t v = vld1q_u8(bytes + 16 * h);
    g.c[0][h] = vreinterpretq_s8_u8(vshrq_n_u8(v, 6));
    g.c[1][h] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), mask));
    g.c[2][h] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), mask));
    g.c[3][h] = vreinterpretq_s8_u8(vandq_u8(v, mask));
  }
  return g;
}

// The activations of one group in the same order: a[k][h] = columns 32k + 16h .. +15.
struct GroupActs {
  int8x16_t a[4][2];
};

GroupActs load_acts(const int8_t* q) {
  GroupActs g;
  for (int k = 0; k < 4; ++k) {
    for (int h = 0; h < 2; ++h) g.a[k][h] = vld1q_s8(q + 32 * k + 16 * h);
  }
  return g;
}

// dot16 + code * q over one group, 16 products per int16 lane.
int16x8_t add_group_dot(int16x8_t dot16, const GroupCodes& w, const GroupActs& x) {
  for (int k = 0; k < 4; ++k) {
    for (int h = 0; h < 2; ++h) {
      dot16 = vmlal_s8(dot16, vget_low_s8(w.c[k][h]), vget_low_s8(x.a[k][h]));
      dot16 = vmlal_high_s8(dot16, w.c[k][h], x.a[k][h]);
    }
  }
  return dot16;
}

// Decode: token t, the 4 rows of row group rg; each activation vector is loaded once for the
// 4 rows. Returns the 4 outputs. Inlined by force: GCC would call it once per row group from
// the shared decode loop.
[[gnu::always_inline]] inline float32x4_t gemv_row_group(const CpuWeight& w, const TernaryShape& sh,
                                                         const Q8Rows& x, int64_t t, int64_t rg) {
  const int8_t* q = x.q + t * w.n_cols;
  const uint8_t* codes = w.ternary.packed.data() + rg * sh.n_groups * kRows * kGroupBytes;
  const float* scales = w.ternary.scales.data() + rg * sh.n_blocks * kRows;
  const float32x4_t s = vdupq_n_f32(x.scale[t]);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    int32_t dot[kRows] = {};
    int32_t act_sum = 0;
    for (int64_t span = g0; span < g1; span += kInt16Groups) {
      int16x8_t dot16[kRows];
      for (auto& d : dot16) d = vdupq_n_s16(0);
      for (int64_t g = span; g < std::min(g1, span + kInt16Groups); ++g) {
        const GroupActs a = load_acts(q + g * kGroupCols);
        const uint8_t* group = codes + g * kRows * kGroupBytes;
        for (int i = 0; i < kRows; ++i) dot16[i] = add_group_dot(dot16[i], unpack_codes(group + i * kGroupBytes), a);
        act_sum += x.group_sum[g * x.token_stride + t];
      }
      for (int i = 0; i < kRows; ++i) dot[i] += vaddlvq_s16(dot16[i]);
    }
    const float32x4_t d = vcvtq_f32_s32(vsubq_s32(vld1q_s32(dot), vdupq_n_s32(act_sum)));
    acc = vaddq_f32(acc, vmulq_f32(vdivq_f32(d, s), vld1q_f32(scales + b * kRows)));
  }
  return acc;
}

// Prefill: one row against T tokens (t0 .. t0+T-1); each group's codes are unpacked once and
// reused for the T tokens. Lane j of the float accumulators is token t0 + j.
template <int T>
void gemm_row(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t r, float* y) {
  // Row r's group g is at row_codes + g * kRows * kGroupBytes, its block b's scale at
  // row_scales[b * kRows] (weights.h).
  const uint8_t* row_codes = w.ternary.packed.data() + ((r / kRows) * sh.n_groups * kRows + r % kRows) * kGroupBytes;
  const float* row_scales = w.ternary.scales.data() + (r / kRows) * sh.n_blocks * kRows + r % kRows;
  const int8_t* q = x.q + t0 * w.n_cols;
  // Scales and group sums are padded to 8 tokens (kTokenPad): lanes of tokens >= T read
  // scale 1 and sum 0, and are dropped.
  const float32x4_t s[2] = {vld1q_f32(x.scale + t0), vld1q_f32(x.scale + t0 + 4)};
  float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    const int64_t g0 = b * sh.block_groups;
    const int64_t g1 = g0 + sh.block_groups;
    int32_t dot[kTileTokens] = {};
    int32x4_t act_sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int64_t span = g0; span < g1; span += kInt16Groups) {
      int16x8_t dot16[T];
      for (auto& d : dot16) d = vdupq_n_s16(0);
      for (int64_t g = span; g < std::min(g1, span + kInt16Groups); ++g) {
        const GroupCodes c = unpack_codes(row_codes + g * kRows * kGroupBytes);
        for (int j = 0; j < T; ++j) dot16[j] = add_group_dot(dot16[j], c, load_acts(q + j * w.n_cols + g * kGroupCols));
        const int32_t* sums = x.group_sum + g * x.token_stride + t0;
        act_sum[0] = vaddq_s32(act_sum[0], vld1q_s32(sums));
        act_sum[1] = vaddq_s32(act_sum[1], vld1q_s32(sums + 4));
      }
      for (int j = 0; j < T; ++j) dot[j] += vaddlvq_s16(dot16[j]);
    }
    const float32x4_t scale = vdupq_n_f32(row_scales[b * kRows]);
    for (int h = 0; h < 2; ++h) {
      const float32x4_t d = vcvtq_f32_s32(vsubq_s32(vld1q_s32(dot + 4 * h), act_sum[h]));
      acc[h] = vaddq_f32(acc[h], vmulq_f32(vdivq_f32(d, s[h]), scale));
    }
  }
  float out[kTileTokens];
  vst1q_f32(out, acc[0]);
  vst1q_f32(out + 4, acc[1]);
  for (int j = 0; j < T; ++j) y[(t0 + j) * w.n_rows + r] = out[j];
}

// The kernel as the shared drivers call it (kernels_ternary_driver.h).
struct W2A8 {
  static constexpr int kRows = kTernaryRows;
  // A cache block of row groups small enough for the L2 of small cores (256 KiB and up) next
  // to a tile's activations.
  static constexpr int64_t kBlockCodeBytes = 128 << 10;
  static void row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg,
                        float* out) {
    vst1q_f32(out, gemv_row_group(w, sh, x, t, rg));
  }
  template <int T>
  static void tile(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t0, int64_t ra, int64_t rb,
                   float* y) {
    for (int64_t r = ra; r < rb; ++r) gemm_row<T>(w, sh, x, t0, r, y);
  }
};

// 16 activations as act_quant_i8: FCVTNS rounds half to even, saturates and sends NaN to 0;
// the saturating narrowings then clamp to [-128, 127].
int8x16_t quantize16(const float* x, float32x4_t s) {
  int16x4_t h[4];
  for (int i = 0; i < 4; ++i) h[i] = vqmovn_s32(vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * i), s)));
  return vcombine_s8(vqmovn_s16(vcombine_s16(h[0], h[1])), vqmovn_s16(vcombine_s16(h[2], h[3])));
}

float max_abs(const float* x, int64_t n) {
  // FMAXNM returns the number when the other operand is NaN: a NaN |x| never becomes the max.
  float32x4_t m = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + i)));
  float amax = vmaxnmvq_f32(m);
  for (; i < n; ++i) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  return amax;
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  ternary_matmul<W2A8>(w, x, y, r0, r1);
}

float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride) {
  // As act_quant_i8: max|x| floored at 1e-5 in double, s = (float)(127 / max).
  const float s = static_cast<float>(127.0 / std::max(static_cast<double>(max_abs(x, n_cols)), 1e-5));
  const float32x4_t sv = vdupq_n_f32(s);
  for (int64_t k0 = 0; k0 < n_cols; k0 += kGroupCols) {
    const int64_t k1 = std::min(n_cols, k0 + kGroupCols);
    int16x8_t sum = vdupq_n_s16(0);  // 16 values of |q| <= 128 per lane: no overflow
    int64_t k = k0;
    for (; k + 16 <= k1; k += 16) {
      const int8x16_t v = quantize16(x + k, sv);
      vst1q_s8(q + k, v);
      sum = vpadalq_s8(sum, v);
    }
    int32_t total = vaddlvq_s16(sum);
    for (; k < k1; ++k) {
      q[k] = quant::act_quant_one(x[k], s);
      total += q[k];
    }
    group_sum[k0 / kGroupCols * group_sum_stride] = total;
  }
  return s;
}

}  // namespace bitnet::cpu::neon

namespace bitnet::cpu {

namespace {
constexpr std::string_view kNeonNeeds[] = {"neon"};
}

constinit const KernelSet kNeonKernels = {
    .name = "neon",
    .needs = kNeonNeeds,
    .ternary_rows_per_group = neon::kTernaryRows,
    .matmul_ternary = neon::matmul_ternary,
    .matmul_float = neon::matmul_float,
    .quant_dot = neon::quant_dot,
    .quantize_act = neon::quantize_act,
    .rms_norm_row = neon::rms_norm_row,
    .attention_head = neon::attention_head,
    .attention_head_f16 = neon::attention_head_f16,
    .silu_mul = neon::silu_mul,
    .relu2_mul = neon::relu2_mul,
    .add = neon::add,
    .fp32_to_fp16_row = neon::fp32_to_fp16_row,
};

}  // namespace bitnet::cpu
