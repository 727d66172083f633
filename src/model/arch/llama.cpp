#include "model/arch/arch.h"

namespace bitnet::arch {

void build_llama_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                       hal::ActId x, int32_t il) {
  const hal::ActId n = g.act("norm", c.n_embd);           // [n_tokens][n_embd]
  const hal::ActId nq = g.act("norm_q8", c.n_embd, hal::ActType::kQ8);
  const hal::ActId q = g.act("q", c.n_embd);              // [n_tokens][n_head * head_dim]
  const hal::ActId k = g.act("k", c.n_embd_kv());         // [n_tokens][n_head_kv * head_dim]
  const hal::ActId v = g.act("v", c.n_embd_kv());
  const hal::ActId attn = g.act("attn", c.n_embd);
  const hal::ActId attn_q8 = g.act("attn_q8", c.n_embd, hal::ActType::kQ8);
  const hal::ActId o = g.act("o", c.n_embd);
  const hal::ActId gate = g.act("gate", c.n_ff);          // [n_tokens][n_ff]
  const hal::ActId up = g.act("up", c.n_ff);
  const hal::ActId ff_q8 = g.act("ff_q8", c.n_ff, hal::ActType::kQ8);

  // Attention: x += Wo attn(rope(Wq n), rope(Wk n), Wv n), n = attn_norm(x).
  g.rms_norm(n, x, w.attn_norm);
  g.quantize_for(w.wq, nq, n);
  g.linear(q, n, nq, w.wq, w.wq_scale);
  g.linear(k, n, nq, w.wk, w.wk_scale);
  g.linear(v, n, nq, w.wv, w.wv_scale);
  g.rope(q, static_cast<int32_t>(c.n_head));
  g.rope(k, static_cast<int32_t>(c.n_head_kv));
  g.store_kv(k, v, il);
  g.attention(attn, q, il);
  g.quantize_for(w.wo, attn_q8, attn);
  g.linear(o, attn, attn_q8, w.wo, w.wo_scale);
  g.add(x, x, o);

  // FFN: x += Wdown (silu(Wgate m) * Wup m), m = ffn_norm(x).
  g.rms_norm(n, x, w.ffn_norm);
  g.quantize_for(w.ffn_gate, nq, n);
  g.linear(gate, n, nq, w.ffn_gate, w.ffn_gate_scale);
  g.linear(up, n, nq, w.ffn_up, w.ffn_up_scale);
  g.glu(gate, gate, up, c.ffn_act);
  g.quantize_for(w.ffn_down, ff_q8, gate);
  g.linear(o, gate, ff_q8, w.ffn_down, w.ffn_down_scale);
  g.add(x, x, o);
}

}  // namespace bitnet::arch
