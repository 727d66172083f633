// NEON i8mm set: the dotprod set with a prefill (n_tokens >= 2) W2A8 matmul on SMMLA (Armv8.6
// int8 matrix multiply). One SMMLA multiplies a 2x8 int8 matrix by an 8x2 one into a 2x2
// int32 tile, 32 products where SDOT does 16: here 2 weight rows x 2 tokens, 8 columns. The
// codes of a row pair are unpacked once per group and reused for up to 8 tokens; decode (one
// token) has no token pair to fill the tile and stays on SDOT.
// Compiled with -march=armv8.2-a+dotprod+i8mm: only intrinsics and this file's own helpers
// (no header inlines with loops, see CMakeLists.txt), called only after the CPU was checked.
#include <arm_neon.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_neon.h"
#include "core/check.h"

namespace bitnet::cpu::neon_i8mm {

namespace {

constexpr int kRows = neon::kTernaryRows;
constexpr int kTilePairs = 4;  // token pairs per prefill tile (8 tokens)
// Codes per cache block of row groups (prefill): small enough for the L2 of small cores
// (256 KiB and up) next to a tile's activations.
constexpr int64_t kBlockCodeBytes = 128 << 10;

int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// {a[0..7], b[0..7]} and {a[8..15], b[8..15]}: two 8-byte halves of two rows side by side,
// the 2x8 operand layout of SMMLA.
int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// Field k (bits 7-6 for k = 0 ... bits 1-0 for k = 3) of 16 code bytes, as int8 in {0, 1, 2}.
int8x16_t field(uint8x16_t v, int k) {
  const uint8x16_t mask = vdupq_n_u8(3);
  switch (k) {
    case 0: return vreinterpretq_s8_u8(vshrq_n_u8(v, 6));
    case 1: return vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 4), mask));
    case 2: return vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(v, 2), mask));
    default: return vreinterpretq_s8_u8(vandq_u8(v, mask));
  }
}

// The codes of one 128-column group of rows i and i+1 in SMMLA's operand order: c[k][h][e]
// holds field k of code bytes 16h + 8e .. +7 of row i, then of row i+1, which meets the
// activations of columns 32k + 16h + 8e .. +7. The 16 vectors stay in registers for the
// tile's token pairs (GCC would otherwise call the unpacking and reload them from the stack).
struct PairCodes {
  int8x16_t c[4][2][2];
};

[[gnu::always_inline]] inline PairCodes unpack_pair(const uint8_t* row_i, const uint8_t* row_i1) {
  PairCodes p;
  for (int h = 0; h < 2; ++h) {
    const int8x16_t a = vreinterpretq_s8_u8(vld1q_u8(row_i + 16 * h));
    const int8x16_t b = vreinterpretq_s8_u8(vld1q_u8(row_i1 + 16 * h));
    const uint8x16_t zipped[2] = {vreinterpretq_u8_s8(zip_lo(a, b)), vreinterpretq_u8_s8(zip_hi(a, b))};
    for (int e = 0; e < 2; ++e) {
      for (int k = 0; k < 4; ++k) p.c[k][h][e] = field(zipped[e], k);
    }
  }
  return p;
}

// dot + the 2x2 tile {row i . token a, row i . token b, row i+1 . token a, row i+1 . token b}
// over one group; qa, qb: the group's 128 activations of tokens a and b.
int32x4_t add_group_dot(int32x4_t dot, const PairCodes& w, const int8_t* qa, const int8_t* qb) {
  for (int k = 0; k < 4; ++k) {
    for (int h = 0; h < 2; ++h) {
      const int8x16_t a = vld1q_s8(qa + 32 * k + 16 * h);
      const int8x16_t b = vld1q_s8(qb + 32 * k + 16 * h);
      dot = vmmlaq_s32(dot, w.c[k][h][0], zip_lo(a, b));
      dot = vmmlaq_s32(dot, w.c[k][h][1], zip_hi(a, b));
    }
  }
  return dot;
}

// {v[0], v[1], v[0], v[1]}: a token pair's value in the lanes of the 2x2 tile.
float32x4_t per_token(const float* v) { return vcombine_f32(vld1_f32(v), vld1_f32(v)); }
int32x4_t per_token(const int32_t* v) { return vcombine_s32(vld1_s32(v), vld1_s32(v)); }

// {v[0], v[0], v[1], v[1]}: a row pair's value in the lanes of the 2x2 tile.
float32x4_t per_row(const float* v) {
  const float32x4_t both = vcombine_f32(vld1_f32(v), vld1_f32(v));
  return vzip1q_f32(both, both);
}

