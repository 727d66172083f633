// Weights resident on the device, converted once at load (cuda_plan.h weight_kind):
//   I2_S/TQ2_0/TQ1_0  the W2C layout of w2a8_math.h (w2c_weights.h repack) + float scales
//   F32, F16, BF16    the file's rows as they are
//   Q8_0              int8 rows + one float scale per 32 columns (split_q8_0)
//   Q4_0 ... Q6_K, IQ4_NL, IQ4_XS   the file's blocks as they are (block_math.h decodes them)
//   1-D tensors       (norm gains, biases, .scale) dequantized to F32, as the CPU backend does
// Anything else is kUnsupported: the backend never falls back to the CPU inside itself.
// Transfers go through the Uploader (cuda_device.h): the caller finishes it before a step runs;
// on an error upload_weight finishes it before the weight's buffers are freed.
#pragma once

#include <cstdint>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/kernels.h"
#include "hal/ops.h"

namespace bitnet::cuda {

struct DeviceWeight {
  WeightInfo info;
  DeviceBuffer data;    // words (ternary), elements, or int8 quants (Q8_0)
  DeviceBuffer scales;  // ternary scales or Q8_0 d; empty otherwise

  uint64_t device_bytes() const { return data.bytes() + scales.bytes(); }
  W2cView w2c() const {
    return {data.as<const uint32_t>(), scales.as<const float>(), info.n_rows, info.n_cols, info.scale_block};
  }
  FloatWeightView float_view() const;
  const float* f32() const { return data.as<const float>(); }
};

Result<DeviceWeight> upload_weight(const hal::WeightDesc& desc, Uploader& up);

}  // namespace bitnet::cuda
