#include "model/arch/arch.h"

namespace bitnet::arch {

LayerActs layer_acts(GraphBuilder& g, const ModelConfig& c) {
  LayerActs a;
  a.norm = g.act("norm", c.n_embd);
  a.norm_q8 = g.act("norm_q8", c.n_embd, hal::ActType::kQ8);
  a.q = g.act("q", c.n_embd_q());
  a.k = g.act("k", c.n_embd_kv());
  a.v = g.act("v", c.n_embd_kv());
  a.attn = g.act("attn", c.n_embd_q());
  a.attn_q8 = g.act("attn_q8", c.n_embd_q(), hal::ActType::kQ8);
  a.out = g.act("o", c.n_embd);
  a.gate = g.act("gate", c.n_ff);
  a.up = g.act("up", c.n_ff);
  a.ff_q8 = g.act("ff_q8", c.n_ff, hal::ActType::kQ8);
  return a;
}

void self_attention(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                    const LayerActs& a, hal::ActId x, int32_t il) {
  g.rms_norm(a.norm, x, w.attn_norm);
  g.quantize_for(w.wq, a.norm_q8, a.norm);  // shared by q, k and v
  g.linear(a.q, a.norm, a.norm_q8, w.wq, w.wq_scale);
  g.linear(a.k, a.norm, a.norm_q8, w.wk, w.wk_scale);
  g.linear(a.v, a.norm, a.norm_q8, w.wv, w.wv_scale);
  g.bias(a.q, w.bq);  // after the three matmuls, which a backend may run as one pass
  g.bias(a.k, w.bk);
  g.bias(a.v, w.bv);
  const auto n_head = static_cast<int32_t>(c.n_head), n_head_kv = static_cast<int32_t>(c.n_head_kv);
  if (w.attn_q_norm != hal::kNone) g.head_norm(a.q, w.attn_q_norm, n_head);
  if (w.attn_k_norm != hal::kNone) g.head_norm(a.k, w.attn_k_norm, n_head_kv);
  g.rope(a.q, n_head);
  g.rope(a.k, n_head_kv);
  g.store_kv(a.k, a.v, il);
  g.attention(a.attn, a.q, il);
}

void gated_ffn(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w, const LayerActs& a,
               hal::ActId x) {
  g.rms_norm(a.norm, x, w.ffn_norm);
  g.quantize_for(w.ffn_gate, a.norm_q8, a.norm);  // shared by gate and up
  g.linear(a.gate, a.norm, a.norm_q8, w.ffn_gate, w.ffn_gate_scale);
  g.linear(a.up, a.norm, a.norm_q8, w.ffn_up, w.ffn_up_scale);
  g.glu(a.gate, a.gate, a.up, c.ffn_act);
}

}  // namespace bitnet::arch
