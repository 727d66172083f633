// The CUDA backend's class, shared by cuda_backend.cpp (setup, weights, KV cache),
// cuda_compute.cpp (a step: buffers, uploads, launches, the logits) and cuda_ops.cpp (one op's
// launch).
#pragma once

#include "backends/cuda/gpu_runtime.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/attention_shape.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/cuda_weights.h"
#include "backends/cuda/device_pool.h"
#include "backends/cuda/graph_cache.h"
#include "backends/cuda/kernel_profile.h"
#include "backends/cuda/kernels.h"
#include "hal/backend.h"
#include "hal/validate.h"

namespace bitnet::cuda {

// An activation of the step being run: its pooled block and the views into it.
struct DeviceAct {
  PoolBlock block;
  ActLayout layout;
  float* f32() const { return static_cast<float*>(block.ptr); }
  Q8View q8() const {
    auto* base = static_cast<uint8_t*>(block.ptr);
    return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + layout.scale_offset),
            reinterpret_cast<int32_t*>(base + layout.sum_offset)};
  }
};

// The device blocks a step's launches point at: one per activation, and the inputs each step
// uploads (token ids, KV addressing words, rope table) with the attention's split-K partials.
struct StepBuffers {
  std::vector<DeviceAct> acts;
  PoolBlock tokens, kv_words, rope, attn_scratch;
  KvRows kv_rows;              // device pointers into kv_words
  AttentionShape attn_shape;
};

// The host side of a step's inputs, computed before anything is launched.
struct StepInputs {
  bool kv = false;             // the step stores or reads the KV cache
  KvAddressing addressing;
  std::vector<int32_t> kv_words;
  std::vector<float> rope;     // empty without rope ops
};

// A decode step captured into a CUDA graph, with the blocks its launches point at (held while
// it is in the graph cache: until kMaxGraphs more recently used signatures push it out, or
// release_scratch).
// Step signatures whose graphs are kept (a server's batch sizes come and go).
inline constexpr size_t kMaxGraphs = 4;

struct CapturedStep {
  std::string signature;
  StepBuffers buffers;
  cudaGraphExec_t exec = nullptr;
};

// Where a step's logits go: the whole rows into `full`, or part of each row (compute_top).
struct LogitsOut {
  std::span<float> full;
  std::span<const hal::TopRequest> top;
  std::vector<std::vector<hal::TokenLogit>>* top_out = nullptr;
};

class CudaBackend final : public hal::Backend {
 public:
  static Result<std::unique_ptr<hal::Backend>> create(const CudaOptions& options);
  ~CudaBackend() override;

  hal::BackendInfo info() const override;
  Status load_weights(std::span<const hal::WeightDesc> weights) override;
  Status init_kv(const hal::KvShape& shape) override;
  Status compute(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<float> logits) override;
  // The part of each row selected on the device (top_k.cu); only it is copied back.
  Status compute_top(const hal::Graph& graph, std::span<const int32_t> tokens, std::span<const hal::TopRequest> req,
                     std::vector<std::vector<hal::TokenLogit>>& out) override;
  std::vector<std::string> kernels_used() const override;
  hal::BackendStats stats() const override;
  uint64_t weight_bytes(hal::WeightId id) const override {
    return id >= 0 && static_cast<size_t>(id) < weights_.size() ? weights_[static_cast<size_t>(id)].device_bytes() : 0;
  }
  void release_scratch() override;

 private:
  CudaBackend() = default;