// Rows 2rp, 2rp+1 against the n_tok tokens t0 .. t0+n_tok-1 (P = ceil(n_tok / 2) pairs; with
// an odd n_tok the last pair repeats its token and drops the copy). Writes rows in [r0, r1).
template <int P>
void gemm_row_pair(const CpuWeight& w, const Q8Rows& x, int64_t t0, int64_t n_tok, int64_t rp, float* y, int64_t r0,
                   int64_t r1) {
  const int64_t n_groups = w.n_cols / kGroupCols;
  const int64_t block_groups = w.ternary.scale_block / kGroupCols;
  const int64_t n_blocks = n_groups / block_groups;
  const int64_t r = 2 * rp;  // a row pair never straddles a row group: kRows is even
  // Row r's group g is at row_codes + g * kRows * kGroupBytes, row r+1's 32 bytes after it;
  // block b's scales of both at row_scales + b * kRows (weights.h).
  const uint8_t* row_codes = w.ternary.packed.data() + ((r / kRows) * n_groups * kRows + r % kRows) * kGroupBytes;
  const float* row_scales = w.ternary.scales.data() + (r / kRows) * n_blocks * kRows + r % kRows;
  const int8_t* qa[P];
  const int8_t* qb[P];
  for (int p = 0; p < P; ++p) {
    qa[p] = x.q + (t0 + 2 * p) * w.n_cols;
    qb[p] = x.q + (t0 + min64(2 * p + 1, n_tok - 1)) * w.n_cols;
  }
  float32x4_t acc[P];
  for (auto& a : acc) a = vdupq_n_f32(0.0f);
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32x4_t dot[P];
    for (auto& d : dot) d = vdupq_n_s32(0);
    // Lanes of tokens >= n_tok read the padding (kTokenPad: scale 1, sum 0) and are dropped.
    int32x4_t act_sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    for (int64_t g = b * block_groups; g < (b + 1) * block_groups; ++g) {
      const uint8_t* group = row_codes + g * kRows * kGroupBytes;
      const PairCodes c = unpack_pair(group, group + kGroupBytes);
      for (int p = 0; p < P; ++p) dot[p] = add_group_dot(dot[p], c, qa[p] + g * kGroupCols, qb[p] + g * kGroupCols);
      const int32_t* sums = x.group_sum + g * x.token_stride + t0;
      act_sum[0] = vaddq_s32(act_sum[0], vld1q_s32(sums));
      act_sum[1] = vaddq_s32(act_sum[1], vld1q_s32(sums + 4));
    }
    int32_t block_sums[2 * kTilePairs];
    vst1q_s32(block_sums, act_sum[0]);
    vst1q_s32(block_sums + 4, act_sum[1]);
    const float32x4_t scale = per_row(row_scales + b * kRows);
    for (int p = 0; p < P; ++p) {
      const float32x4_t d = vcvtq_f32_s32(vsubq_s32(dot[p], per_token(block_sums + 2 * p)));
      acc[p] = vaddq_f32(acc[p], vmulq_f32(vdivq_f32(d, per_token(x.scale + t0 + 2 * p)), scale));
    }
  }
  for (int p = 0; p < P; ++p) {
    float out[4];  // {row r . token a, row r . token b, row r+1 . token a, row r+1 . token b}
    vst1q_f32(out, acc[p]);
    for (int i = 0; i < 2; ++i) {
      if (r + i < r0 || r + i >= r1) continue;
      for (int j = 0; j < 2 && 2 * p + j < n_tok; ++j) y[(t0 + 2 * p + j) * w.n_rows + r + i] = out[2 * i + j];
    }
  }
}

using TileFn = void (*)(const CpuWeight&, const Q8Rows&, int64_t, int64_t, int64_t, float*, int64_t, int64_t);
constexpr TileFn kTiles[kTilePairs + 1] = {nullptr, gemm_row_pair<1>, gemm_row_pair<2>, gemm_row_pair<3>,
                                           gemm_row_pair<4>};

// Prefill over rows [r0, r1) in cache blocks of row groups: every token tile passes over a
// block while its codes are in L2, so the weights come from memory once per matmul.
void gemm(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  const int64_t group_bytes = w.n_cols / kGroupCols * kRows * kGroupBytes;  // codes of one row group
  const int64_t block_rows = kRows * max64(1, kBlockCodeBytes / group_bytes);
  for (int64_t rb = r0; rb < r1;) {
    const int64_t rb_end = min64(r1, rb / kRows * kRows + block_rows);  // on a row group boundary
    for (int64_t t0 = 0; t0 < x.n_tokens; t0 += 2 * kTilePairs) {
      const int64_t n_tok = min64(2 * kTilePairs, x.n_tokens - t0);
      const TileFn tile = kTiles[(n_tok + 1) / 2];
      for (int64_t rp = rb / 2; 2 * rp < rb_end; ++rp) tile(w, x, t0, n_tok, rp, y, rb, rb_end);
    }
    rb = rb_end;
  }
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  BITNET_CHECK(w.ternary.rows_per_group == kRows);
  if (x.n_tokens == 1) return neon_dotprod::matmul_ternary(w, x, y, r0, r1);
  gemm(w, x, y, r0, r1);
}

}  // namespace bitnet::cpu::neon_i8mm

namespace bitnet::cpu {

namespace {
constexpr std::string_view kNeonI8mmNeeds[] = {"neon", "dotprod", "i8mm"};
}

constinit const KernelSet kNeonI8mmKernels = {
    .name = "neon-i8mm",
    .needs = kNeonI8mmNeeds,
    .ternary_rows_per_group = neon::kTernaryRows,
    .matmul_ternary = neon_i8mm::matmul_ternary,
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
