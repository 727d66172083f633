// The CUDA backend's translation of an op list into kernel launches, as plain C++ (no CUDA
// headers) so that it is tested on any machine: which kernel runs each op for its shape on a
// device of a given compute capability, the device layout of each activation, the KV-cache
// addressing of a step and the rope table. Anything the kernels cannot run is refused here,
// with kUnsupported, before the first launch of a step.
#pragma once

// The prefix of kernel names and messages: "cuda:", or "hip:" when the same sources are built
// for AMD GPUs (gpu_runtime.h).
#if BITNET_HIP
#define BITNET_GPU_PREFIX "hip:"
#else
#define BITNET_GPU_PREFIX "cuda:"
#endif

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/attention_shape.h"
#include "backends/cuda/block_math.h"
#include "bitnet/status.h"
#include "gguf/types.h"
#include "hal/ops.h"
#include "hal/validate.h"

namespace bitnet::cuda {

// How a weight lives on the device (cuda_weights.h).
enum class WeightKind : uint8_t {
  kTernary,  // W2C words + float scales (w2c_weights.h)
  kF32,      // float rows; every 1-D tensor (norm gains, biases, .scale) is stored so
  kF16,
  kBF16,
  kQ8_0,     // int8 rows + one float scale per 32 columns
  kBlocks,   // the file's rows of llama.cpp blocks (Q4_0 ... Q6_K, IQ4: block_math.h)
};

struct WeightInfo {
  WeightKind kind = WeightKind::kF32;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  int64_t scale_block = 0;  // kTernary
  BlockFormat block = BlockFormat::kQ4_0;  // kBlocks
};

// The block format the device reads a file type of in place, if it does.
std::optional<BlockFormat> block_format_of(GgmlType type);

// The device kind of a file tensor, or kUnsupported (one line naming tensor and type). 1-D
// tensors (n_rows == 1) of any dequantizable type become F32; ternary rows must be whole
// 64-column chunks; Q8_0 and the block formats whole blocks (else kCorruptFile). (A float weight multiplied by matmul_float needs rows of whole 8-column
// steps: plan_graph checks that, embedding tables may have any width.)
Result<WeightKind> weight_kind(std::string_view name, GgmlType type, int64_t n_cols, int64_t n_rows);

// The kernels the backend launches (kernels.h), with the names kernels_used() reports.
enum class Kernel : uint8_t {
  kEmbed,         // embed_rows
  kRmsNorm,       // rms_norm
  kQuantize,      // rms_norm_quant without a gain (kQuantizeAct)
  kW2a8Gemv,      // w2a8_gemv: the ternary GEMV, up to 8 tokens per weight read
  kW2a8Mma,       // w2a8_gemm_mma: int8 tensor cores (cc >= 8) for prefill and batches
  kMatmulFloat,   // matmul_float: F32/F16/BF16/Q8_0 weights, float activations
  kScale,         // scale_by
  kBias,          // add_row
  kRope,          // rope
  kStoreKv,       // store_kv_f16
  kAttention,     // attention_f16
  kSiluMul,
  kRelu2Mul,
  kAdd,
  kCopy,          // cudaMemcpyAsync device to device (copy_rows, get_rows)
  kTopK,          // top_k_rows: part of each logits row, after the op list (compute_top)
  // Fusions of consecutive ops into the fused kernels (see plan_graph):
  kNormQuant,     // rms_norm + quantize_act: rms_norm_quant with the gain
  kGateNormQuant, // relu2_mul / silu_mul + rms_norm + quantize_act: gated_rms_norm_quant
  kAddNormQuant,  // add + rms_norm + quantize_act (the residual add and the next norm): Gate::kAdd
  kW2a8GemvGroup, // 2-3 consecutive GEMVs of one input (q, k, v; gate, up): w2a8_gemv_group
  kRopeStoreKv,   // rope of q, rope of k, store_kv of k and v: rope_store_kv_f16
  kFused,         // an op run by the fused kernel of an op before it: no launch
};
std::string_view kernel_name(Kernel k);
inline constexpr size_t kKernelCount = static_cast<size_t>(Kernel::kFused) + 1;

// Most tokens the W2A8 GEMV takes before the GEMM on tensor cores pays off.
inline constexpr int64_t kGemvMaxTokens = 8;
// The GEMVs of one input a kW2a8GemvGroup launches (kernels.h kGemvGroupMax).
inline constexpr size_t kGemvGroupOps = 3;
// The ternary product's kernel: the GEMV for n_tokens <= kGemvMaxTokens or where the mma GEMM
// cannot run (cc < 8, or blocks of scales that are not whole 32-column steps), else the GEMM.
Kernel choose_ternary_kernel(int64_t n_tokens, int cc_major, int64_t n_cols, int64_t scale_block);

// The kernel of each op of a graph that hal::validate_graph accepted, or kUnsupported for the
// first op the kernels cannot run. With `fuse`, a whole-row rms_norm followed by the
// quantize_act of its output becomes kNormQuant (the quantize kFused), and a relu2_mul or
// silu_mul in front of such a pair kGateNormQuant (the two after it kFused), where that
// changes nothing another op reads: the fused kernels do not write the gate's output, and
// write the norm's output only where it does not alias their inputs (fused_normed). An add
// in front of a kNormQuant pair whose norm reads the sum becomes kAddNormQuant (the sum is
// written: the residual stream). Two or three consecutive GEMVs that read the same input,
// with rows of the same width and scale blocks, become one kW2a8GemvGroup launch. The rope of
// q, the rope of k and the store of that k with v (rows of whole heads) become kRopeStoreKv.
Result<std::vector<Kernel>> plan_graph(const hal::Graph& graph, std::span<const WeightInfo> weights, int cc_major,
                                       bool fuse = true);

// Whether the fused kernel starting at op i (kNormQuant or kGateNormQuant; kAddNormQuant asks
// about its norm at i + 1 as kNormQuant) writes the norm's output activation (else it passes
// no `normed` buffer): where it is not one of its inputs.
bool fused_normed(const hal::Graph& graph, size_t i, Kernel k);

// Whether the fused kernel planned at op i (kNormQuant, kGateNormQuant or kAddNormQuant)
// writes the norm's output: fused_normed of its norm pair (kAddNormQuant's is at i + 1).
bool fused_writes_normed(const hal::Graph& graph, size_t i, Kernel k);

// The number of GEMVs the kW2a8GemvGroup at op i launches: it and the kFused ops after it.
size_t gemv_group_size(const std::vector<Kernel>& plan, size_t i);

// Whether activation `id` is read by op `from` or a later one before an op rewrites it whole
// (the graph's logits count as read at the end).
bool read_later(const hal::Graph& graph, size_t from, hal::ActId id);

// One activation's device block: F32 = [n_rows][n_cols] floats at 0; Q8 = int8 rows at 0,
// then [n_rows] scales, then [n_rows][n_cols / 64] int32 chunk sums, each at a 256-byte offset.
struct ActLayout {
  uint64_t bytes = 0;
  uint64_t scale_offset = 0;  // Q8
  uint64_t sum_offset = 0;    // Q8
};
Result<ActLayout> act_layout(const hal::ActDesc& d);

// The layout of every activation of a graph, by ActId: an activation that no op reads or writes
// and that is not the output (a model declares its int8 buffers whether or not its weights are
// ternary: stories260K's 172-wide ff_q8 is never used) gets none, bytes 0, and is not checked.
Result<std::vector<ActLayout>> act_layouts(const hal::Graph& graph);

// How the kernels address the KV cache rows of a step (kernels.h KvRows): the identity (one
// sequence from row 0: no table on the device) or block tables with blocks of 1 << block_shift
// positions. kUnsupported for block tables over blocks that are not a power of 2.
struct KvAddressing {
  bool identity = true;
  int32_t block_shift = 0;
};
Result<KvAddressing> kv_addressing(const hal::Graph& graph, const hal::KvRows& rows);

// The int32 words uploaded for a step's KV addressing: pos [n_tokens], then (not identity)
// table_begin [n_tokens] and the tables.
std::vector<int32_t> kv_words(const hal::KvRows& rows, const KvAddressing& a);

// The shape of a step as far as its launches are concerned, for CUDA-graph replay: the op list,
// the activations' shapes, the token count, the KV addressing (mode, block shift, words), the
// rope and attention parameters and the rows that get_rows gathers; not the positions or the
// token ids, which each step uploads to the same device blocks. Two graphs with equal
// signatures launch the same kernels with the same arguments.
std::string step_signature(const hal::Graph& graph, const KvAddressing& kv, size_t n_kv_words);

// (cos, sin) per token and rotated pair, with the CPU's float recurrence
// theta_i = pos * freq_scale * theta_scale^i (device sin/cos of large angles would drift).
std::vector<float> rope_table(const hal::Graph& graph);

}  // namespace bitnet::cuda
