// Level 1, CPU: kernel providers. A KernelSet is a table of function pointers for one
// instruction set ("scalar"; on x86-64 "avx2", "avxvnni", "avx512vnni"; on AArch64 "neon",
// "neon-dotprod", "neon-i8mm"). Each set's code lives in its own files compiled with that
// ISA's flags (kernels_<isa>*.cpp); kernel_sets.cpp is the one file that knows which sets a
// build has.
// The backend picks a set once (make_cpu_backend) and calls only through it.
//
// Every set matches the scalar twin (kernels_scalar.cpp): W2A8 matmul and activation
// quantization bit for bit; float kernels within rounding (their sums run in another order).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/weights.h"
#include "core/cpu_features.h"
#include "hal/ops.h"
#include "quant/quant.h"

namespace bitnet::cpu {

// Token vectors of Q8 activations are padded to a multiple of this, so that a kernel may load
// the scales or group sums of 8 consecutive tokens at once.
inline constexpr int64_t kTokenPad = 8;

// W2A8 activations of n_tokens rows of n_cols (KernelSet::quantize_act's output).
struct Q8Rows {
  const int8_t* q = nullptr;           // [n_tokens][n_cols]
  const float* scale = nullptr;        // [token_stride]: s of token t, x ~ q / s
  const int32_t* group_sum = nullptr;  // [n_groups][token_stride]: sum of q over columns
                                       // [128g, 128g + 128) of token t at g * token_stride + t
  int64_t n_tokens = 0;
  int64_t n_cols = 0;
  int64_t token_stride = 0;            // n_tokens rounded up to kTokenPad
  // The same rows in the column order of the set's ternary layout (KernelSet::order_ternary_act),
  // made once per matmul by the caller; null: a kernel that wants them orders its own copy.
  const int8_t* q_ordered = nullptr;

  // The activation sum over whole groups [g0, g1) of token t: the "- act_sum" term of a
  // scale block, exact in int32.
  int32_t block_sum(int64_t t, int64_t g0, int64_t g1) const {
    int32_t sum = 0;
    for (int64_t g = g0; g < g1; ++g) sum += group_sum[g * token_stride + t];
    return sum;
  }
};

// The cache rows of one sequence for the attention kernels: position j is row j (blocks null),
// or row blocks[j >> shift] << shift | j & (2^shift - 1) of a paged cache (hal::KvMap).
struct KvRowMap {
  const int32_t* blocks = nullptr;
  int32_t shift = 0;  // log2 of the block size
  // Whether the kernels prefetch the rows ahead of their use: right where they come from memory
  // (a sequence's one decode token); a prompt's tokens read the same rows one after the other
  // and find them in cache, where the prefetches only cost instructions.
  bool prefetch = true;
  int64_t row(int64_t j) const {
    return blocks == nullptr ? j : (static_cast<int64_t>(blocks[j >> shift]) << shift) | (j & ((int64_t{1} << shift) - 1));
  }
};

// Most query heads KernelSet::attention_heads takes in one call (GQA groups are 4-8 heads).
inline constexpr int32_t kMaxGroupHeads = 8;

struct KernelSet;

// A row dot of n weights against one row of quantized activations (quant::VecDotFn).
using QuantDotFn = quant::VecDotFn;
// Prefill: n_rows weight rows of n weights (w_row_bytes apart) against n_act (1 ..
// kQuantTileTokens) rows of quantized activations (act_row_bytes apart): y[j * y_stride + r] =
// the set's quant_dot of weight row r and activation row j, bit for bit (a set may unpack each
// weight block once for all tokens, and lay out the tokens once for all rows).
inline constexpr int kQuantTileTokens = 16;
using QuantTileFn = void (*)(int64_t n, const uint8_t* w, int64_t w_row_bytes, int64_t n_rows, const uint8_t* act,
                             int64_t act_row_bytes, int n_act, float* y, int64_t y_stride);

// Owns Q8 activations for up to n_tokens rows; padding lanes hold scale 1 and sum 0.
class Q8Buffer {
 public:
  void resize(int64_t n_tokens, int64_t n_cols);
  // Quantizes x[n_cols] into token t (rows may be quantized concurrently).
  void quantize(const KernelSet& kernels, int64_t t, const float* x);
  Q8Rows rows() const;

