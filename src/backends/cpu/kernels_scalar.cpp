// The scalar set: reference kernels of the CPU backend, and the portable kernels every set
// shares. Loops are written so that the compiler can vectorize them for the baseline ISA
// (8 independent accumulators, byte-sliced ternary groups), but no intrinsics.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/q6_K_lanes.h"
#include "core/check.h"
#include "core/fp16.h"
#include "quant/act_quant.h"
#include "quant/q4_k_q5_k.h"
#include "quant/q4_q5.h"
#include "quant/q6_k.h"
#include "quant/q8_0.h"
#include "quant/q8_k.h"
#include "quant/quant.h"

namespace bitnet::cpu {

namespace {

// All 65536 halves as floats (256 KiB, built once, read-only): a table lookup is several times
// faster than converting bit by bit.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_fp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Element i of a row of each float format read in place, as quant::dequantize computes it.
struct F32Elem {
  float operator()(const uint8_t* row, int64_t i) const {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  }
};
struct F16Elem {
  const float* table = fp16_table();
  float operator()(const uint8_t* row, int64_t i) const { return table[load_u16(row + 2 * i)]; }
};
struct BF16Elem {
  float operator()(const uint8_t* row, int64_t i) const { return bf16_to_fp32(load_u16(row + 2 * i)); }
};

// The scalar dot's summation order (8 lanes, then pairwise, then the tail) over a row read in
// place: the same floats as dequantizing the row first.
template <typename Elem>
float dot_row(const uint8_t* row, const float* x, int64_t n, Elem elem) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += elem(row, i + j) * x[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += elem(row, i) * x[i];
  return sum;
}

template <typename Elem>
void matmul_rows(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1,
                 Elem elem) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.raw.data() + r * w.row_bytes;
    for (int64_t t = 0; t < n_tokens; ++t) y[t * w.n_rows + r] = dot_row(row, x + t * w.n_cols, w.n_cols, elem);
  }
}

// sum code * q over one 128-column group: byte j of `codes` holds the codes of columns j,
// j+32, j+64, j+96 in bits 7-6, 5-4, 3-2, 1-0. Four products of |code*q| <= 256 per lane fit
// 16 bits; widen once per group (bitnet.cpp's AVX2 kernel sums 4096 products in 16 bits and
// can overflow).
int32_t group_dot(const uint8_t* codes, const int8_t* q) {
  int16_t lane[32];
  for (int j = 0; j < 32; ++j) {
    const int c = codes[j];
    lane[j] = static_cast<int16_t>((c >> 6) * q[j] + ((c >> 4) & 3) * q[j + 32] +
                                   ((c >> 2) & 3) * q[j + 64] + (c & 3) * q[j + 96]);
  }
  int32_t dot = 0;
  for (int j = 0; j < 32; ++j) dot += lane[j];
  return dot;
}

// A cache element read as a float: F32 as stored, F16 through the table (fp16_to_fp32).
struct F32Load {
  float operator()(float v) const { return v; }
};
struct F16Load {
  const float* table = fp16_table();
  float operator()(uint16_t h) const { return table[h]; }
};

// sum a[i] * load(b[i]) in 8 lanes, then pairwise, then the tail: dot_f32's order.
template <class T, class Load>
float dot_as_f32(const float* a, const T* b, int64_t n, Load load) {
  float acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * load(b[i + j]);
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * load(b[i]);
  return sum;
}

// attention_head over a cache of T: one body for F32 and F16, so that an F16 cache gives the
// F32 result on its rounded values bit for bit.
template <class T, class Load>
void attention_head_as_f32(const float* q, const T* k_cache, const T* v_cache, int64_t n_pos, const KvRowMap& rows, int64_t row_stride,
                           int64_t kv_off, int32_t head_dim, float kq_scale, float* scores, float* out, Load load) {
  float max_score = -INFINITY;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = dot_as_f32(q, k_cache + rows.row(j) * row_stride + kv_off, head_dim, load) * kq_scale;
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n_pos; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  std::fill_n(out, head_dim, 0.0f);
  for (int64_t j = 0; j < n_pos; ++j) {
    const float p = scores[j] * inv_sum;
    const T* v = v_cache + rows.row(j) * row_stride + kv_off;
    for (int32_t d = 0; d < head_dim; ++d) out[d] += p * load(v[d]);
  }
}

}  // namespace

