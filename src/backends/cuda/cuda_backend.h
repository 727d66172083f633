// CUDA backend (level 2): weights resident on the device (ternary ones in the W2C layout), an
// F16 KV cache on the device, the op list launched on one stream with the kernels of
// kernels.h; only the logits are copied back. Written without a GPU at hand: it compiles and
// its host logic is tested, but it has not yet run on a device (see README.md).
#pragma once

#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"

namespace bitnet::cuda {

struct CudaOptions {
  int device_index = 0;  // the runtime's numbering: after CUDA_VISIBLE_DEVICES
  // Capture each decode step (up to 8 tokens) into a CUDA graph, once per step signature
  // (cuda_plan.h step_signature), and replay it; plain launches where capture fails.
  bool graphs = true;
  // Run the fusions of cuda_plan.h plan_graph (norm + quantize with the gate or residual add
  // before them, the GEMVs of one input, the ropes with the KV store) where the op list allows.
  bool fuse = true;
  // Time each launch with events (no graphs then) and write a table of where the steps' time
  // went to stderr when the backend is destroyed (kernel_profile.h). make_backend(int) sets it
  // from BITNET_CUDA_PROFILE=1.
  bool profile = false;
};

Result<std::unique_ptr<hal::Backend>> make_backend(const CudaOptions& options);
// A backend on CUDA device `device_index`, with the default options.
Result<std::unique_ptr<hal::Backend>> make_backend(int device_index);

}  // namespace bitnet::cuda
