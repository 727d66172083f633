// Decode steps as CUDA graphs: the second of two consecutive steps of one signature
// (cuda_plan.h step_signature) is captured from the backend's stream into a graph, with
// activation and input blocks of its own that stay with it; the following steps of that
// signature upload their inputs into those blocks and replay the graph, one launch instead of
// one per op. Steps of other signatures run with plain launches beside it (a prompt chunk
// between decode steps leaves it in place); two consecutive steps of another signature capture
// theirs too, kept in a cache of the kMaxGraphs most recently used (graph_cache.h), so a batch
// that grows and shrinks replays a graph per size. One-off shapes are never captured. When capture fails (an API the capture does not take, a driver that refuses),
// the step runs with plain launches and capture is not tried again.
#include <fmt/format.h>

#include "backends/cuda/cuda_backend_impl.h"

namespace bitnet::cuda {

void CudaBackend::drop_step(CapturedStep& step) {
  (void)cudaStreamSynchronize(stream_);
  if (step.exec != nullptr) (void)cudaGraphExecDestroy(step.exec);
  step.exec = nullptr;
  release_buffers(step.buffers, true);
}

void CudaBackend::drop_captured() {
  for (const std::unique_ptr<CapturedStep>& step : graphs_cache_.take_all()) drop_step(*step);
}

Status CudaBackend::run_graph(const hal::Graph& graph, std::span<const int32_t> tokens, const StepInputs& in,
                              const std::vector<Kernel>& plan, const LogitsOut& out, bool& handled) {
  handled = false;
  if (!graphs_ || graph.n_tokens > kGemvMaxTokens) return {};
  std::string signature = step_signature(graph, in.addressing, in.kv_words.size());
  if (CapturedStep* hit = graphs_cache_.find(signature)) {
    // Replay: the same blocks, this step's inputs.
    handled = true;
    cur_ = &hit->buffers;
    Status s = upload_inputs(graph, tokens, in, hit->buffers);
    if (s.ok()) s = cuda_status(cudaGraphLaunch(hit->exec, stream_), "cudaGraphLaunch");
    if (s.ok()) s = read_logits(graph, out);
    if (!s.ok()) {
      if (std::unique_ptr<CapturedStep> failed = graphs_cache_.remove(signature)) drop_step(*failed);
    }
    if (s.ok()) replayed_ = true;
    last_signature_ = std::move(signature);
    return s;
  }
  if (signature != last_signature_) {
    last_signature_ = std::move(signature);  // seen once: plain launches
    return {};
  }
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
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(stream_);
    if (step->exec != nullptr) (void)cudaGraphExecDestroy(step->exec);
    release_buffers(step->buffers, true);
    if (err == cudaSuccess && !launched.ok()) {
      // A launcher refused the step (a shape it does not take), not the capture: the plain path
      // would refuse it the same way, and the steps after it still replay graphs.
      handled = true;
      return launched;
    }
    // The capture failed: plain launches from now on; the uploads already made are redone by
    // the plain path.
    graphs_ = false;
    return {};
  }
  handled = true;
  CapturedStep* captured = step.get();
  if (std::unique_ptr<CapturedStep> evicted = graphs_cache_.insert(std::move(step))) drop_step(*evicted);
  s = cuda_status(cudaGraphLaunch(captured->exec, stream_), "cudaGraphLaunch");
  if (s.ok()) s = read_logits(graph, out);
  if (!s.ok()) {
    if (std::unique_ptr<CapturedStep> failed = graphs_cache_.remove(captured->signature)) drop_step(*failed);
  }
  return s;
}

}  // namespace bitnet::cuda
