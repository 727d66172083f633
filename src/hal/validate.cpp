#include "hal/validate.h"

#include <fmt/format.h>

#include "quant/quant.h"

namespace bitnet::hal {

std::vector<WeightShape> weight_shapes(std::span<const WeightDesc> weights) {
  std::vector<WeightShape> shapes;
  shapes.reserve(weights.size());
  for (const WeightDesc& w : weights) {
    shapes.push_back({w.type, w.ne[0], w.ne[1] * w.ne[2] * w.ne[3], quant::is_ternary(w.type)});
  }
  return shapes;
}

namespace {

// Validates one op; `name` prefixes every message ("op 12 (matmul)").
class OpCheck {
 public:
  OpCheck(const Graph& g, std::span<const int32_t> tokens, std::span<const WeightShape> w, const KvShape& kv)
      : g_(g), tokens_(tokens), weights_(w), kv_(kv) {}

  Status run(size_t index, const Op& op);

 private:
  Status bug(const std::string& what) const { return internal_error(fmt::format("{}: {}", name_, what)); }
  bool act_ok(ActId id) const { return id >= 0 && static_cast<size_t>(id) < g_.acts.size(); }
  const ActDesc& act(ActId id) const { return g_.acts[static_cast<size_t>(id)]; }
  const WeightShape& weight(WeightId id) const { return weights_[static_cast<size_t>(id)]; }

  // dst (and a, b when given) exist and are F32 (a may be Q8 when a_q8).
  Status acts(const Op& op, bool need_a, bool need_b, bool a_q8 = false) const;
  Status need_weight(const Op& op) const {
    if (op.w < 0 || static_cast<size_t>(op.w) >= weights_.size()) return bug(fmt::format("weight id {} out of range", op.w));
    return {};
  }
  Status need_layer(const Op& op) const {
    if (op.il < 0 || op.il >= kv_.n_layer) return bug(fmt::format("layer {} outside the KV cache of {}", op.il, kv_.n_layer));
    return {};
  }
  Status same_shape(const ActDesc& x, const ActDesc& y) const {
    if (x.n_rows != y.n_rows || x.n_cols != y.n_cols) {
      return bug(fmt::format("{} is {}x{} but {} is {}x{}", x.name, x.n_rows, x.n_cols, y.name, y.n_rows, y.n_cols));
    }
    return {};
  }

  Status embed(const Op& op) const;
  Status matmul(const Op& op) const;
  Status rope(const Op& op) const;
  Status kv_op(const Op& op) const;

