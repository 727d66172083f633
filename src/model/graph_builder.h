// Appends ops to a hal::Graph with named, reusable activation buffers. Architecture files
// (model/arch/*.cpp) use it so that a layer reads as a list of named steps.
#pragma once

#include <span>
#include <string_view>

#include "hal/ops.h"
#include "model/config.h"

namespace bitnet {

class GraphBuilder {
 public:
  GraphBuilder(const ModelConfig& config, std::span<const hal::WeightDesc> weights,
               int64_t n_tokens, int64_t pos0);

  // An activation buffer by name; the same name and shape returns the same id (reuse).
  hal::ActId act(std::string_view name, int64_t n_cols, hal::ActType type = hal::ActType::kF32,
                 int64_t n_rows = -1);

  bool is_ternary(hal::WeightId w) const;
  int64_t n_tokens() const { return graph_.n_tokens; }

  void embed(hal::ActId dst, hal::WeightId w);
  void rms_norm(hal::ActId dst, hal::ActId src, hal::WeightId w);
  // x = rms_norm of each of the n_head head slices of x's rows, with the one-head gain w.
  void head_norm(hal::ActId x, hal::WeightId w, int32_t n_head);
  // x[t] += b for every token t (nothing when b is kNone).
  void bias(hal::ActId x, hal::WeightId b);
  // dst = W x (x quantized to int8 first when W is ternary: W2A8), then * scale if present.
  // `xq` is the quantized twin of x: pass the same id to several linears to quantize once.
  void linear(hal::ActId dst, hal::ActId x, hal::ActId xq, hal::WeightId w, hal::WeightId scale);
  // dst = int8 per-token quantization of src, emitted only when w (the weight that will
  // consume it) is ternary: float weights take float activations, as the references do.
  void quantize_for(hal::WeightId w, hal::ActId dst, hal::ActId src);
  void rope(hal::ActId x, int32_t n_head);
  void store_kv(hal::ActId k, hal::ActId v, int32_t il);
  void attention(hal::ActId dst, hal::ActId q, int32_t il);
  void glu(hal::ActId dst, hal::ActId gate, hal::ActId up, FfnAct act);
  void add(hal::ActId dst, hal::ActId a, hal::ActId b);
  void copy_rows(hal::ActId dst, hal::ActId src, int64_t row0);
  void get_rows(hal::ActId dst, hal::ActId src, std::span<const int32_t> rows);

  hal::Graph finish(hal::ActId logits);

 private:
  void push(hal::Op op) { graph_.ops.push_back(op); }

  const ModelConfig& config_;
  std::span<const hal::WeightDesc> weights_;
  hal::Graph graph_;
};

}  // namespace bitnet
