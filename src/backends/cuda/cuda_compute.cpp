// Running an op list: the plan (cuda_plan.h) checked before anything is launched, activation
// blocks from the pool, the step's token ids, KV addressing and rope table uploaded (through
// pinned staging), one launch per op on the backend's stream, then the logits copied back
// (into pinned staging) and the stream synced.
// Decode steps go through a captured CUDA graph where they can (cuda_graph.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <set>

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
  // Through the step's pinned staging (reserved by upload_inputs), else from pageable memory:
  // either way the call returns once the bytes are copied out of `host`, so `host` may go.
  if (void* staged = inputs_staging_.take(bytes)) {
    std::memcpy(staged, host, bytes);
    host = staged;
  }
  return cuda_status(cudaMemcpyAsync(slot.ptr, host, bytes, cudaMemcpyHostToDevice, stream_), "upload of step inputs");
}

void CudaBackend::release_buffers(StepBuffers& b, bool inputs_too) {
  for (DeviceAct& a : b.acts) pool_->release(std::exchange(a.block, {}));
  b.acts.clear();
  if (inputs_too) {
    for (PoolBlock* p : {&b.tokens, &b.kv_words, &b.rope, &b.attn_scratch}) pool_->release(std::exchange(*p, {}));
  }
}

StepInputs CudaBackend::step_inputs(const hal::Graph& graph, const std::vector<Kernel>& plan, Status& status) const {
  StepInputs in;
  in.kv = uses(plan, Kernel::kStoreKv) || uses(plan, Kernel::kRopeStoreKv) || uses(plan, Kernel::kAttention);
  if (in.kv) {
    const hal::KvRows rows = hal::resolve_kv(graph, kv_);
    auto a = kv_addressing(graph, rows);
    if (!a.ok()) {
      status = a.status();
      return in;
    }
    in.addressing = *a;
    in.kv_words = kv_words(rows, in.addressing);
  }
  if (uses(plan, Kernel::kRope) || uses(plan, Kernel::kRopeStoreKv)) in.rope = rope_table(graph);
  return in;
}

Status CudaBackend::acquire_acts(const hal::Graph& graph, StepBuffers& b) {
  release_buffers(b, false);
  BITNET_ASSIGN_OR_RETURN(const std::vector<ActLayout> layouts, act_layouts(graph));
  b.acts.resize(graph.acts.size());
  for (size_t i = 0; i < graph.acts.size(); ++i) {
    b.acts[i].layout = layouts[i];
    if (layouts[i].bytes == 0) continue;  // no op touches it
    BITNET_ASSIGN_OR_RETURN(b.acts[i].block, pool_->acquire(layouts[i].bytes));
  }
  return {};
}

Status CudaBackend::upload_inputs(const hal::Graph& graph, std::span<const int32_t> tokens, const StepInputs& in,
                                  StepBuffers& b) {
  (void)inputs_staging_.reserve(PinnedStaging::slice_bytes(tokens.size_bytes()) +
                                PinnedStaging::slice_bytes(in.kv_words.size() * 4) +
                                PinnedStaging::slice_bytes(in.rope.size() * 4));
  BITNET_RETURN_IF_ERROR(upload(b.tokens, tokens.data(), tokens.size_bytes()));
  if (in.kv) {
    BITNET_RETURN_IF_ERROR(upload(b.kv_words, in.kv_words.data(), in.kv_words.size() * 4));
    const auto* base = static_cast<const int32_t*>(b.kv_words.ptr);
    const auto n = static_cast<size_t>(graph.n_tokens);
    const bool id = in.addressing.identity;
    b.kv_rows = {base, id ? nullptr : base + n, id ? nullptr : base + 2 * n, in.addressing.block_shift};
  }
  if (!in.rope.empty()) BITNET_RETURN_IF_ERROR(upload(b.rope, in.rope.data(), in.rope.size() * 4));
  bool attention = false;
  for (const hal::Op& op : graph.ops) attention = attention || op.kind == hal::OpKind::kAttention;
  if (attention) {
    const hal::AttentionParams& p = graph.attn;
    b.attn_shape = {p.n_head, p.n_head_kv, p.head_dim, static_cast<int64_t>(p.n_head_kv) * p.head_dim, p.kq_scale, 1, 0};
    choose_attention_split(b.attn_shape, kv_.n_ctx, prop_.multiProcessorCount, graph.n_tokens);
    const auto floats = static_cast<uint64_t>(attention_scratch_floats(b.attn_shape, graph.n_tokens));
    BITNET_RETURN_IF_ERROR(scratch(b.attn_scratch, floats * 4).status());
  }
  return {};
}

Status CudaBackend::launch_all(const hal::Graph& graph, const std::vector<Kernel>& plan) {
  size_t n = 0;  // launches so far
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    if (plan[i] == Kernel::kFused) continue;  // run by the fused kernel before it
    if (profile_on_) BITNET_RETURN_IF_ERROR(mark_launch(n, plan[i]));
    const Status s = plan[i] == Kernel::kW2a8GemvGroup ? launch_gemv_group(graph, i, gemv_group_size(plan, i))
                                                       : launch(graph, i, plan[i]);
    if (!s.ok()) return s.with_context(fmt::format("op {} ({})", i, hal::op_name(graph.ops[i].kind)));
    launched_[static_cast<size_t>(plan[i])] = true;
    ++n;
  }
  if (profile_on_) BITNET_RETURN_IF_ERROR(mark_launch(n, Kernel::kFused));  // the end of the last
  return {};
}

