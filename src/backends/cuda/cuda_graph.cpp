// Decode steps as CUDA graphs: the second of two consecutive steps of one signature
// (cuda_plan.h step_signature) is captured from the backend's stream into a graph, with
// activation and input blocks of its own that stay with it; the following steps of that
// signature upload their inputs into those blocks and replay the graph, one launch instead of
// one per op. Steps of other signatures run with plain launches beside it (a prompt chunk
// between decode steps leaves it in place); two consecutive steps of another signature replace
// it. One-off shapes are never captured. When capture fails (an API the capture does not take, a driver that refuses),
// the step runs with plain launches and capture is not tried again.
#include <fmt/format.h>

#include "backends/cuda/cuda_backend_impl.h"

namespace bitnet::cuda {

void CudaBackend::drop_captured() {
  if (!captured_) return;
  (void)cudaStreamSynchronize(stream_);
  if (captured_->exec != nullptr) (void)cudaGraphExecDestroy(captured_->exec);
  release_buffers(captured_->buffers, true);
  captured_.reset();
}

Status CudaBackend::run_graph(const hal::Graph& graph, std::span<const int32_t> tokens, const StepInputs& in,
                              const std::vector<Kernel>& plan, std::span<float> logits, bool& handled) {
  handled = false;
  if (!graphs_ || graph.n_tokens > kGemvMaxTokens) return {};
  std::string signature = step_signature(graph, in.addressing, in.kv_words.size());
  if (captured_ && captured_->signature == signature) {
    // Replay: the same blocks, this step's inputs.
    handled = true;
    last_signature_ = std::move(signature);
    cur_ = &captured_->buffers;
    Status s = upload_inputs(graph, tokens, in, captured_->buffers);
    if (s.ok()) s = cuda_status(cudaGraphLaunch(captured_->exec, stream_), "cudaGraphLaunch");
    if (s.ok()) s = read_logits(graph, logits);
    if (!s.ok()) drop_captured();
    if (s.ok()) replayed_ = true;
    return s;
  }
  if (signature != last_signature_) {
    last_signature_ = std::move(signature);  // seen once: plain launches
    return {};
  }
  drop_captured();
  auto step = std::make_unique<CapturedStep>();
  step->signature = std::move(signature);
  cur_ = &step->buffers;
  Status s = acquire_acts(graph, step->buffers);
  if (s.ok()) s = upload_inputs(graph, tokens, in, step->buffers);
  if (!s.ok()) {
    (void)cudaStreamSynchronize(stream_);
    release_buffers(step->buffers, true);
    handled = true;  // out of memory or the like: the plain path would fail the same way
    return s;
  }
  cudaGraph_t g = nullptr;
  Status launched;
  cudaError_t err = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal);
  if (err == cudaSuccess) {
    launched = launch_all(graph, plan);
    err = cudaStreamEndCapture(stream_, &g);  // ends the capture even after a failed launch
  }
  if (err == cudaSuccess && launched.ok()) err = cudaGraphInstantiate(&step->exec, g, 0);
  if (g != nullptr) (void)cudaGraphDestroy(g);
  if (err != cudaSuccess || !launched.ok() || step->exec == nullptr) {
    // Plain launches from now on; the uploads already made are redone by the plain path.
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(stream_);
    if (step->exec != nullptr) (void)cudaGraphExecDestroy(step->exec);
    release_buffers(step->buffers, true);
    graphs_ = false;
    return {};
  }
  handled = true;
  captured_ = std::move(step);
  s = cuda_status(cudaGraphLaunch(captured_->exec, stream_), "cudaGraphLaunch");
  if (s.ok()) s = read_logits(graph, logits);
  if (!s.ok()) drop_captured();
  return s;
}

}  // namespace bitnet::cuda