  // cuda_compute.cpp
  StepInputs step_inputs(const hal::Graph& graph, const std::vector<Kernel>& plan, Status& status) const;
  Status acquire_acts(const hal::Graph& graph, StepBuffers& b);
  Status upload_inputs(const hal::Graph& graph, std::span<const int32_t> tokens, const StepInputs& in, StepBuffers& b);
  Status launch_all(const hal::Graph& graph, const std::vector<Kernel>& plan);
  // BITNET_CUDA_PROFILE: an event on the stream before launch j (and after the last, marked
  // kFused); after the step's sync, the times between them added to profile_.
  Status mark_launch(size_t j, Kernel k);
  Status collect_profile();
  Status run_step(const hal::Graph& graph, std::span<const int32_t> tokens, const LogitsOut& out);
  Status read_logits(const hal::Graph& graph, const LogitsOut& out);
  // Copies `bytes` at device address src to the host through the pinned staging (else into
  // `pageable`, which holds them) and syncs the stream: where the bytes are now.
  Result<const void*> copy_back(const void* src, size_t bytes, void* pageable, const char* what);
  Status read_top(const hal::Graph& graph, std::span<const hal::TopRequest> req, std::vector<std::vector<hal::TokenLogit>>& out);
  Result<PoolBlock> scratch(PoolBlock& slot, uint64_t bytes);
  Status upload(PoolBlock& slot, const void* host, uint64_t bytes);
  void release_buffers(StepBuffers& b, bool inputs_too);
  // cuda_graph.cpp: a decode step replayed from, or captured into, a CUDA graph; false in
  // `handled` when the step is to run with plain launches.
  Status run_graph(const hal::Graph& graph, std::span<const int32_t> tokens, const StepInputs& in,
                   const std::vector<Kernel>& plan, const LogitsOut& out, bool& handled);
  void drop_captured();                 // every cached graph
  void drop_step(CapturedStep& step);   // one graph and its blocks
  // cuda_ops.cpp
  Status launch(const hal::Graph& graph, size_t index, Kernel kernel);
  Status launch_fused(const hal::Graph& graph, size_t index, Kernel kernel);
  Status launch_gemv_group(const hal::Graph& graph, size_t index, size_t n);
  Status launch_matmul(const hal::Graph& graph, const hal::Op& op, Kernel kernel);
  Status copy_rows(const hal::Graph& graph, const hal::Op& op);

  float* f32(hal::ActId id) const { return cur_->acts[static_cast<size_t>(id)].f32(); }
  Q8View q8(hal::ActId id) const { return cur_->acts[static_cast<size_t>(id)].q8(); }
  const hal::ActDesc& desc(const hal::Graph& g, hal::ActId id) const { return g.acts[static_cast<size_t>(id)]; }
  const DeviceWeight& weight(hal::WeightId id) const { return weights_[static_cast<size_t>(id)]; }
  // The compute capability major that picks the int8 mma GEMM (>= 8). HIP: 0, batches run the
  // GEMV's 8-token tiles; the GEMM's shuffle-and-dp4a stand-in for mma is a correctness path
  // (cuda_kernels_test), not what AMD's matrix cores want.
  int mma_cc_major() const {
#if BITNET_HIP
    return 0;
#else
    return prop_.major;
#endif
  }

  int device_ = 0;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<DevicePool> pool_;
  std::vector<DeviceWeight> weights_;
  std::vector<WeightInfo> weight_info_;   // for plan_graph
  std::vector<hal::WeightShape> shapes_;  // for hal::validate_graph
  uint64_t weight_bytes_ = 0;
  hal::KvShape kv_;
  PinnedStaging inputs_staging_;  // a step's uploads (upload_inputs)
  PinnedStaging logits_staging_;  // the logits on their way back (read_logits)
  PoolBlock top_args_, top_entries_;  // read_top's plan and selected entries on the device
  std::vector<DeviceBuffer> k_cache_;  // per layer: [n_ctx][n_embd_kv] fp16
  std::vector<DeviceBuffer> v_cache_;
  // Plain launches: activation blocks taken from the pool for each step and given back after it;
  // the input blocks kept between steps (freed by release_scratch).
  StepBuffers step_;
  StepBuffers* cur_ = &step_;  // the blocks of the step being launched
  bool graphs_ = true;         // CudaOptions::graphs, off after a capture failed
  bool fuse_ = true;           // CudaOptions::fuse
  GraphCache<CapturedStep> graphs_cache_{kMaxGraphs};
  std::string last_signature_;  // of the last step not replayed
  // What has run, for kernels_used(): flags set per launch, names built only when asked.
  std::array<bool, kKernelCount> launched_{};
  bool replayed_ = false;  // a captured step graph has been replayed
  // CudaOptions::profile: per-kernel times (kernel_profile.h), written to stderr at the end.
  bool profile_on_ = false;
  KernelProfile profile_;
  std::vector<cudaEvent_t> profile_events_;
  std::vector<Kernel> profile_kernels_;  // the kernel of each launch of the step, then the end mark
};

}  // namespace bitnet::cuda
