// The probe on a machine without a usable CUDA driver (this project's build machines): the
// binary, linked with the static runtime, starts, and `bitnet devices` says why CUDA is not
// available. With a driver and a GPU, the devices are listed. Built a second time as
// hip_probe_test for the HIP backend (CMakeLists.txt), whose runtime here answers
// hipErrorNoDevice.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cuda/cuda_probe.h"
#include "backends/cuda/gpu_runtime.h"
#if BITNET_CUDA_BACKEND
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#endif

namespace bitnet::cuda {
namespace {

TEST(CudaProbe, SaysWhyCudaIsUnavailableOrListsTheDevices) {
  int count = -1;
  const cudaError_t err = cudaGetDeviceCount(&count);
  const hal::BackendProbe p = probe();
  EXPECT_EQ(p.backend, kGpuBackendId);
  EXPECT_TRUE(p.compiled);
  if (err == cudaErrorInsufficientDriver) {
    // No libcuda.so.1: the runtime reports error 35 and leaves the count alone.
    EXPECT_EQ(count, -1);
    EXPECT_FALSE(p.available);
    EXPECT_TRUE(p.devices.empty());
    EXPECT_NE(p.reason.find(fmt::format("no {} driver", kGpuApi)), std::string::npos) << p.reason;
    EXPECT_NE(p.reason.find(cudaGetErrorName(err)), std::string::npos) << p.reason;
  } else if (err != cudaSuccess) {
    EXPECT_FALSE(p.available);
    EXPECT_NE(p.reason.find(fmt::format("no {} device", kGpuApi)), std::string::npos) << p.reason;
    EXPECT_NE(p.reason.find(cudaGetErrorName(err)), std::string::npos) << p.reason;
  } else {
    EXPECT_EQ(static_cast<int>(p.devices.size()), count);
    for (const hal::DeviceInfo& d : p.devices) {
      EXPECT_EQ(d.backend, kGpuBackendId);
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
    EXPECT_EQ((*b)->info().name, kGpuBackendId);
  }
  auto past = make_backend(count + 1);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kUnavailable);
}

// The weight uploader cuts a tensor into chunk-sized pieces, the last one short.
TEST(CudaUpload, PiecesCoverTheBytesInChunks) {
  const auto p = upload_pieces(40, 16);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].offset, 0u);
  EXPECT_EQ(p[1].offset, 16u);
  EXPECT_EQ(p[2].offset, 32u);
  EXPECT_EQ(p[2].bytes, 8u);
  EXPECT_TRUE(upload_pieces(0, 16).empty());
  EXPECT_EQ(upload_pieces(Uploader::kChunkBytes, Uploader::kChunkBytes).size(), 1u);
}

// Three chunks and a tail through the two pinned chunks (every piece after the first two waits
// for its chunk's previous transfer), read back whole. Needs a device.
TEST(CudaUpload, UploaderLandsEveryPieceOfALargeTensor) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no " << kGpuApi << " device";
  std::vector<uint8_t> host(static_cast<size_t>(3 * Uploader::kChunkBytes + 12345));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  Uploader up;
  ASSERT_TRUE(up.init().ok());
  EXPECT_TRUE(up.pinned());
  auto b = up.upload(host.data(), host.size(), "test");
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  std::fill(host.begin(), host.begin() + 100, uint8_t{0});  // the host copy may go once upload returns
  for (size_t i = 0; i < 100; ++i) host[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  ASSERT_TRUE(up.finish().ok());
  std::vector<uint8_t> back(host.size());
  ASSERT_EQ(cudaMemcpy(back.data(), b->get(), back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(back == host);
}

// Pinned staging: without a driver cudaHostAlloc fails and the step copies from pageable memory
// (reserve false, no slices); with one, 256-byte-aligned slices up to what was reserved.
TEST(CudaUpload, PinnedStagingFallsBackWithoutADriver) {
  int count = 0;
  const bool device = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  PinnedStaging s;
  ASSERT_EQ(s.reserve(1000), device);
  void* a = s.take(10);
  void* b = s.take(300);
  if (!device) {
    EXPECT_EQ(a, nullptr);
    EXPECT_FALSE(s.reserve(10));  // refused once: pageable from then on
    return;
  }
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(static_cast<uint8_t*>(b) - static_cast<uint8_t*>(a), 256);
  EXPECT_EQ(s.take(100000), nullptr);  // past the reservation
  ASSERT_TRUE(s.reserve(10));
  EXPECT_EQ(s.take(10), a);  // a new step starts at the beginning
}
#endif

// The memory's peak from the runtime's attributes: an H100 SXM (HBM3, 2619 MHz x 5120 bits)
// and an A100 40 GB (1215 MHz x 5120 bits), as NVIDIA quotes them; unknown stays 0.
TEST(CudaProbe, PeakBandwidthFromClockAndBusWidth) {
  EXPECT_NEAR(peak_bandwidth_gbs(2619000, 5120), 3352.3, 0.1);
  EXPECT_NEAR(peak_bandwidth_gbs(1215000, 5120), 1555.2, 0.1);
  EXPECT_EQ(peak_bandwidth_gbs(0, 5120), 0.0);
  EXPECT_EQ(peak_bandwidth_gbs(1215000, 0), 0.0);
}

#if BITNET_HIP
// A device runs where the build holds its architecture's code objects (the gcnArchName's
// feature suffix does not matter); elsewhere the reason names the architecture and the fix.
TEST(HipProbe, RefusesAnArchitectureTheBuildHasNoCodeFor) {
  const std::string first(std::string_view(BITNET_HIP_ARCHS).substr(0, std::string_view(BITNET_HIP_ARCHS).find(',')));
  EXPECT_EQ(hip_arch_refusal(first.c_str()), "");
  EXPECT_EQ(hip_arch_refusal((first + ":sramecc+:xnack-").c_str()), "");
  const std::string why = hip_arch_refusal("gfx1100");
  EXPECT_NE(why.find("no code objects for gfx1100"), std::string::npos) << why;
  EXPECT_NE(why.find(BITNET_HIP_ARCHS), std::string::npos) << why;
  EXPECT_NE(why.find("-DBITNET_HIP_ARCHS=gfx1100"), std::string::npos) << why;
  EXPECT_NE(hip_arch_refusal("gfx90"), "");  // a prefix of gfx90a is not gfx90a
  EXPECT_NE(hip_arch_refusal(""), "");
}
#endif

}  // namespace
}  // namespace bitnet::cuda
