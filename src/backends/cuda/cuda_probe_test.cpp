// The probe on a machine without a usable CUDA driver (this project's build machines): the
// binary, linked with the static runtime, starts, and `bitnet devices` says why CUDA is not
// available. With a driver and a GPU, the devices are listed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_probe.h"

namespace bitnet::cuda {
namespace {

TEST(CudaProbe, SaysWhyCudaIsUnavailableOrListsTheDevices) {
  int count = -1;
  const cudaError_t err = cudaGetDeviceCount(&count);
  const hal::BackendProbe p = probe();
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_TRUE(p.compiled);
  if (err == cudaErrorInsufficientDriver) {
    // No libcuda.so.1: the runtime reports error 35 and leaves the count alone.
    EXPECT_EQ(count, -1);
    EXPECT_FALSE(p.available);
    EXPECT_TRUE(p.devices.empty());
    EXPECT_NE(p.reason.find("no CUDA driver"), std::string::npos) << p.reason;
    EXPECT_NE(p.reason.find("cudaErrorInsufficientDriver"), std::string::npos) << p.reason;
  } else if (err != cudaSuccess) {
    EXPECT_FALSE(p.available);
    EXPECT_NE(p.reason.find("no CUDA device"), std::string::npos) << p.reason;
    EXPECT_NE(p.reason.find(cudaGetErrorName(err)), std::string::npos) << p.reason;
  } else {
    EXPECT_EQ(static_cast<int>(p.devices.size()), count);
    for (const hal::DeviceInfo& d : p.devices) {
      EXPECT_EQ(d.backend, "cuda");
      EXPECT_TRUE(d.is_gpu);
      EXPECT_FALSE(d.compute_capability.empty());
    }
    // The backend is not wired into the HAL yet (issue 12): listed, not runnable.
    EXPECT_FALSE(p.available);
    EXPECT_FALSE(p.reason.empty());
  }
}

}  // namespace
}  // namespace bitnet::cuda