 private:
  int64_t n_tokens_ = 0;
  int64_t n_cols_ = 0;
  int64_t token_stride_ = 0;
  std::vector<int8_t> q_;
  std::vector<float> scale_;
  std::vector<int32_t> group_sum_;
};

struct KernelSet {
  std::string_view name;                    // "avx2": the device id is "cpu-" + name
  std::span<const std::string_view> needs;  // CpuFeatures names the set executes
  int32_t ternary_rows_per_group;           // the repacked ternary layout it reads (weights.h)
  // The byte layout it asks ternary weights in; a set that asks for T5 also reads the 2-bit
  // layout (weights T5 does not hold, weights.h t5_fits).
  TernaryLayout ternary_layout = TernaryLayout::k2Bit;
  // The layout for a backend of n_threads threads where the set's choice depends on them and on
  // the CPU (ternary_layout or k2Bit); null: ternary_layout.
  TernaryLayout (*ternary_layout_for_threads)(int n_threads) = nullptr;

  // W2A8: y[t][r] = sum_b (sum_{k in b} code[r][k] * q[t][k] - act_sum[t][b]) / s[t] * scale[r][b]
  // for rows r in [r0, r1) and every token; per block the integer dot is exact and the float
  // update `acc += float(dot - act_sum) / s * scale` runs block after block from acc = 0.
  // y: [x.n_tokens][w.n_rows]; w repacked with ternary_rows_per_group.
  void (*matmul_ternary)(const CpuWeight& w, const Q8Rows& x, float* y, int64_t r0, int64_t r1);
  // One token's activations q[n_cols] in the column order the set's ternary kernels read
  // (T5 order, weights.h), into out[n_cols]; null: the sets that read columns in order. The
  // backend orders each matmul's input once (Q8Rows::q_ordered) instead of every thread's
  // every chunk of rows doing it.
  void (*order_ternary_act)(const int8_t* q, int64_t n_cols, int8_t* out) = nullptr;
  // y[t][r] = sum_k w[r][k] * x[t][k] for r in [r0, r1); x: [n_tokens][w.n_cols] floats;
  // y: [n_tokens][w.n_rows]. Any dequantizable type; F32/F16/BF16/Q8_0 read in place.
  void (*matmul_float)(const CpuWeight& w, const float* x, int64_t n_tokens, float* y, int64_t r0,
                       int64_t r1);
  // The set's dot of one row of `type` (n weights) against one row of activations quantized to
  // quant::vec_dot_type(type), as llama.cpp computes its matmuls over these types: the same
  // integer block sums as the scalar twin (quant::vec_dot_fn), the float sums in another order.
  // Null exactly where quant::vec_dot_fn is; a set without SIMD for a type returns the twin.
  QuantDotFn (*quant_dot)(GgmlType type);
  // The set's QuantTileFn for `type`; null (the set, or the type) = quant_dot token by token.
  QuantTileFn (*quant_tile)(GgmlType type) = nullptr;
  // The row dot and tile of Q6_K weights in lane order against Q8_K activations in the same
  // order (q6_K_lanes.h), as quant_dot / quant_tile; null: the set reads Q6_K in the file's
  // order only. The backend asks large file-backed Q6_K weights in lane order where they are set.
  QuantDotFn (*q6_K_lanes_dot)() = nullptr;
  QuantTileFn (*q6_K_lanes_tile)() = nullptr;
  // Quantizes n floats (whole blocks) into activation blocks of act_type (Q8_0, Q8_1, Q8_K)
  // bit for bit as ggml's reference quantizer (quant::q8_0/q8_1/q8_K_quantize_block); returns
  // false for a type it does not do (then the caller uses the reference). Null: the reference.
  bool (*quantize_act_row)(GgmlType act_type, const float* x, int64_t n, uint8_t* dst) = nullptr;
  // One row, as quant::act_quant_i8 bit for bit: x[n_cols] -> q[n_cols] and the sum of q over
  // each 128-column group g (the last may be partial) at group_sum[g * group_sum_stride];
  // returns s.
  float (*quantize_act)(const float* x, int64_t n_cols, int8_t* q, int32_t* group_sum,
                        int64_t group_sum_stride);
  // One row: dst = x / sqrt(mean(x^2) + eps) * g, the mean of squares summed in double.
  void (*rms_norm_row)(const float* x, const float* g, int64_t n, float eps, float* dst);
  // Causal attention of one query head over cached positions [0, n_pos); k, v: cache rows
  // row_stride floats apart (position j in row rows.row(j)), the head's head_dim elements at
  // kv_off in each (the CPU backend's cache is head-major: row_stride head_dim, kv_off the kv
  // head's start); scores: n_pos floats of scratch. Softmax as llama.cpp: exp(score - max), the sum
  // in double.
  void (*attention_head)(const float* q, const float* k_cache, const float* v_cache, int64_t n_pos, const KvRowMap& rows,
                         int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                         float* scores, float* out);
  // attention_head over an F16 cache (IEEE half, uint16_t per element): each element is read
  // as fp16_to_fp32 and then used exactly as attention_head uses a float, so the scalar twin
  // equals the F32 twin run on the rounded cache bit for bit.
  void (*attention_head_f16)(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, int64_t n_pos,
                             const KvRowMap& rows,
                             int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                             float* scores, float* out);
  // attention_head for n_q <= kMaxGroupHeads query heads that share one kv head (GQA): q and out
  // hold the n_q heads one after the other, scores n_q * n_pos floats of scratch. Each head's
  // output equals attention_head's bit for bit; the cache rows are read once for the group.
  // Null: the backend calls attention_head per head.
  void (*attention_heads)(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t n_pos,
                          const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim, float kq_scale,
                          float* scores, float* out) = nullptr;
  void (*attention_heads_f16)(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache,
                              int64_t n_pos, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                              float kq_scale, float* scores, float* out) = nullptr;
  // One part of attention_heads split over positions: the positions [j_begin, j_end) only,
  // scores (j_end - j_begin) floats per head. For each head h, max_out[h] = m, its largest
  // score there, sum_out[h] = the sum of p_j = exp(s_j - m), and out (n_q rows of head_dim) =
  // the sum of p_j v_j, not divided (combine_attention_parts merges the parts). Null: the
  // backend does not split.
  void (*attention_heads_part)(const float* q, int32_t n_q, const float* k_cache, const float* v_cache, int64_t j_begin,
                               int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off, int32_t head_dim,
                               float kq_scale, float* scores, float* out, float* max_out, double* sum_out) = nullptr;
  void (*attention_heads_part_f16)(const float* q, int32_t n_q, const uint16_t* k_cache, const uint16_t* v_cache,
                                   int64_t j_begin, int64_t j_end, const KvRowMap& rows, int64_t row_stride, int64_t kv_off,
                                   int32_t head_dim, float kq_scale, float* scores, float* out, float* max_out,
                                   double* sum_out) = nullptr;
  void (*silu_mul)(const float* a, const float* b, int64_t n, float* dst);
  void (*relu2_mul)(const float* a, const float* b, int64_t n, float* dst);
  void (*add)(const float* a, const float* b, int64_t n, float* dst);
  // fp32_to_fp16 of each of n floats (the F16 KV cache's rows), bit for bit. Null: the scalar
  // fp32_to_fp16_row (kernels.h).
  void (*fp32_to_fp16_row)(const float* x, int64_t n, uint16_t* dst) = nullptr;

  // Whether `f` has every feature in `needs`.
  bool supported(const CpuFeatures& f) const;
  // The features in `needs` that `f` lacks.
  std::vector<std::string_view> missing(const CpuFeatures& f) const;
};

// The sets, each defined in its ISA's files and constant-initialized: no code compiled for an
// ISA runs before that set has been chosen. Only kernel_sets.cpp names them.
extern const KernelSet kScalarKernels;
extern const KernelSet kAvx2Kernels;         // x86-64 builds
extern const KernelSet kAvxVnniKernels;      // x86-64 builds
extern const KernelSet kAvx512VnniKernels;   // x86-64 builds
extern const KernelSet kNeonKernels;         // AArch64 builds
extern const KernelSet kNeonDotprodKernels;  // AArch64 builds
extern const KernelSet kNeonI8mmKernels;     // AArch64 builds

// Every set this build has, from the portable scalar set to the most specific.
std::span<const KernelSet* const> kernel_sets();
// The set called `requested` if `f` executes it ("" = the most specific one it executes), or
// an error naming the missing features and the sets `f` runs, or the known names.
Result<const KernelSet*> select_kernel_set(std::string_view requested, const CpuFeatures& f);

}  // namespace bitnet::cpu