void dequantize_row(const CpuWeight& w, int64_t row, float* dst) {
  const uint8_t* src = w.raw.data() + row * w.row_bytes;
  if (w.q6_K_lanes) return dequantize_q6_K_lanes_row(src, w.n_cols, dst);
  if (w.type == GgmlType::kF16) {
    const F16Elem elem;
    for (int64_t i = 0; i < w.n_cols; ++i) dst[i] = elem(src, i);
    return;
  }
  const Status s = quant::dequantize(w.type, {src, static_cast<size_t>(w.row_bytes)}, w.n_cols, dst);
  BITNET_CHECK(s.ok());  // sizes were validated when the weight was prepared
}

std::optional<QuantActFormat> quant_act_format(GgmlType weight_type) {
  const std::optional<GgmlType> a = quant::vec_dot_type(weight_type);
  if (!a || quant::vec_dot_fn(weight_type) == nullptr) return std::nullopt;
  switch (*a) {
    case GgmlType::kQ8_0: return QuantActFormat{*a, 32, 34, quant::q8_0_quantize_block};
    case GgmlType::kQ8_1: return QuantActFormat{*a, 32, 36, quant::q8_1_quantize_block};
    case GgmlType::kQ8_K: return QuantActFormat{*a, 256, quant::kQ8_KBlockBytes, quant::q8_K_quantize_block};
    default: return std::nullopt;
  }
}

void matmul_quant_rows(const CpuWeight& w, const uint8_t* act, int64_t act_row_bytes, int64_t n_tokens,
                       float* y, int64_t r0, int64_t r1, QuantDotFn dot, QuantTileFn tile) {
  if (tile == nullptr || n_tokens == 1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.raw.data() + r * w.row_bytes;
      for (int64_t t = 0; t < n_tokens; ++t) y[t * w.n_rows + r] = dot(w.n_cols, row, act + t * act_row_bytes);
    }
    return;
  }
  // Rows in blocks of about kTileRowBytes of weights, each block against every token tile in
  // turn: the block stays in L2 for all tiles, and a tile's activation rows stay in L1 for all
  // rows of the block.
  constexpr int64_t kTileRowBytes = 256 * 1024;
  const int64_t rows_per_block = std::max<int64_t>(1, kTileRowBytes / w.row_bytes);
  for (int64_t rb = r0; rb < r1; rb += rows_per_block) {
    const int64_t n_rows = std::min(r1, rb + rows_per_block) - rb;
    for (int64_t t = 0; t < n_tokens; t += kQuantTileTokens) {
      const int n_act = static_cast<int>(std::min<int64_t>(kQuantTileTokens, n_tokens - t));
      tile(w.n_cols, w.raw.data() + rb * w.row_bytes, w.row_bytes, n_rows, act + t * act_row_bytes, act_row_bytes, n_act,
           y + t * w.n_rows + rb, w.n_rows);
    }
  }
}

void matmul_quantized_act(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                          int64_t r1, QuantDotFn row_dot) {
  const std::optional<QuantActFormat> f = quant_act_format(w.type);
  BITNET_CHECK(f.has_value() && w.n_cols % f->block == 0);
  const int64_t a_row_bytes = f->row_bytes(w.n_cols);
  // Grown once per thread to the largest batch it meets; no allocation per call after that.
  thread_local std::vector<uint8_t> act;
  if (act.size() < static_cast<size_t>(n_tokens * a_row_bytes)) act.resize(static_cast<size_t>(n_tokens * a_row_bytes));
  for (int64_t t = 0; t < n_tokens; ++t) f->quantize_row(x + t * w.n_cols, w.n_cols, act.data() + t * a_row_bytes);
  matmul_quant_rows(w, act.data(), a_row_bytes, n_tokens, y, r0, r1, row_dot);
}

