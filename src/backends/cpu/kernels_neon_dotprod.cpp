// NEON dotprod set: the NEON set with a W2A8 matmul on SDOT (Armv8.2 dot product), which adds
// groups of 4 int8 products straight into int32 lanes: no int16 stage, no overflow to guard.
// Codes {0, 1, 2} are valid signed bytes, so the signed-by-signed SDOT takes them as they are.
// Same loops as the NEON kernel: a row group of 4 rows per decoded token, and for prefill one
// row against a tile of 8 tokens over cache blocks of rows.
// Compiled with -march=armv8.2-a+dotprod: only intrinsics, this file's own helpers and the
// internal-linkage drivers of kernels_ternary_driver.h (no shared header inlines with loops,
// see CMakeLists.txt), called only after the CPU was checked.
#include <arm_neon.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_neon.h"
#include "backends/cpu/kernels_ternary_driver.h"

namespace bitnet::cpu::neon_dotprod {

namespace {

constexpr int kRows = neon::kTernaryRows;

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

// dot + code * q over one group; q: the group's 128 activations.
int32x4_t add_group_dot(int32x4_t dot, const GroupCodes& w, const int8_t* q) {
  for (int k = 0; k < 4; ++k) {
    for (int h = 0; h < 2; ++h) dot = vdotq_s32(dot, w.c[k][h], vld1q_s8(q + 32 * k + 16 * h));
  }
  return dot;
}

// {sum of a[0], ..., sum of a[3]}.
int32x4_t hsum4(const int32x4_t a[4]) { return vpaddq_s32(vpaddq_s32(a[0], a[1]), vpaddq_s32(a[2], a[3])); }

// Decode: token t, the 4 rows of row group rg. The activations are read once per group for
// the 4 rows (from L1 after the first). Returns the 4 outputs.
float32x4_t gemv_row_group(const CpuWeight& w, const TernaryShape& sh, const Q8Rows& x, int64_t t, int64_t rg) {
  const int8_t* q = x.q + t * w.n_cols;
  const uint8_t* codes = w.ternary.packed.data() + rg * sh.n_groups * kRows * kGroupBytes;
  const float* scales = w.ternary.scales.data() + rg * sh.n_blocks * kRows;
  const float32x4_t s = vdupq_n_f32(x.scale[t]);
  float32x4_t acc = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < sh.n_blocks; ++b) {
    int32x4_t dot[kRows];
    for (auto& d : dot) d = vdupq_n_s32(0);
    int32_t act_sum = 0;
    for (int64_t g = b * sh.block_groups; g < (b + 1) * sh.block_groups; ++g) {
      const uint8_t* group = codes + g * kRows * kGroupBytes;
      for (int i = 0; i < kRows; ++i) {
        dot[i] = add_group_dot(dot[i], unpack_codes(group + i * kGroupBytes), q + g * kGroupCols);
      }
      act_sum += x.group_sum[g * x.token_stride + t];
    }
    const float32x4_t d = vcvtq_f32_s32(vsubq_s32(hsum4(dot), vdupq_n_s32(act_sum)));
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
    int32x4_t dot[kTileTokens];  // lanes of tokens >= T stay 0
    for (auto& d : dot) d = vdupq_n_s32(0);
    int32x4_t act_sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int64_t g = b * sh.block_groups; g < (b + 1) * sh.block_groups; ++g) {
      const GroupCodes c = unpack_codes(row_codes + g * kRows * kGroupBytes);
      for (int j = 0; j < T; ++j) dot[j] = add_group_dot(dot[j], c, q + j * w.n_cols + g * kGroupCols);
      const int32_t* sums = x.group_sum + g * x.token_stride + t0;
      act_sum[0] = vaddq_s32(act_sum[0], vld1q_s32(sums));
      act_sum[1] = vaddq_s32(act_sum[1], vld1q_s32(sums + 4));
    }
    const float32x4_t scale = vdupq_n_f32(row_scales[b * kRows]);
    for (int h = 0; h < 2; ++h) {
      const float32x4_t d = vcvtq_f32_s32(vsubq_s32(hsum4(dot + 4 * h), act_sum[h]));
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
  static constexpr int kRows = neon::kTernaryRows;
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

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  ternary_matmul<W2A8>(w, x, y, r0, r1);
}

}  // namespace bitnet::cpu::neon_dotprod

namespace bitnet::cpu {

namespace {
constexpr std::string_view kNeonDotprodNeeds[] = {"neon", "dotprod"};
}

constinit const KernelSet kNeonDotprodKernels = {
    .name = "neon-dotprod",
    .needs = kNeonDotprodNeeds,
    .ternary_rows_per_group = neon::kTernaryRows,
    .matmul_ternary = neon_dotprod::matmul_ternary,
    .matmul_float = neon::matmul_float,
    .quant_dot = neon_dotprod::quant_dot,
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
