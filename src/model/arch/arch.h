// One file per architecture: each appends the ops of one transformer layer.
// Activations (rows = tokens of the step):
//   x     [n_tokens][n_embd]  the residual stream, in and out
#pragma once

#include "model/graph_builder.h"
#include "model/model.h"

namespace bitnet::arch {

// Llama: pre-norm attention and SwiGLU FFN with residual adds.
void build_llama_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                       hal::ActId x, int32_t il);

// BitNet b1.58: llama's layer plus sub-norms before the output and down projections;
// every linear is ternary W2A8 (int8 per-token activations) when its weight is ternary.
void build_bitnet_layer(GraphBuilder& g, const ModelConfig& c, const LayerWeights& w,
                        hal::ActId x, int32_t il);

}  // namespace bitnet::arch
