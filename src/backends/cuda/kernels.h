// The CUDA (and HIP) kernels of the forward pass, one launcher per kernel: device pointers in,
// one stream, no allocation, no synchronisation, so that a whole decode step can be captured
// into a CUDA graph. Each returns the launch's error (configuration errors, or
// kGpuInvalidValue for a shape the kernel does not take); faults show at the next sync.
// Layouts are row-major; "token t" is row t of an activation. The arithmetic shared with the
// host (decode, repack, dp4a, epilogue, activation quantization) is in w2a8_math.h.
#pragma once

#include <cstdint>

#include "backends/cuda/attention_shape.h"
#include "backends/cuda/block_math.h"
#include "backends/cuda/gpu_runtime.h"
#include "backends/cuda/top_math.h"

namespace bitnet::cuda {

// Whether this binary holds code the current device can run (cudaFuncGetAttributes of one of
// its kernels): cudaErrorNoKernelImageForDevice (or cudaErrorInvalidDeviceFunction) for a
// device whose compute capability the build left out, where every launch would fail.
GpuError kernel_image_status();

// A ternary weight in the W2C layout (w2a8_math.h, w2c_weights.h) on the device.
struct W2cView {
  const uint32_t* words = nullptr;  // [n_rows][n_cols / 16], 16-byte aligned
  const float* scales = nullptr;    // [n_rows][n_cols / scale_block]
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  int64_t scale_block = 0;          // w2a8_scale_block_ok(n_cols, scale_block)
};

// W2A8 activations on the device: n_tokens rows of int8, one scale and n_cols / 64 sums each.
struct Q8View {
  int8_t* q = nullptr;           // [n_tokens][n_cols], 16-byte aligned
  float* scale = nullptr;        // [n_tokens]: s, x ~ q / s
  int32_t* chunk_sum = nullptr;  // [n_tokens][n_cols / 64]: sum of q per 64 columns
};

// y[t][r] = sum_k w[r][k] * x[t][k] for the ternary w and int8 x: dp4a on the unpacked codes,
// `(dot - act_sum) / s * scale` per scale block (w2a8_row_twin is its host twin, bit for bit).
// One warp per row, n_tokens in tiles of up to 8 tokens per weight read.
GpuError w2a8_gemv(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, GpuStream stream);

// n <= kGemvGroupMax such products of one input x in one launch (q, k and v; gate and up):
// y[i] = w[i] x, each exactly as w2a8_gemv writes it. The weights' n_cols and scale_block
// must be equal.
inline constexpr int kGemvGroupMax = 3;
GpuError w2a8_gemv_group(const W2cView* w, float* const* y, int n, const Q8View& x, int64_t n_tokens, GpuStream stream);

// The same product on int8 tensor cores (mma.m16n8k32, sm_80 and later: cc_major >= 8, else
// kGpuInvalidValue), for prefill and batches: 16 rows x 32 tokens per warp, codes unpacked into
// the A fragments on the fly, bit-identical to the CPU with per-row and per-block scales
// (w2a8_mma_twin in mma_math.h). n_cols a multiple of 32; x.q rows 4-byte aligned.
GpuError w2a8_gemm_mma(const W2cView& w, const Q8View& x, int64_t n_tokens, float* y, int cc_major, GpuStream stream);

// Fused rms_norm + activation quantization of each row of x [n_tokens][n_cols] (n_cols a
// multiple of 64): y = x / sqrt(mean(x^2) + eps) * g (g null: y = x, no norm), then q, s and
// the chunk sums of y as quant::act_quant_i8. `normed` (may be null) receives y as floats.
GpuError rms_norm_quant(const float* x, const float* g, int64_t n_tokens, int64_t n_cols, float eps, Q8View out,
                        float* normed, GpuStream stream);

// The FFN's gate, sub-norm and quantization in one pass (the down projection's input):
// x = relu(a)^2 * b (kRelu2) or silu(a) * b (kSilu) over rows of a and b [n_tokens][n_cols],
// then rms_norm_quant of x. kNone: x = a (b unused), i.e. rms_norm_quant. kAdd: x = a + b,
// written to `sum` (which may be a or b: the residual stream), then rms_norm_quant of x.
enum class Gate : uint8_t { kNone, kRelu2, kSilu, kAdd };
GpuError gated_rms_norm_quant(Gate gate, const float* a, const float* b, const float* g, int64_t n_tokens,
                              int64_t n_cols, float eps, Q8View out, float* normed, GpuStream stream,
                              float* sum = nullptr);

// dst = rms_norm(x) * g over each row, or over each of n_slices equal slices of a row (g: one
// slice). dst may be x.
GpuError rms_norm(const float* x, const float* g, int64_t n_rows, int64_t n_cols, int32_t n_slices, float eps,
                  float* dst, GpuStream stream);

// A float weight on the device: F32, F16 or BF16 rows, Q8_0 split into int8 quants and one
// float scale per 32 columns (value = q * d), or rows of llama.cpp blocks as in the file
// (kBlocks: `block` says which, block_math.h decodes them).
enum class FloatFormat : uint8_t { kF32, kF16, kBF16, kQ8_0, kBlocks };
struct FloatWeightView {
  FloatFormat format = FloatFormat::kF32;
  const void* data = nullptr;    // [n_rows][n_cols] elements (Q8_0: int8 quants), 16-byte aligned;
                                 // kBlocks: n_rows rows of n_cols / block_elems(block) blocks
  const float* q8_d = nullptr;   // Q8_0: [n_rows][n_cols / 32]
  int64_t n_rows = 0;
  int64_t n_cols = 0;            // any (Q8_0: a multiple of 32; kBlocks: of block_elems(block))
  BlockFormat block = BlockFormat::kQ4_0;  // kBlocks
};

// Whether a view's shape fits its format (the launchers' check of n_cols against the blocks).
inline bool float_view_cols_ok(const FloatWeightView& w) {
  if (w.n_cols <= 0) return false;
  if (w.format == FloatFormat::kQ8_0) return w.n_cols % 32 == 0 && w.q8_d != nullptr;
  if (w.format == FloatFormat::kBlocks) return w.n_cols % block_elems(w.block) == 0;
  return true;
}

// y[t][r] = sum_k w[r][k] * x[t][k], float accumulation (the float/Q8_0/block-format heads and
// any float linear; block formats are decoded in the kernel against the float activations).
// One warp per row, up to 4 tokens per weight read.
GpuError matmul_float(const FloatWeightView& w, const float* x, int64_t n_tokens, float* y, GpuStream stream);

// dst[t] = row tokens[t] of w, as floats (token ids checked by the caller).
GpuError embed_rows(const FloatWeightView& w, const int32_t* tokens, int64_t n_tokens, float* dst, GpuStream stream);

// Elementwise over n floats: dst = a + b; silu(a) * b; relu(a)^2 * b. dst may alias a or b.
GpuError add(const float* a, const float* b, int64_t n, float* dst, GpuStream stream);
GpuError silu_mul(const float* a, const float* b, int64_t n, float* dst, GpuStream stream);
GpuError relu2_mul(const float* a, const float* b, int64_t n, float* dst, GpuStream stream);
// x[t][i] += row[i] for every row t of x [n_rows][n_cols] (linear biases). In place.
GpuError add_row(float* x, const float* row, int64_t n_rows, int64_t n_cols, GpuStream stream);
// x[i] *= *scale (a device scalar: the per-linear .scale tensors).
GpuError scale_by(float* x, const float* scale, int64_t n, GpuStream stream);

// Rotates x [n_tokens][n_head * head_dim] in place: pair i of every head of token t by the
// angle whose cosine and sine are cos_sin[t][i] (n_rot / 2 pairs per token, computed on the
// host with the CPU's float recurrence: device sin/cos of large angles would drift). NEOX pairs
// (x[i], x[i + n_rot/2]); NORM pairs (x[2i], x[2i+1]).
GpuError rope(float* x, const float* cos_sin, int64_t n_tokens, int32_t n_head, int32_t head_dim, int32_t n_rot,
              bool neox, GpuStream stream);

// The cache rows of the step's tokens: token t attends to its sequence's positions
// 0 .. pos[t]; position j of token t is cache row `table[table_begin[t] + (j >> block_shift)]
// << block_shift | j & (block - 1)`, or row j when table is null (hal::KvMap).
struct KvRows {
  const int32_t* pos = nullptr;          // [n_tokens]
  const int32_t* table_begin = nullptr;  // [n_tokens] (null with table)
  const int32_t* table = nullptr;
  int32_t block_shift = 0;
};

// Token t's block table for ops_math.h kv_row (null: the identity).
BITNET_HD const int32_t* token_table(const KvRows& rows, int64_t t) {
  return rows.table == nullptr ? nullptr : rows.table + rows.table_begin[t];
}

// Writes k and v [n_tokens][n_embd_kv] as fp16 (round to nearest even) into the cache rows of
// positions pos[t] of `rows`.
GpuError store_kv_f16(const float* k, const float* v, int64_t n_tokens, int64_t n_embd_kv, const KvRows& rows,
                      uint16_t* k_cache, uint16_t* v_cache, GpuStream stream);

// rope of q [n_tokens][n_head * head_dim] and of k [n_tokens][n_head_kv * head_dim] in place,
// then store_kv_f16 of the rotated k and v, in one launch: every value and F16 copy as the two
// ropes and the store give them.
GpuError rope_store_kv_f16(float* q, float* k, const float* v, const float* cos_sin, int64_t n_tokens, int32_t n_head,
                           int32_t n_head_kv, int32_t head_dim, int32_t n_rot, bool neox, const KvRows& rows,
                           uint16_t* k_cache, uint16_t* v_cache, GpuStream stream);

// out [n_tokens][n_head * head_dim] = softmax(q k^T * kq_scale) v over positions 0..pos[t] of
// the F16 cache, per head (GQA: head h reads kv head h / (n_head / n_head_kv)), with an online
// softmax per slice of positions and one merge pass (split-K: long contexts fill the device).
GpuError attention_f16(const float* q, const uint16_t* k_cache, const uint16_t* v_cache, const KvRows& rows,
                       const AttentionShape& shape, int64_t n_tokens, float* scratch, float* out, GpuStream stream);

// Device pointers to a hal::TopPlan's words (hal/top.h): per row its count k, the start of its
// entries in out, the start of its ids in also (out_begin and also_begin: n_rows + 1 each).
struct TopArgs {
  const int32_t* k = nullptr;
  const int32_t* out_begin = nullptr;
  const int32_t* also_begin = nullptr;
  const int32_t* also = nullptr;
};

// Part of each row of x [n_rows][n_cols] (hal::select_top's, top_math.h's algorithm): at
// out + out_begin[r], the k[r] largest entries of row r (ties to the lower indices; in no
// order), then the entries of its also ids, which must lie in the row. Sampling with top-k
// (and greedy, k = 1) without copying the logits back.
GpuError top_k_rows(const float* x, int64_t n_rows, int64_t n_cols, const TopArgs& args, TopEntry* out, GpuStream stream);

}  // namespace bitnet::cuda
