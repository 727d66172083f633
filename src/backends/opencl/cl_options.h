// Options of the OpenCL backend beyond make_backend(int): limits that tests lower to reach
// the weight-splitting and out-of-memory paths on a device that has plenty of memory.
#pragma once

#include <cstdint>
#include <memory>

#include "bitnet/status.h"
#include "hal/backend.h"

namespace bitnet::opencl {

struct ClOptions {
  int device_index = 0;          // index into probe().devices
  uint64_t max_alloc_bytes = 0;  // largest single buffer: 0 = the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE
                                 // (a lower value only lowers it; weights above it are split by rows)
  uint64_t memory_budget_bytes = 0;  // 0 = none; else device buffers beyond it in all fail with kOutOfMemory
  int work_group = 64;           // work-group size of the reducing kernels (capped by the device)
  // Block formats (Q4_0 .. Q6_K, Q8_0, IQ4_NL, IQ4_XS): true: activations quantized to 8 bits
  // (Q8_0 / Q8_1 / Q8_K blocks) and integer block dots, bit-identical to the CPU backend
  // (kernels/matmul_q8.cl); false: the float path, dequantized in the kernel against float
  // activations (kernels/matmul_quant.cl, matmul_float.cl).
  bool quant_dot = true;
};

Result<std::unique_ptr<hal::Backend>> make_backend(const ClOptions& options);

}  // namespace bitnet::opencl