void matmul_float_by_blocks(const CpuWeight& w, const float* x, int64_t n_tokens, float* y,
                            int64_t r0, int64_t r1, DotFn dot) {
  if (quant_act_format(w.type)) return matmul_quantized_act(w, x, n_tokens, y, r0, r1, quant::vec_dot_fn(w.type));
  constexpr int64_t kChunk = 256;  // the K-quant block; a multiple of every other float block
  const auto traits = ggml_type_traits(static_cast<uint32_t>(w.type));
  BITNET_CHECK(traits.has_value() && traits->block_elems <= kChunk);
  const int64_t chunk = w.n_cols % kChunk == 0 && kChunk % traits->block_elems == 0 ? kChunk : traits->block_elems;
  const auto chunk_bytes = static_cast<size_t>(chunk / traits->block_elems * traits->block_bytes);
  float buf[kChunk];
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < n_tokens; ++t) y[t * w.n_rows + r] = 0.0f;
    const uint8_t* row = w.raw.data() + r * w.row_bytes;
    for (int64_t k = 0; k < w.n_cols; k += chunk) {
      const Status s = quant::dequantize(w.type, {row + k / chunk * chunk_bytes, chunk_bytes}, chunk, buf);
      BITNET_CHECK(s.ok());  // sizes were validated when the weight was prepared
      for (int64_t t = 0; t < n_tokens; ++t) y[t * w.n_rows + r] += dot(buf, x + t * w.n_cols + k, chunk);
    }
  }
}

void rope_angles(int64_t pos, const hal::RopeParams& p, float* cos_t, float* sin_t) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos) * p.freq_scale;
  for (int32_t i = 0; i < p.n_rot / 2; ++i) {
    cos_t[i] = std::cos(theta);
    sin_t[i] = std::sin(theta);
    theta *= theta_scale;
  }
}

void rope_row_angles(float* x, int32_t n_head, int32_t head_dim, const float* cos_t, const float* sin_t,
                     const hal::RopeParams& p) {
  const int32_t half = p.n_rot / 2;
  for (int32_t h = 0; h < n_head; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      // Pair i0 = 2i: NORM rotates (x[i0], x[i0+1]); NEOX (x[i0/2], x[i0/2 + n_rot/2]).
      const int32_t a = p.style == hal::RopeStyle::kNorm ? 2 * i : i;
      const int32_t b = p.style == hal::RopeStyle::kNorm ? 2 * i + 1 : i + half;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * cos_t[i] - x1 * sin_t[i];
      v[b] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

void rope_row(float* x, int32_t n_head, int32_t head_dim, int64_t pos, const hal::RopeParams& p) {
  thread_local std::vector<float> angles;  // grows to the largest n_rot, then stays: no allocation per call
  if (angles.size() < static_cast<size_t>(p.n_rot)) angles.resize(static_cast<size_t>(p.n_rot));
  rope_angles(pos, p, angles.data(), angles.data() + p.n_rot / 2);
  rope_row_angles(x, n_head, head_dim, angles.data(), angles.data() + p.n_rot / 2, p);
}

void fp32_to_fp16_row(const float* x, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(x[i]);
}

namespace scalar {

float dot_f32(const float* a, const float* b, int64_t n) { return dot_as_f32(a, b, n, F32Load{}); }

void matmul_float(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  switch (w.type) {
    case GgmlType::kF32: return matmul_rows(w, x, n_tokens, y, r0, r1, F32Elem{});  // dot_f32's order
    case GgmlType::kF16: return matmul_rows(w, x, n_tokens, y, r0, r1, F16Elem{});
    case GgmlType::kBF16: return matmul_rows(w, x, n_tokens, y, r0, r1, BF16Elem{});
    default: return matmul_float_by_blocks(w, x, n_tokens, y, r0, r1, dot_f32);
  }
}

namespace {

// The T5 layout (weights.h) read code by code: the same block dots and float updates as the
// 2-bit twin below, so both layouts give the same bits.
void matmul_ternary_t5(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  const TernaryWeights& tw = w.ternary;
  const int64_t n_vec = t5_vectors(w.n_cols);
  const int64_t block_groups = tw.scale_block / kGroupCols;
  const int64_t n_blocks = w.n_cols / tw.scale_block;
  std::vector<int32_t> dots(static_cast<size_t>(n_blocks));
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const int8_t* q = x.q + t * w.n_cols;
      std::fill(dots.begin(), dots.end(), 0);
      for (int64_t u = 0; u < n_vec; ++u) {
        const uint8_t* bytes = tw.packed.data() + ((r / kT5Rows * n_vec + u) * kT5Rows + r % kT5Rows) * kT5VectorBytes;
        for (int i = 0; i < 5; ++i) {
          int64_t cols[kT5VectorBytes];
          t5_columns(w.n_cols, u, i, cols);
          for (int64_t j = 0; j < kT5VectorBytes; ++j) {
            if (cols[j] < 0) continue;
            unsigned m = bytes[j];
            for (int k = 0; k < i; ++k) m = (3 * m) & 255;
            // Code i of the byte, into its column's block.
            dots[static_cast<size_t>(cols[j] / tw.scale_block)] += static_cast<int32_t>((3 * m) >> 8) * q[cols[j]];
          }
        }
      }
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int32_t act_sum = x.block_sum(t, b * block_groups, (b + 1) * block_groups);
        acc += static_cast<float>(dots[static_cast<size_t>(b)] - act_sum) / x.scale[t] *
               tw.scales[tw.scale_index(r, b, n_blocks)];
      }
      y[t * w.n_rows + r] = acc;
    }
  }
}

}  // namespace