Status CudaBackend::mark_launch(size_t j, Kernel k) {
  while (profile_events_.size() <= j) {
    cudaEvent_t e = nullptr;
    BITNET_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&e), "cudaEventCreate"));
    profile_events_.push_back(e);
  }
  profile_kernels_.resize(j + 1);  // launch 0 starts a step afresh
  profile_kernels_[j] = k;
  return cuda_status(cudaEventRecord(profile_events_[j], stream_), "cudaEventRecord");
}

Status CudaBackend::collect_profile() {
  for (size_t j = 0; j + 1 < profile_kernels_.size(); ++j) {
    float ms = 0.0f;
    BITNET_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&ms, profile_events_[j], profile_events_[j + 1]),
                                       "cudaEventElapsedTime"));
    profile_.add(profile_kernels_[j], 1000.0 * static_cast<double>(ms));
  }
  profile_.add_step();
  return {};
}

Status CudaBackend::read_logits(const hal::Graph& graph, const LogitsOut& out) {
  if (out.top_out != nullptr) return read_top(graph, out.top, *out.top_out);
  const std::span<float> logits = out.full;
  BITNET_ASSIGN_OR_RETURN(const void* host, copy_back(f32(graph.logits), logits.size_bytes(), logits.data(), "the logits"));
  if (host != logits.data()) std::memcpy(logits.data(), host, logits.size_bytes());
  return {};
}

Result<const void*> CudaBackend::copy_back(const void* src, size_t bytes, void* pageable, const char* what) {
  // Into pinned memory (a 128K-vocabulary row is 513 KB: at 1,000 tokens/s a pageable copy's
  // staging costs several percent of the step), else straight into `pageable`.
  void* staged = logits_staging_.reserve(bytes) ? logits_staging_.take(bytes) : nullptr;
  void* dst = staged != nullptr ? staged : pageable;
  BITNET_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
                                     fmt::format("copying {} back", what)));
  BITNET_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(stream_), "running the step"));
  return static_cast<const void*>(dst);
}

Status CudaBackend::read_top(const hal::Graph& graph, std::span<const hal::TopRequest> req,
                             std::vector<std::vector<hal::TokenLogit>>& out) {
  const hal::ActDesc& a = desc(graph, graph.logits);
  hal::TopPlan plan;
  if (!hal::plan_top(req, a.n_cols, plan)) return invalid_argument("too many logits asked for");
  BITNET_RETURN_IF_ERROR(upload(top_args_, plan.words.data(), plan.words.size() * sizeof(int32_t)));
  const auto bytes = static_cast<uint64_t>(std::max<int64_t>(plan.n_out, 1)) * sizeof(TopEntry);
  BITNET_RETURN_IF_ERROR(scratch(top_entries_, bytes).status());
  const auto* w = static_cast<const int32_t*>(top_args_.ptr);
  const TopArgs args{w, w + a.n_rows, w + 2 * a.n_rows + 1, w + hal::TopPlan::also_offset(a.n_rows)};
  auto* entries = static_cast<TopEntry*>(top_entries_.ptr);
  BITNET_RETURN_IF_ERROR(cuda_status(top_k_rows(f32(graph.logits), a.n_rows, a.n_cols, args, entries, stream_), "top_k_rows"));
  launched_[static_cast<size_t>(Kernel::kTopK)] = true;
  std::vector<TopEntry> pageable(static_cast<size_t>(std::max<int64_t>(plan.n_out, 1)));
  BITNET_ASSIGN_OR_RETURN(const void* host, copy_back(entries, static_cast<size_t>(plan.n_out) * sizeof(TopEntry),
                                                      pageable.data(), "the selected logits"));
  static_assert(sizeof(TopEntry) == sizeof(hal::TokenLogit));
  hal::unpack_top(plan, host, out);
  return {};
}

std::vector<std::string> CudaBackend::kernels_used() const {
  std::set<std::string> names;
  for (size_t k = 0; k < kKernelCount; ++k) {
    if (launched_[k]) names.emplace(kernel_name(static_cast<Kernel>(k)));
  }
  if (replayed_) names.emplace(BITNET_GPU_PREFIX "graph_replay");
  return {names.begin(), names.end()};
}

Status CudaBackend::compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) {
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, logits.size(), shapes_, kv_));
  return run_step(graph, tokens, LogitsOut{logits, {}, nullptr});
}

Status CudaBackend::compute_top(const hal::Graph& graph, std::span<const int32_t> tokens,
                                std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out) {
  BITNET_ASSIGN_OR_RETURN(const hal::ActDesc* a, hal::top_logits(graph, req.size()));
  BITNET_RETURN_IF_ERROR(hal::validate_graph(graph, tokens, static_cast<size_t>(a->n_rows * a->n_cols), shapes_, kv_));
  return run_step(graph, tokens, LogitsOut{{}, req, &out});
}

Status CudaBackend::run_step(const hal::Graph& graph, std::span<const int32_t> tokens, const LogitsOut& out) {
  BITNET_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice"));
  BITNET_ASSIGN_OR_RETURN(const std::vector<Kernel> plan, plan_graph(graph, weight_info_, mma_cc_major(), fuse_));
  Status s;
  const StepInputs in = step_inputs(graph, plan, s);
  BITNET_RETURN_IF_ERROR(s);
  bool handled = false;
  s = run_graph(graph, tokens, in, plan, out, handled);
  if (handled) return s;
  cur_ = &step_;
  s = acquire_acts(graph, step_);
  if (s.ok()) s = upload_inputs(graph, tokens, in, step_);
  if (s.ok()) s = launch_all(graph, plan);
  if (s.ok()) s = read_logits(graph, out);  // synchronizes the stream
  if (s.ok() && profile_on_) s = collect_profile();
  if (!s.ok()) (void)cudaStreamSynchronize(stream_);  // nothing queued may still use the blocks
  release_buffers(step_, false);
  return s;
}

}  // namespace bitnet::cuda
