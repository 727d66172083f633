#include "model/model.h"

#include <fmt/format.h>

#include <string>

#include "gguf/gguf.h"
#include "model/arch/arch.h"
#include "model/graph_builder.h"
#include "quant/quant.h"

namespace bitnet {

namespace {

std::string shape_str(const std::array<int64_t, 4>& ne, int n_dims) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[static_cast<size_t>(i)]);
  return s + "]";
}

// Collects tensors into the weight table, checking presence, shape and type.
class TableBuilder {
 public:
  explicit TableBuilder(const gguf::File& file) : file_(file) {}

  // A tensor of exactly `shape` (ne order: row length first). Missing -> error unless optional.
  Result<hal::WeightId> add(const std::string& name, std::vector<int64_t> shape, bool optional = false) {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) {
      if (optional) return hal::kNone;
      return not_found(fmt::format("missing tensor {}", name));
    }
    std::array<int64_t, 4> want = {1, 1, 1, 1};
    for (size_t i = 0; i < shape.size(); ++i) want[i] = shape[i];
    if (t->ne != want) {
      return corrupt_file(fmt::format("tensor {} has shape {}, expected {}", name,
                                      shape_str(t->ne, t->n_dims),
                                      shape_str(want, static_cast<int>(shape.size()))));
    }
    if (!quant::can_dequantize(t->type)) {
      return unsupported(fmt::format("tensor {} has type {}, which this engine does not run",
                                     name, ggml_type_name(t->type)));
    }
    table_.push_back({t->name, t->type, t->ne, {t->data, t->n_bytes}, file_.mapped()});
    return static_cast<hal::WeightId>(table_.size() - 1);
  }

  const hal::WeightDesc& desc(hal::WeightId id) const { return table_[static_cast<size_t>(id)]; }
  std::vector<hal::WeightDesc> take() { return std::move(table_); }

 private:
  const gguf::File& file_;
  std::vector<hal::WeightDesc> table_;
};