void matmul_ternary(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1) {
  if (w.ternary.layout == TernaryLayout::k5Trit) return matmul_ternary_t5(w, x, y, r0, r1);
  const TernaryWeights& tw = w.ternary;
  const int64_t n_groups = w.n_cols / kGroupCols;
  const int64_t block_groups = tw.scale_block / kGroupCols;
  const int64_t n_blocks = n_groups / block_groups;
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const int8_t* q = x.q + t * w.n_cols;
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t g0 = b * block_groups;
        const int64_t g1 = g0 + block_groups;
        int32_t dot = 0;  // sum code*q over the block
        for (int64_t g = g0; g < g1; ++g) {
          dot += group_dot(tw.packed.data() + tw.group_offset(r, g, n_groups), q + g * kGroupCols);
        }
        // FORMATS.md: y = (sum code*q - act_sum) / s * w_scale.
        acc += static_cast<float>(dot - x.block_sum(t, g0, g1)) / x.scale[t] * tw.scales[tw.scale_index(r, b, n_blocks)];
      }
      y[t * w.n_rows + r] = acc;
    }
  }
}

float quantize_act(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum, int64_t group_sum_stride) {
  int32_t total = 0;
  const float s = quant::act_quant_i8(x, n_cols, q, &total);
  for (int64_t k0 = 0; k0 < n_cols; k0 += kGroupCols) {
    int32_t sum = 0;
    for (int64_t k = k0; k < std::min(n_cols, k0 + kGroupCols); ++k) sum += q[k];
    group_sum[k0 / kGroupCols * group_sum_stride] = sum;
  }
  return s;
}

void rms_norm_row(const float* x, const float* g, int64_t n, float eps, float* dst) {
  double sum = 0.0;  // as ggml: accumulate squares in double
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) dst[i] = x[i] * scale * g[i];
}

void attention_head(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                    int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                    float* scores, float* out) {
  attention_head_as_f32(q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out, F32Load{});
}

void attention_head_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos, const KvRowMap& rows,
                        int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                        float* scores, float* out) {
  attention_head_as_f32(q, k_cache, v_cache, n_pos, rows, row_stride, kv_off, head_dim, kq_scale, scores, out, F16Load{});
}

void silu_mul(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

void relu2_mul(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::max(a[i], 0.0f);
    dst[i] = r * r * b[i];
  }
}

void add(const float* a, const float* b, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
}

}  // namespace scalar

constinit const KernelSet kScalarKernels = {
    .name = "scalar",
    .needs = {},
    .ternary_rows_per_group = 1,
    .matmul_ternary = scalar::matmul_ternary,
    .matmul_float = scalar::matmul_float,
    .quant_dot = quant::vec_dot_fn,
    .quantize_act = scalar::quantize_act,
    .rms_norm_row = scalar::rms_norm_row,
    .attention_head = scalar::attention_head,
    .attention_head_f16 = scalar::attention_head_f16,
    .silu_mul = scalar::silu_mul,
    .relu2_mul = scalar::relu2_mul,
    .add = scalar::add,
};

}  // namespace bitnet::cpu
