// One file per architecture: each appends the ops of one transformer layer. The steps both
// families share live in common.cpp.
// Activations (rows = tokens of the step):
//   x     [n_tokens][n_embd]  the residual stream, in and out
#pragma once

#include "model/graph_builder.h"
#include "model/model.h"

namespace bitnet::arch {

// Llama: pre-norm attention and SwiGLU FFN with residual adds; with the optional biases and
// q/k norms of LayerWeights also qwen2 and qwen3.
void build_llama_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                       hal::ActId x, int32_t il);

// BitNet b1.58: llama's layer plus sub-norms before the output and down projections;
// every linear is ternary W2A8 (int8 per-token activations) when its weight is ternary.
void build_bitnet_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                        hal::ActId x, int32_t il);

// The activation buffers of a layer (reused by every layer).
struct LayerActs {
  hal::ActId norm;     // [n_tokens][n_embd]
  hal::ActId norm_q8;  // its int8 twin (W2A8)
  hal::ActId q;        // [n_tokens][n_head * head_dim] (n_embd_q)
  hal::ActId k, v;     // [n_tokens][n_head_kv * head_dim]
  hal::ActId attn;     // [n_tokens][n_embd_q] attention output (before Wo)
  hal::ActId attn_q8;
  hal::ActId out;      // [n_tokens][n_embd] output of Wo / Wdown
  hal::ActId gate, up; // [n_tokens][n_ff]
  hal::ActId ff_q8;
};
LayerActs layer_acts(GraphBuilder& g, const ModelConfig& c);

// a.attn = Attn(rope(qn(Wq n + bq)), rope(kn(Wk n + bk)), Wv n + bv) with n = attn_norm(x),
// each bias and per-head norm qn/kn only where the layer has it; K and V go to the cache.
void self_attention(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                    const LayerActs& a, hal::ActId x, int32_t il);

// a.gate = act(Wgate m) * (Wup m) with m = ffn_norm(x).
void gated_ffn(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w, const LayerActs& a,
               hal::ActId x);

}  // namespace bitnet::arch
