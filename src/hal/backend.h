// Level 2 of the HAL: a backend owns a device's memory (resident weights, activation
// buffers, the KV cache) and runs whole op lists on it; only logits come back to the host.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bitnet/status.h"
#include "hal/ops.h"
#include "hal/top.h"

namespace bitnet::hal {

// Element type of the KV cache. A backend may store a wider type than asked for (the GPU
// backends keep F32); BackendStats::kv_type says what it stores.
enum class KvType : uint8_t { kF32, kF16 };

inline std::string_view kv_type_name(KvType t) { return t == KvType::kF16 ? "f16" : "f32"; }
inline uint64_t kv_type_bytes(KvType t) { return t == KvType::kF16 ? 2 : 4; }

struct KvShape {
  int32_t n_layer = 0;
  int64_t n_ctx = 0;      // positions in the cache (all blocks)
  int64_t n_embd_kv = 0;  // n_head_kv * head_dim
  KvType type = KvType::kF32;  // asked for; the engine's default is F16 (EngineOptions::cache_type)
  int64_t block_size = 0; // positions per block of a paged cache (KvMap, a power of 2); 0 = n_ctx
};

// What a backend reports about itself for logs and receipts.
struct BackendInfo {
  std::string name;    // "cpu-avx2", "opencl:pocl", ...
  std::string device;  // human-readable device description
  int n_threads = 1;
};

// Counters for logs and receipts (device memory backends fill the buffer-pool fields).
struct BackendStats {
  uint64_t weight_bytes = 0;        // resident weights
  uint64_t kv_bytes = 0;            // KV cache
  KvType kv_type = KvType::kF32;    // what the KV cache stores (may differ from KvShape::type)
  uint64_t pool_allocations = 0;    // buffers created by the pool
  uint64_t pool_reuses = 0;         // requests served from the pool's free list
  uint64_t pool_bytes = 0;          // bytes currently held by the pool
  uint64_t pool_peak_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendInfo info() const = 0;

  // Uploads or repacks every weight once; ids in op lists index this table.
  virtual Status load_weights(std::span<const WeightDesc> weights) = 0;
  // Allocates the KV cache (cleared) of shape.type, or of F32 where the backend has no kernels
  // for that type (stats().kv_type tells which; the backend itself logs nothing).
  virtual Status init_kv(const KvShape& shape) = 0;
  // Runs `graph` for `tokens` (graph.n_tokens of them); copies the logits activation
  // (graph.acts[graph.logits], row-major) into `logits`, which must be exactly that size.
  virtual Status compute(const Graph& graph, std::span<const int32_t> tokens,
                         std::span<float> logits) = 0;
  // As compute(), but only part of each logits row comes back: out[r] = select_top(row r,
  // req[r]) (hal/top.h; the top entries in any order). A GPU backend selects them on the
  // device; by default the whole rows are computed into host memory and selected there.
  virtual Status compute_top(const Graph& graph, std::span<const int32_t> tokens, std::span<const TopRequest> req,
                             std::vector<std::vector<TokenLogit>>& out) {
    return compute_then_select(graph, tokens, req, out);
  }
  // Names of the kernels that have run so far (for receipts), e.g. "matmul_w2a8_scalar".
  virtual std::vector<std::string> kernels_used() const = 0;

  virtual BackendStats stats() const { return {}; }
  // Bytes of weight `id` as this backend stores and reads it (a repack may be smaller or
  // larger than the file's bytes); 0 when the backend does not know. Decode's bandwidth bound
  // is counted from these (ModelSummary::bytes_per_token).
  virtual uint64_t weight_bytes(WeightId /*id*/) const { return 0; }
  // Frees scratch memory (activation buffers, pooled buffers) after an out-of-memory error;
  // weights and the KV cache stay. The next compute() allocates what it needs again.
  virtual void release_scratch() {}

 protected:
  // compute_top() on the host: compute() into a buffer, then select_top() per row.
  Status compute_then_select(const Graph& graph, std::span<const int32_t> tokens, std::span<const TopRequest> req,
                             std::vector<std::vector<TokenLogit>>& out);
};

}  // namespace bitnet::hal
