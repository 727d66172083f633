// The probe on a machine without a usable CUDA driver (this project's build machines): the
// binary, linked with the static runtime, starts, and `bitnet devices` says why CUDA is not
// available. With a driver and a GPU, the devices are listed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>

#include "backends/cuda/cuda_probe.h"
#if BITNET_CUDA_BACKEND
#include "backends/cuda/cuda_backend.h"
#endif

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
#if BITNET_CUDA_BACKEND
    EXPECT_EQ(p.available, count > 0) << p.reason;  // the backend runs them
#else
    EXPECT_FALSE(p.available);  // no kernels in this build: listed, not runnable
    EXPECT_FALSE(p.reason.empty());
#endif
  }
}

#if BITNET_CUDA_BACKEND
// Without a driver or device (this project's build machines), creating the backend is
// kUnavailable with the runtime's reason, the error that makes the engine fall back to the
// next candidate; with a device, device 0 opens and a device past the last is kUnavailable.
TEST(CudaProbe, MakeBackendIsUnavailableWithoutADevice) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  auto b = make_backend(0);
  if (err != cudaSuccess || count == 0) {
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kUnavailable) << b.status().to_string();
    if (err != cudaSuccess) {
      EXPECT_NE(b.status().message().find(cudaGetErrorName(err)), std::string::npos) << b.status().message();
    }
  } else {
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ((*b)->info().name, "cuda");
  }
  auto past = make_backend(count + 1);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kUnavailable);
}
#endif

}  // namespace
}  // namespace bitnet::cuda
