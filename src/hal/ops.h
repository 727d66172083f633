// The op set of the hardware abstraction layer: a model is a flat, ordered list of these ops
// over activation ids and weight ids, built by src/model for one shape class (a chunk of
// n_tokens consecutive positions of one sequence). A flat list lets a GPU backend capture a
// graph, record a command buffer once or batch its enqueues; the CPU backend walks it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/types.h"

namespace bitnet::hal {

using ActId = int32_t;     // index into Graph::acts
using WeightId = int32_t;  // index into the weight table handed to Backend::load_weights
constexpr int32_t kNone = -1;

// A weight as stored in the model file: the backend uploads or repacks it once at load.
struct WeightDesc {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0]: row length (input features)
  std::span<const uint8_t> bytes;            // host bytes (memory-mapped file)
  // The bytes lie in a read-only file mapping: a backend that keeps its own copy may release
  // the pages (release_mapped_pages). False for bytes in ordinary memory, which would be lost.
  bool file_backed = false;
};

enum class ActType : uint8_t {
  kF32,  // float rows
  kQ8,   // W2A8 activations: int8 rows, one f32 scale s and one int32 sum per row
};

// An activation buffer: n_rows x n_cols. Ids are reused across layers (the list is sequential).
struct ActDesc {
  std::string_view name;
  ActType type = ActType::kF32;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

enum class RopeStyle : uint8_t {
  kNorm,  // rotate adjacent pairs (x[2i], x[2i+1]): llama
  kNeox,  // rotate halves (x[i], x[i + n_rot/2]): bitnet architectures
};

enum class OpKind : uint8_t {
  kEmbed,        // dst[t] = row tokens[t] of weight w (any dequantizable type)
  kRmsNorm,      // dst = a / sqrt(mean(a^2) + eps) * w, over each row, or over each of the
                 // n_head equal slices of a row when n_head > 0 (w: one slice; qwen3's q/k norm)
  kQuantizeAct,  // dst (kQ8) = per-row int8 of a: s = 127/max(|a|,1e-5), round half to even
  kMatmul,       // dst[t][r] = sum_k w[r][k] * a[t][k]; a kQ8 => ternary W2A8 path
  kScale,        // dst *= w[0] (per-linear .scale tensors)
  kBias,         // dst[t] += w (one row of n_cols floats added to every row: linear biases)
  kRope,         // rotate dst in place (n_head heads of head_dim), token t at Graph::position(t)
  kStoreKv,      // write rows of a (K) and b (V) into layer il's cache, token t at its position
  kAttention,    // dst = causal softmax(q k^T * scale) v over the cache of layer il
  kSiluMul,      // dst = silu(a) * b
  kRelu2Mul,     // dst = relu(a)^2 * b
  kAdd,          // dst = a + b
  kCopyRows,     // dst[0..n) = a[row0 .. row0+n)  (keep only the rows whose logits are wanted)
  kGetRows,      // dst[i] = a[Graph::get_rows[i]]   (the same for scattered rows: a batch's last tokens)
};

constexpr std::string_view op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kEmbed: return "embed";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kQuantizeAct: return "quantize_act";
    case OpKind::kMatmul: return "matmul";
    case OpKind::kScale: return "scale";
    case OpKind::kBias: return "bias";
    case OpKind::kRope: return "rope";
    case OpKind::kStoreKv: return "store_kv";
    case OpKind::kAttention: return "attention";
    case OpKind::kSiluMul: return "silu_mul";
    case OpKind::kRelu2Mul: return "relu2_mul";
    case OpKind::kAdd: return "add";
    case OpKind::kCopyRows: return "copy_rows";
    case OpKind::kGetRows: return "get_rows";
  }
  return "unknown";
}


struct Op {
  OpKind kind;
  ActId dst = kNone;
  ActId a = kNone;
  ActId b = kNone;
  WeightId w = kNone;
  int32_t il = 0;        // layer index (kStoreKv, kAttention)
  int32_t n_head = 0;    // kRope: heads in dst; kRmsNorm: slices normalized apart (0: whole rows)
  int64_t row0 = 0;      // kCopyRows
  float eps = 0.0f;      // kRmsNorm
};

struct RopeParams {
  RopeStyle style = RopeStyle::kNorm;
  int32_t n_rot = 0;          // rotated dimensions per head (<= head_dim)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
};

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  float kq_scale = 1.0f;      // usually 1/sqrt(head_dim)
};

// Where the tokens of a step sit in the KV cache. The cache (each layer's) is a pool of blocks
// of KvShape::block_size positions; a sequence owns a list of blocks, its block table, and
// position p of the sequence lives in cache row table[p / block_size] * block_size +
// p % block_size. Several sequences may share blocks (a common prefix). Token t of the step
// stores its K/V at its position and attends to positions 0..pos[t] of its own sequence.
// Empty: one sequence in the cache's rows 0.. (positions pos0 + t, the identity table).
struct KvMap {
  std::vector<int32_t> pos;          // [n_tokens] position of each token in its sequence
  std::vector<int32_t> table_begin;  // [n_tokens] where its sequence's table starts in `tables`
  std::vector<int32_t> tables;       // the step's block tables, concatenated
};

// The op list for one forward step.
struct Graph {
  int64_t n_tokens = 0;   // tokens in this step
  int64_t pos0 = 0;       // position of the first token (when kv is empty)
  KvMap kv;               // several sequences, or a paged cache (empty: pos0 + t)
  std::vector<int32_t> get_rows;  // kGetRows: source rows
  int64_t position(int64_t t) const { return kv.pos.empty() ? pos0 + t : kv.pos[static_cast<size_t>(t)]; }
  RopeParams rope;
  AttentionParams attn;
  std::vector<ActDesc> acts;
  std::vector<Op> ops;
  ActId logits = kNone;   // the output activation (n_rows x n_vocab)
};

}  // namespace bitnet::hal
