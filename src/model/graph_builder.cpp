#include "model/graph_builder.h"

#include <cmath>

#include "core/check.h"
#include "quant/quant.h"

namespace bitnet {

GraphBuilder::GraphBuilder(const ModelConfig& config, std::span<const hal::WeightDesc> weights,
                           int64_t n_tokens, int64_t pos0)
    : config_(config), weights_(weights) {
  graph_.n_tokens = n_tokens;
  graph_.pos0 = pos0;
  graph_.rope = {config.rope_style, config.n_rot, config.rope_freq_base, config.rope_freq_scale};
  graph_.attn = {static_cast<int32_t>(config.n_head), static_cast<int32_t>(config.n_head_kv),
                 static_cast<int32_t>(config.n_embd_head),
                 1.0f / std::sqrt(static_cast<float>(config.n_embd_head))};
}

hal::ActId GraphBuilder::act(std::string_view name, int64_t n_cols, hal::ActType type,
                             int64_t n_rows) {
  if (n_rows < 0) n_rows = graph_.n_tokens;
  for (size_t i = 0; i < graph_.acts.size(); ++i) {
    const hal::ActDesc& a = graph_.acts[i];
    if (a.name == name) {
      BITNET_CHECK(a.n_cols == n_cols && a.n_rows == n_rows && a.type == type);
      return static_cast<hal::ActId>(i);
    }
  }
  graph_.acts.push_back({name, type, n_rows, n_cols});
  return static_cast<hal::ActId>(graph_.acts.size() - 1);
}

bool GraphBuilder::is_ternary(hal::WeightId w) const {
  return quant::is_ternary(weights_[static_cast<size_t>(w)].type);
}

void GraphBuilder::embed(hal::ActId dst, hal::WeightId w) {
  push({.kind = hal::OpKind::kEmbed, .dst = dst, .w = w});
}

void GraphBuilder::rms_norm(hal::ActId dst, hal::ActId src, hal::WeightId w) {
  push({.kind = hal::OpKind::kRmsNorm, .dst = dst, .a = src, .w = w, .eps = config_.rms_eps});
}

void GraphBuilder::head_norm(hal::ActId x, hal::WeightId w, int32_t n_head) {
  push({.kind = hal::OpKind::kRmsNorm, .dst = x, .a = x, .w = w, .n_head = n_head, .eps = config_.rms_eps});
}

void GraphBuilder::bias(hal::ActId x, hal::WeightId b) {
  if (b != hal::kNone) push({.kind = hal::OpKind::kBias, .dst = x, .w = b});
}

void GraphBuilder::quantize_for(hal::WeightId w, hal::ActId dst, hal::ActId src) {
  if (is_ternary(w)) push({.kind = hal::OpKind::kQuantizeAct, .dst = dst, .a = src});
}

void GraphBuilder::linear(hal::ActId dst, hal::ActId x, hal::ActId xq, hal::WeightId w,
                          hal::WeightId scale) {
  push({.kind = hal::OpKind::kMatmul, .dst = dst, .a = is_ternary(w) ? xq : x, .w = w});
  if (scale != hal::kNone) push({.kind = hal::OpKind::kScale, .dst = dst, .w = scale});
}

void GraphBuilder::rope(hal::ActId x, int32_t n_head) {
  push({.kind = hal::OpKind::kRope, .dst = x, .n_head = n_head});
}

void GraphBuilder::store_kv(hal::ActId k, hal::ActId v, int32_t il) {
  push({.kind = hal::OpKind::kStoreKv, .a = k, .b = v, .il = il});
}

void GraphBuilder::attention(hal::ActId dst, hal::ActId q, int32_t il) {
  push({.kind = hal::OpKind::kAttention, .dst = dst, .a = q, .il = il});
}

void GraphBuilder::glu(hal::ActId dst, hal::ActId gate, hal::ActId up, FfnAct act) {
  const hal::OpKind kind = act == FfnAct::kSilu ? hal::OpKind::kSiluMul : hal::OpKind::kRelu2Mul;
  push({.kind = kind, .dst = dst, .a = gate, .b = up});
}

void GraphBuilder::add(hal::ActId dst, hal::ActId a, hal::ActId b) {
  push({.kind = hal::OpKind::kAdd, .dst = dst, .a = a, .b = b});
}

void GraphBuilder::copy_rows(hal::ActId dst, hal::ActId src, int64_t row0) {
  push({.kind = hal::OpKind::kCopyRows, .dst = dst, .a = src, .row0 = row0});
}

void GraphBuilder::get_rows(hal::ActId dst, hal::ActId src, std::span<const int32_t> rows) {
  graph_.get_rows.assign(rows.begin(), rows.end());
  push({.kind = hal::OpKind::kGetRows, .dst = dst, .a = src});
}

hal::Graph GraphBuilder::finish(hal::ActId logits) {
  graph_.logits = logits;
  return std::move(graph_);
}

}  // namespace bitnet
