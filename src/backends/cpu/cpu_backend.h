// Level 2, CPU: owns the prepared weights, activation buffers and the KV cache, and runs op
// lists with the scalar kernels on a thread pool.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "hal/backend.h"

namespace bitnet::cpu {

struct CpuOptions {
  int n_threads = 0;  // 0: every hardware thread
  std::string isa;    // kernel set from resolve_cpu_isa ("" = the best this CPU runs)
};

// The kernel set a CPU backend runs for `requested` ("" = the best this CPU can execute,
// else a name such as "scalar" or "avx2"): its name, or an error that says what the CPU lacks
// or which names exist. The device id is "cpu-" + this name.
Result<std::string> resolve_cpu_isa(std::string_view requested);

std::unique_ptr<hal::Backend> make_cpu_backend(const CpuOptions& options);

}  // namespace bitnet::cpu