Result<LayerWeights> load_layer(TableBuilder& t, const ModelConfig& c, int64_t il) {
  const std::string p = fmt::format("blk.{}.", il);
  const int64_t n_embd = c.n_embd, n_ff = c.n_ff, n_q = c.n_embd_q(), n_kv = c.n_embd_kv();
  const bool bitnet = c.is_bitnet();
  LayerWeights w;
  BITNET_ASSIGN_OR_RETURN(w.attn_norm, t.add(p + "attn_norm.weight", {n_embd}));
  BITNET_ASSIGN_OR_RETURN(w.wq, t.add(p + "attn_q.weight", {n_embd, n_q}));
  BITNET_ASSIGN_OR_RETURN(w.wk, t.add(p + "attn_k.weight", {n_embd, n_kv}));
  BITNET_ASSIGN_OR_RETURN(w.wv, t.add(p + "attn_v.weight", {n_embd, n_kv}));
  BITNET_ASSIGN_OR_RETURN(w.wo, t.add(p + "attn_output.weight", {n_q, n_embd}));
  // As llama.cpp: qwen2 requires the Q/K/V biases, llama takes them (and Wo's) when present.
  if (c.arch == Arch::kQwen2 || c.arch == Arch::kLlama) {
    const bool optional = c.arch == Arch::kLlama;
    BITNET_ASSIGN_OR_RETURN(w.bq, t.add(p + "attn_q.bias", {n_q}, optional));
    BITNET_ASSIGN_OR_RETURN(w.bk, t.add(p + "attn_k.bias", {n_kv}, optional));
    BITNET_ASSIGN_OR_RETURN(w.bv, t.add(p + "attn_v.bias", {n_kv}, optional));
    BITNET_ASSIGN_OR_RETURN(w.bo, t.add(p + "attn_output.bias", {n_embd}, true));
  }
  if (c.arch == Arch::kQwen3) {
    BITNET_ASSIGN_OR_RETURN(w.attn_q_norm, t.add(p + "attn_q_norm.weight", {c.n_embd_head}));
    BITNET_ASSIGN_OR_RETURN(w.attn_k_norm, t.add(p + "attn_k_norm.weight", {c.n_embd_head}));
  }
  BITNET_ASSIGN_OR_RETURN(w.ffn_norm, t.add(p + "ffn_norm.weight", {n_embd}));
  BITNET_ASSIGN_OR_RETURN(w.ffn_gate, t.add(p + "ffn_gate.weight", {n_embd, n_ff}));
  BITNET_ASSIGN_OR_RETURN(w.ffn_up, t.add(p + "ffn_up.weight", {n_embd, n_ff}));
  BITNET_ASSIGN_OR_RETURN(w.ffn_down, t.add(p + "ffn_down.weight", {n_ff, n_embd}));
  if (bitnet) {
    BITNET_ASSIGN_OR_RETURN(w.attn_sub_norm, t.add(p + "attn_sub_norm.weight", {n_embd}));
    BITNET_ASSIGN_OR_RETURN(w.ffn_sub_norm, t.add(p + "ffn_sub_norm.weight", {n_ff}));
    BITNET_ASSIGN_OR_RETURN(w.wq_scale, t.add(p + "attn_q.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.wk_scale, t.add(p + "attn_k.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.wv_scale, t.add(p + "attn_v.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.wo_scale, t.add(p + "attn_output.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.ffn_gate_scale, t.add(p + "ffn_gate.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.ffn_up_scale, t.add(p + "ffn_up.scale", {1}, true));
    BITNET_ASSIGN_OR_RETURN(w.ffn_down_scale, t.add(p + "ffn_down.scale", {1}, true));
  }
  // Linears that share one input must agree on W2A8 vs float, since they share its int8 twin.
  auto same_kind = [&](hal::WeightId a, hal::WeightId b) {
    return quant::is_ternary(t.desc(a).type) == quant::is_ternary(t.desc(b).type);
  };
  if (!same_kind(w.wq, w.wk) || !same_kind(w.wq, w.wv) || !same_kind(w.ffn_gate, w.ffn_up)) {
    return unsupported(fmt::format(
        "layer {} mixes ternary and float weights among q/k/v or gate/up", il));
  }
  return w;
}

}  // namespace

Result<Network> Network::from_gguf(const gguf::File& file) {
  Network m;
  BITNET_ASSIGN_OR_RETURN(m.config_, ModelConfig::from_gguf(file));
  const ModelConfig& c = m.config_;
  TableBuilder t(file);
  BITNET_ASSIGN_OR_RETURN(m.weights_.token_embd, t.add("token_embd.weight", {c.n_embd, c.n_vocab}));
  BITNET_ASSIGN_OR_RETURN(m.weights_.output_norm, t.add("output_norm.weight", {c.n_embd}));
  BITNET_ASSIGN_OR_RETURN(m.weights_.output, t.add("output.weight", {c.n_embd, c.n_vocab}, true));
  if (m.weights_.output == hal::kNone) m.weights_.output = m.weights_.token_embd;  // tied head
  for (int64_t il = 0; il < c.n_layer; ++il) {
    auto layer = load_layer(t, c, il);
    if (!layer.ok()) return layer.status();
    m.weights_.layers.push_back(*layer);
  }
  m.table_ = t.take();
  return m;
}

hal::Graph Network::build_graph(int64_t n_tokens, int64_t pos0, LogitRows rows) const {
  if (rows == LogitRows::kAll) return build_graph(n_tokens, pos0, std::span<const int32_t>{});
  const auto last = static_cast<int32_t>(n_tokens - 1);
  return build_graph(n_tokens, pos0, std::span<const int32_t>(&last, 1));
}

hal::Graph Network::build_graph(int64_t n_tokens, int64_t pos0, std::span<const int32_t> out_rows) const {
  const ModelConfig& c = config_;
  GraphBuilder g(c, table_, n_tokens, pos0);
  const hal::ActId x = g.act("x", c.n_embd);  // [n_tokens][n_embd] residual stream
  g.embed(x, weights_.token_embd);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& w = weights_.layers[static_cast<size_t>(il)];
    if (c.is_bitnet()) {
      arch::build_bitnet_layer(g, c, w, x, static_cast<int32_t>(il));
    } else {
      arch::build_llama_layer(g, c, w, x, static_cast<int32_t>(il));
    }
  }
  // Head: only the rows whose logits are wanted go through the (large) output matmul.
  hal::ActId h = x;
  const int64_t n_out = out_rows.empty() ? n_tokens : static_cast<int64_t>(out_rows.size());
  if (out_rows.size() == 1 && out_rows[0] == n_tokens - 1) {
    if (n_tokens > 1) {
      h = g.act("x_last", c.n_embd, hal::ActType::kF32, 1);
      g.copy_rows(h, x, n_tokens - 1);
    }
  } else if (!out_rows.empty()) {
    h = g.act("x_out", c.n_embd, hal::ActType::kF32, n_out);
    g.get_rows(h, x, out_rows);
  }
  const hal::ActId hn = g.act("out_norm", c.n_embd, hal::ActType::kF32, n_out);
  const hal::ActId hq = g.act("out_q8", c.n_embd, hal::ActType::kQ8, n_out);
  const hal::ActId logits = g.act("logits", c.n_vocab, hal::ActType::kF32, n_out);
  g.rms_norm(hn, h, weights_.output_norm);
  g.quantize_for(weights_.output, hq, hn);
  g.linear(logits, hn, hq, weights_.output, hal::kNone);
  return g.finish(logits);
}

}  // namespace bitnet
