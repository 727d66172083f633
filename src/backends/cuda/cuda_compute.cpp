// Running an op list: the plan (cuda_plan.h) checked before anything is launched, activation
// blocks from the pool, the step's token ids, KV addressing and rope table uploaded, one
// launch per op on the backend's stream, then the logits copied back and the stream synced.
#include <fmt/format.h>

#include <algorithm>

#include "backends/cuda/cuda_backend_impl.h"

namespace bitnet::cuda {

namespace {

bool uses(const std::vector<Kernel>& plan, Kernel k) { return std::find(plan.begin(), plan.end(), k) != plan.end(); }

}  // namespace

Result<PoolBlock> CudaBackend::scratch(PoolBlock& slot, uint64_t bytes) {
  if (slot && slot.bytes >= bytes) return slot;
  pool_->release(std::exchange(slot, {}));
  BITNET_ASSIGN_OR_RETURN(slot, pool_->acquire(bytes));
  return slot;
}

Status CudaBackend::upload(PoolBlock& slot, const void* host, uint64_t bytes) {
  BITNET_RETURN_IF_ERROR(scratch(slot, bytes).status());
  // From pageable memory: the call returns once the bytes are staged, so `host` may go.
  return cuda_status(cudaMemcpyAsync(slot.ptr, host, bytes, cudaMemcpyHostToDevice, stream_), "upload of step inputs");
}

void CudaBackend::release_acts() {
  for (DeviceAct& a : acts_) pool_->release(std::exchange(a.block, {}));
  acts_.clear();
}

Status CudaBackend::prepare(const hal::Graph& graph, std::span<const int32_t> tokens, const std::vector<Kernel>& plan) {
  release_acts();
  acts_.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    BITNET_ASSIGN_OR_RETURN(acts_[i].layout, act_layout(graph.acts[i]));
    BITNET_ASSIGN_OR_RETURN(acts_[i].block, pool_->acquire(acts_[i].layout.bytes));
  }
  BITNET_RETURN_IF_ERROR(upload(tokens_, tokens.data(), tokens.size_bytes()));
  if (uses(plan, Kernel::kStoreKv) || uses(plan, Kernel::kAttention)) {
    const hal::KvRows rows = hal::resolve_kv(graph, kv_);
    BITNET_ASSIGN_OR_RETURN(const KvAddressing a, kv_addressing(graph, rows));
    const std::vector<int32_t> words = kv_words(rows, a);
    BITNET_RETURN_IF_ERROR(upload(kv_words_, words.data(), words.size() * 4));
    const auto* base = static_cast<const int32_t*>(kv_words_.ptr);
    const auto n = static_cast<size_t>(graph.n_tokens);
    kv_rows_ = {base, a.identity ? nullptr : base + n, a.identity ? nullptr : base + 2 * n, a.block_shift};
  }
  if (uses(plan, Kernel::kRope)) {
    const std::vector<float> table = rope_table(graph);
    BITNET_RETURN_IF_ERROR(upload(rope_, table.data(), table.size() * 4));
  }
  if (uses(plan, Kernel::kAttention)) {
    const hal::AttentionParams& p = graph.attn;
    attn_shape_ = {p.n_head, p.n_head_kv, p.head_dim, static_cast<int64_t>(p.n_head_kv) * p.head_dim, p.kq_scale, 1, 0};
    choose_attention_split(attn_shape_, kv_.n_ctx, prop_.multiProcessorCount);
    BITNET_RETURN_IF_ERROR(scratch(attn_scratch_, static_cast<uint64_t>(attention_scratch_floats(attn_shape_, graph.n_tokens)) * 4).status());
  }
  return {};
}

Status CudaBackend::run(const hal::Graph& graph, const std::vector<Kernel>& plan, std::span<float> logits) {
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Status s = launch(graph, graph.ops[i], plan[i]);
    if (!s.ok()) return s.with_context(fmt::format("op {} ({})", i, hal::op_name(graph.ops[i].kind)));
    kernels_used_.insert(std::string(kernel_name(plan[i])));
  }
  BITNET_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(logits.data(), f32(graph.logits), logits.size_bytes(),
                                                     cudaMemcpyDeviceToHost, stream_), "copying the logits back"));
  return cuda_status(cudaStreamSynchronize(stream_), "running the step");
}

Status CudaBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, kv_));
  BITNET_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  BITNET_ASSIGN_OR_RETURN(const std::vector<Kernel> plan, plan_graph(graph, weight_info_, prop_.major));
  Status s = prepare(graph, tokens, plan);
  if (s.ok()) s = run(graph, plan, logits);
  if (!s.ok()) (void)cudaStreamSynchronize(stream_);  // nothing queued may still use the blocks
  release_acts();
  return s;
}

}  // namespace bitnet::cuda
