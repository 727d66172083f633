#include "model/arch/arch.h"

namespace bitnet::arch {

// x += Wo attn(x) + bo; x += Wdown (silu(Wgate m) * Wup m). Also qwen2 (Q/K/V biases, in
// self_attention) and qwen3 (per-head q/k norms before rope, in self_attention): llama.cpp
// builds those two as llama's layer with these steps added.
void build_llama_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                       hal::ActId x, int32_t il) {
  const LayerActs a = layer_acts(g, c);
  self_attention(g, c, w, a, x, il);
  g.quantize_for(w.wo, a.attn_q8, a.attn);
  g.linear(a.out, a.attn, a.attn_q8, w.wo, w.wo_scale);
  g.bias(a.out, w.bo);
  g.add(x, x, a.out);

  gated_ffn(g, c, w, a, x);
  g.quantize_for(w.ffn_down, a.ff_q8, a.gate);
  g.linear(a.out, a.gate, a.ff_q8, w.ffn_down, w.ffn_down_scale);
  g.add(x, x, a.out);
}

}  // namespace bitnet::arch
