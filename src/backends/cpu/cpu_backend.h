// Level 2, CPU: owns the prepared weights, activation buffers and the KV cache, and runs op
// lists with the scalar kernels on a thread pool.
#pragma once

#include <memory>

#include "hal/backend.h"

namespace bitnet::cpu {

struct CpuOptions {
  int n_threads = 0;  // 0: every hardware thread
};

std::unique_ptr<hal::Backend> make_cpu_backend(const CpuOptions& options);

}  // namespace bitnet::cpu
