// One validation of an op list before a backend runs it, shared by every backend, so that
// one fault gets one status code wherever it happens:
//   kInvalidArgument  the caller's input: token ids outside the vocabulary, a token count or
//                     logits buffer that does not match the graph
//   kOutOfRange       positions past the KV cache (the context is full)
//   kUnsupported      a well-formed op no backend runs (a ternary embedding, int8 activations
//                     with a float weight, ...)
//   kInternal         a malformed graph or a call out of order (a bug in the caller): ids out
//                     of range, shapes that do not chain, compute() before init_kv()
// Backends may refuse more (device limits) with kUnsupported; they never crash on a graph.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bitnet/status.h"
#include "hal/backend.h"
#include "hal/ops.h"

namespace bitnet::hal {

// What validation needs to know of a weight (kept by a backend from load_weights).
struct WeightShape {
  GgmlType type = GgmlType::kF32;
  int64_t n_cols = 0;  // ne[0]
  int64_t n_rows = 0;  // ne[1] * ne[2] * ne[3]
  bool ternary = false;
};

std::vector<WeightShape> weight_shapes(std::span<const WeightDesc> weights);

// The KV addressing of a validated graph, made explicit for a backend: per token its position
// and where its block table starts; for an empty Graph::kv the identity (one sequence, one
// table [0, 1, ...] over the whole cache).
struct KvRows {
  std::vector<int32_t> pos;
  std::vector<int32_t> table_begin;
  std::vector<int32_t> tables;
  int64_t block_size = 0;
  // The cache row of position p of token t's sequence.
  int64_t row(int64_t t, int64_t p) const {
    const int32_t block = tables[static_cast<size_t>(table_begin[static_cast<size_t>(t)] + p / block_size)];
    return static_cast<int64_t>(block) * block_size + p % block_size;
  }
  // Token t's block table (positions 0..pos[t] are within it).
  const int32_t* table(int64_t t) const { return tables.data() + table_begin[static_cast<size_t>(t)]; }
};
KvRows resolve_kv(const Graph& graph, const KvShape& kv);
// KvShape::block_size, with 0 meaning the whole cache.
inline int64_t kv_block_size(const KvShape& kv) { return kv.block_size > 0 ? kv.block_size : kv.n_ctx; }

// Checks `graph` for a compute() call with `tokens` and a logits buffer of n_logits floats,
// against the weights and the KV cache (kv.n_ctx == 0: not allocated yet).
Status validate_graph(const Graph& graph, std::span<const int32_t> tokens, size_t n_logits,
                      std::span<const WeightShape> weights, const KvShape& kv);

}  // namespace bitnet::hal
