// WHAT the network computes: configuration, the weight table (views into the GGUF file) and
// the op lists of each architecture. Never sees a device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "hal/ops.h"
#include "model/config.h"

namespace bitnet {
namespace gguf { class File; }

struct LayerWeights {
  hal::WeightId attn_norm = hal::kNone;
  hal::WeightId wq = hal::kNone, wk = hal::kNone, wv = hal::kNone, wo = hal::kNone;
  // Optional linear biases (qwen2 has bq, bk, bv; llama files may have any of the four).
  hal::WeightId bq = hal::kNone, bk = hal::kNone, bv = hal::kNone, bo = hal::kNone;
  hal::WeightId attn_q_norm = hal::kNone, attn_k_norm = hal::kNone;  // qwen3: per-head RMS norms
  hal::WeightId attn_sub_norm = hal::kNone;  // bitnet only
  hal::WeightId ffn_norm = hal::kNone;
  hal::WeightId ffn_gate = hal::kNone, ffn_up = hal::kNone, ffn_down = hal::kNone;
  hal::WeightId ffn_sub_norm = hal::kNone;   // bitnet only
  // Optional {1}-shaped per-linear scales (upstream bitnet files): y = (W x) * scale.
  hal::WeightId wq_scale = hal::kNone, wk_scale = hal::kNone, wv_scale = hal::kNone,
                wo_scale = hal::kNone, ffn_gate_scale = hal::kNone, ffn_up_scale = hal::kNone,
                ffn_down_scale = hal::kNone;
};

struct ModelWeights {
  hal::WeightId token_embd = hal::kNone;
  hal::WeightId output_norm = hal::kNone;
  hal::WeightId output = hal::kNone;  // == token_embd when the head is tied
  std::vector<LayerWeights> layers;
};

enum class LogitRows { kLast, kAll };

// What a model computes: its configuration, its weight table (bytes mapped from the file)
// and the op lists of a forward step. Never sees a device.
class Network {
 public:
  // Reads the configuration and maps every tensor; the File must outlive the Network.
  static Result<Network> from_gguf(const gguf::File& file);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  std::span<const hal::WeightDesc> weight_table() const { return table_; }
  bool tied_head() const { return weights_.output == weights_.token_embd; }

  // Points weight `id` at other bytes of another type (same shape), e.g. a requantized head;
  // the bytes must outlive the model.
  void replace_weight(hal::WeightId id, GgmlType type, std::span<const uint8_t> bytes) {
    table_[static_cast<size_t>(id)].type = type;
    table_[static_cast<size_t>(id)].bytes = bytes;
    table_[static_cast<size_t>(id)].file_backed = false;
  }

  // The op list for n_tokens tokens at positions pos0.. (logits for the last or every token).
  hal::Graph build_graph(int64_t n_tokens, int64_t pos0, LogitRows rows) const;
  // The same with logits for the rows listed (in that order; empty: every row). A batch of
  // several sequences sets the graph's kv map afterwards.
  hal::Graph build_graph(int64_t n_tokens, int64_t pos0, std::span<const int32_t> out_rows) const;

 private:
  ModelConfig config_;
  std::vector<hal::WeightDesc> table_;
  ModelWeights weights_;
};

}  // namespace bitnet
