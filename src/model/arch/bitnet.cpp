#include "model/arch/arch.h"

namespace bitnet::arch {

// FORMATS.md, "Model facts":
//   h   = x + Wo(attn_sub_norm(Attn(rope(Wq n), rope(Wk n), Wv n))),  n = attn_norm(x)
//   out = h + Wdown(ffn_sub_norm(act(Wgate m) * (Wup m))),          m = ffn_norm(h)
// act is squared ReLU (bitnet-b1.58, bitnet-25) or SiLU (bitnet), see ModelConfig.
void build_bitnet_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                        hal::ActId x, int32_t il) {
  const LayerActs a = layer_acts(g, c);
  self_attention(g, c, w, a, x, il);
  g.rms_norm(a.attn, a.attn, w.attn_sub_norm);
  g.quantize_for(w.wo, a.attn_q8, a.attn);
  g.linear(a.out, a.attn, a.attn_q8, w.wo, w.wo_scale);
  g.add(x, x, a.out);

  gated_ffn(g, c, w, a, x);
  g.rms_norm(a.gate, a.gate, w.ffn_sub_norm);
  g.quantize_for(w.ffn_down, a.ff_q8, a.gate);
  g.linear(a.out, a.gate, a.ff_q8, w.ffn_down, w.ffn_down_scale);
  g.add(x, x, a.out);
}

}  // namespace bitnet::arch