  const Graph& g_;
  std::span<const int32_t> tokens_;
  std::span<const WeightShape> weights_;
  const KvShape& kv_;
  std::string name_;
};

Status OpCheck::acts(const Op& op, bool need_a, bool need_b, bool a_q8) const {
  for (const auto& [id, needed, label] : {std::tuple{op.dst, true, "dst"}, {op.a, need_a, "a"}, {op.b, need_b, "b"}}) {
    if (!needed) continue;
    if (!act_ok(id)) return bug(fmt::format("{} activation id {} out of range", label, id));
    const bool want_q8 = a_q8 && id == op.a;
    if ((act(id).type == ActType::kQ8) != want_q8) {
      return bug(fmt::format("{} activation {} is not {}", label, act(id).name, want_q8 ? "int8" : "float"));
    }
  }
  return {};
}

Status OpCheck::embed(const Op& op) const {
  BITNET_RETURN_IF_ERROR(acts(op, false, false));
  BITNET_RETURN_IF_ERROR(need_weight(op));
  const WeightShape& w = weight(op.w);
  if (w.ternary) return unsupported(fmt::format("{}: a ternary token embedding is not supported", name_));
  const ActDesc& d = act(op.dst);
  if (d.n_rows != g_.n_tokens || d.n_cols != w.n_cols) return bug("embedding rows do not match the tokens");
  for (const int32_t id : tokens_) {
    if (id < 0 || id >= w.n_rows) {
      return invalid_argument(fmt::format("token id {} is outside the vocabulary (0..{})", id, w.n_rows - 1));
    }
  }
  return {};
}

Status OpCheck::matmul(const Op& op) const {
  if (!act_ok(op.a)) return bug("input activation id out of range");
  const bool q8 = act(op.a).type == ActType::kQ8;
  BITNET_RETURN_IF_ERROR(acts(op, true, false, q8));
  BITNET_RETURN_IF_ERROR(need_weight(op));
  const WeightShape& w = weight(op.w);
  const ActDesc& a = act(op.a);
  const ActDesc& d = act(op.dst);
  if (a.n_cols != w.n_cols || d.n_rows != a.n_rows || d.n_cols != w.n_rows) {
    return bug(fmt::format("[{}x{}] x weight [{}x{}] -> [{}x{}] do not chain", a.n_rows, a.n_cols, w.n_rows,
                           w.n_cols, d.n_rows, d.n_cols));
  }
  if (q8 != w.ternary) {
    return unsupported(fmt::format("{}: {} activations with a {} weight", name_, q8 ? "int8" : "float",
                                   ggml_type_name(w.type)));
  }
  return {};
}

Status OpCheck::rope(const Op& op) const {
  BITNET_RETURN_IF_ERROR(acts(op, false, false));
  const ActDesc& d = act(op.dst);
  const int32_t head_dim = g_.attn.head_dim;
  // Rows may be wider than the heads: rope leaves the rest alone.
  if (op.n_head <= 0 || head_dim <= 0 || static_cast<int64_t>(op.n_head) * head_dim > d.n_cols) {
    return bug(fmt::format("{} heads of {} in rows of {}", op.n_head, head_dim, d.n_cols));
  }
  if (g_.rope.n_rot <= 0 || g_.rope.n_rot > head_dim || g_.rope.n_rot % 2 != 0) {
    return bug(fmt::format("rope over {} of {} dimensions", g_.rope.n_rot, head_dim));
  }
  if (d.n_rows != g_.n_tokens) return bug("rope rows differ from the tokens");
  return {};
}

Status OpCheck::kv_op(const Op& op) const {
  BITNET_RETURN_IF_ERROR(need_layer(op));
  const AttentionParams& p = g_.attn;
  if (op.kind == OpKind::kStoreKv) {
    if (!act_ok(op.a) || !act_ok(op.b)) return bug("K or V activation id out of range");
    for (ActId id : {op.a, op.b}) {
      if (act(id).type != ActType::kF32 || act(id).n_rows != g_.n_tokens || act(id).n_cols != kv_.n_embd_kv) {
        return bug(fmt::format("{} does not match the KV cache rows of {}", act(id).name, kv_.n_embd_kv));
      }
    }
    return {};
  }
  BITNET_RETURN_IF_ERROR(acts(op, true, false));
  if (p.n_head <= 0 || p.n_head_kv <= 0 || p.head_dim <= 0 || p.n_head % p.n_head_kv != 0 ||
      static_cast<int64_t>(p.n_head_kv) * p.head_dim != kv_.n_embd_kv) {
    return bug(fmt::format("{} heads, {} kv heads of {} over a cache of {}", p.n_head, p.n_head_kv, p.head_dim,
                           kv_.n_embd_kv));
  }
  const int64_t n_embd = static_cast<int64_t>(p.n_head) * p.head_dim;
  if (act(op.a).n_rows != g_.n_tokens || act(op.a).n_cols != n_embd) return bug("queries do not match the heads");
  return same_shape(act(op.dst), act(op.a));
}

Status OpCheck::run(size_t index, const Op& op) {
  name_ = fmt::format("op {} ({})", index, op_name(op.kind));
  switch (op.kind) {
    case OpKind::kEmbed: return embed(op);
    case OpKind::kRmsNorm: {
      BITNET_RETURN_IF_ERROR(acts(op, true, false));
      BITNET_RETURN_IF_ERROR(need_weight(op));
      BITNET_RETURN_IF_ERROR(same_shape(act(op.dst), act(op.a)));
      const WeightShape& w = weight(op.w);
      const int64_t n_cols = act(op.dst).n_cols;
      if (op.n_head < 0 || (op.n_head > 0 && n_cols % op.n_head != 0)) {
        return bug(fmt::format("rows of {} do not split into {} slices", n_cols, op.n_head));
      }
      const int64_t slice = op.n_head > 0 ? n_cols / op.n_head : n_cols;
      if (w.n_rows != 1 || w.n_cols != slice || w.ternary) return bug("norm weight does not match the rows");
      return {};
    }
    case OpKind::kQuantizeAct: {
      if (!act_ok(op.dst) || !act_ok(op.a)) return bug("activation id out of range");
      if (act(op.dst).type != ActType::kQ8 || act(op.a).type != ActType::kF32) return bug("quantize_act wants float -> int8");
      return same_shape(act(op.dst), act(op.a));
    }
    case OpKind::kMatmul: return matmul(op);
    case OpKind::kScale: {
      BITNET_RETURN_IF_ERROR(acts(op, false, false));
      BITNET_RETURN_IF_ERROR(need_weight(op));
      const WeightShape& w = weight(op.w);
      if (w.n_cols * w.n_rows != 1 || w.ternary) return bug("a scale weight holds one float");
      return {};
    }
    case OpKind::kBias: {
      BITNET_RETURN_IF_ERROR(acts(op, false, false));
      BITNET_RETURN_IF_ERROR(need_weight(op));
      const WeightShape& w = weight(op.w);
      if (w.n_rows != 1 || w.n_cols != act(op.dst).n_cols || w.ternary) return bug("bias does not match the rows");
      return {};
    }
    case OpKind::kRope: return rope(op);
    case OpKind::kStoreKv:
    case OpKind::kAttention: return kv_op(op);
    case OpKind::kSiluMul:
    case OpKind::kRelu2Mul:
    case OpKind::kAdd: {
      BITNET_RETURN_IF_ERROR(acts(op, true, true));
      BITNET_RETURN_IF_ERROR(same_shape(act(op.dst), act(op.a)));
      return same_shape(act(op.dst), act(op.b));
    }
    case OpKind::kGetRows: {
      BITNET_RETURN_IF_ERROR(acts(op, true, false));
      const ActDesc& a = act(op.a);
      const ActDesc& d = act(op.dst);
      if (d.n_cols != a.n_cols || static_cast<int64_t>(g_.get_rows.size()) != d.n_rows) return bug("get_rows does not match dst");
      for (int32_t r : g_.get_rows) {
        if (r < 0 || r >= a.n_rows) return bug(fmt::format("row {} outside {} rows", r, a.n_rows));
      }
      return {};
    }
    case OpKind::kCopyRows: {
      BITNET_RETURN_IF_ERROR(acts(op, true, false));
      const ActDesc& a = act(op.a);
      const ActDesc& d = act(op.dst);
      if (d.n_cols != a.n_cols || op.row0 < 0 || op.row0 + d.n_rows > a.n_rows) return bug("rows out of range");
      return {};
    }
  }
  return bug(fmt::format("unknown op kind {}", static_cast<int>(op.kind)));
}

}  // namespace

KvRows resolve_kv(const Graph& graph, const KvShape& kv) {
  KvRows r;
  r.block_size = kv_block_size(kv);
  if (!graph.kv.pos.empty()) {
    r.pos = graph.kv.pos;
    r.table_begin = graph.kv.table_begin;
    r.tables = graph.kv.tables;
    return r;
  }
  r.pos.resize(static_cast<size_t>(graph.n_tokens));
  for (int64_t t = 0; t < graph.n_tokens; ++t) r.pos[static_cast<size_t>(t)] = static_cast<int32_t>(graph.pos0 + t);
  r.table_begin.assign(static_cast<size_t>(graph.n_tokens), 0);
  const int64_t n_blocks = r.block_size > 0 ? kv.n_ctx / r.block_size : 0;
  for (int64_t b = 0; b < n_blocks; ++b) r.tables.push_back(static_cast<int32_t>(b));
  return r;
}

Status validate_graph(const Graph& graph, std::span<const int32_t> tokens, size_t n_logits,
                      std::span<const WeightShape> weights, const KvShape& kv) {
  if (graph.n_tokens <= 0 || static_cast<int64_t>(tokens.size()) != graph.n_tokens) {
    return invalid_argument(fmt::format("{} tokens for a graph of {}", tokens.size(), graph.n_tokens));
  }
  if (kv.n_ctx <= 0) return internal_error("compute() before init_kv()");
  const int64_t block = kv_block_size(kv);
  if (block <= 0 || kv.n_ctx % block != 0) return internal_error(fmt::format("a cache of {} positions in blocks of {}", kv.n_ctx, block));
  if (graph.kv.pos.empty()) {
    if (!graph.kv.tables.empty() || !graph.kv.table_begin.empty()) return internal_error("block tables without positions");
    if (graph.pos0 < 0 || graph.pos0 + graph.n_tokens > kv.n_ctx) {
      return out_of_range(fmt::format("positions up to {} exceed the context of {}", graph.pos0 + graph.n_tokens, kv.n_ctx));
    }
  } else {
    const KvMap& m = graph.kv;
    const auto n = static_cast<size_t>(graph.n_tokens);
    if (m.pos.size() != n || m.table_begin.size() != n) {
      return internal_error(fmt::format("{} positions and {} table starts for {} tokens", m.pos.size(), m.table_begin.size(), n));
    }
    if ((block & (block - 1)) != 0) return internal_error(fmt::format("a paged cache needs blocks of 2^k positions, not {}", block));
    const int64_t n_blocks = kv.n_ctx / block;
    for (int32_t b : m.tables) {
      if (b < 0 || b >= n_blocks) return internal_error(fmt::format("block {} outside the cache's {} blocks", b, n_blocks));
    }
    for (size_t t = 0; t < n; ++t) {
      if (m.pos[t] < 0 || m.table_begin[t] < 0) return internal_error("a negative position or table start");
      if (m.pos[t] >= kv.n_ctx) return out_of_range(fmt::format("position {} exceeds the context of {}", m.pos[t], kv.n_ctx));
      if (static_cast<int64_t>(m.table_begin[t]) + m.pos[t] / block >= static_cast<int64_t>(m.tables.size())) {
        return out_of_range(fmt::format("position {} is past its sequence's blocks", m.pos[t]));
      }
    }
  }
  for (const ActDesc& d : graph.acts) {
    if (d.n_rows <= 0 || d.n_cols <= 0) return internal_error(fmt::format("activation {} is empty", d.name));
  }
  if (graph.logits < 0 || static_cast<size_t>(graph.logits) >= graph.acts.size() ||
      graph.acts[static_cast<size_t>(graph.logits)].type != ActType::kF32) {
    return internal_error("the graph's logits are not a float activation");
  }
  const ActDesc& out = graph.acts[static_cast<size_t>(graph.logits)];
  if (n_logits != static_cast<size_t>(out.n_rows * out.n_cols)) {
    return invalid_argument(fmt::format("a logits buffer of {} floats for {} x {} logits", n_logits, out.n_rows, out.n_cols));
  }
  OpCheck check(graph, tokens, weights, kv);
  for (size_t i = 0; i < graph.ops.size(); ++i) BITNET_RETURN_IF_ERROR(check.run(i, graph.ops[i]));
  return {};
}

}  // namespace bitnet::hal
