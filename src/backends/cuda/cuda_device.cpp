#include "backends/cuda/cuda_device.h"

#include <fmt/format.h>

namespace bitnet::cuda {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return {};
  const std::string msg = fmt::format("{}: {} ({})", what, cudaGetErrorName(err), cudaGetErrorString(err));
  switch (err) {
    case cudaErrorMemoryAllocation:
      (void)cudaGetLastError();  // not sticky: clear it
      return out_of_memory(msg);
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorDevicesUnavailable:
      return device_lost(msg);
    default:
      return internal_error(msg);
  }
}

Result<DeviceBuffer> DeviceBuffer::create(uint64_t bytes, std::string_view what) {
  DeviceBuffer b;
  const uint64_t n = bytes > 0 ? bytes : 1;
  const cudaError_t err = cudaMalloc(&b.ptr_, n);
  if (err != cudaSuccess) {
    b.ptr_ = nullptr;
    return cuda_status(err, fmt::format("cudaMalloc of {} bytes for {}", n, what));
  }
  b.bytes_ = n;
  return b;
}

Result<DeviceBuffer> DeviceBuffer::upload(const void* host, uint64_t bytes, std::string_view what) {
  BITNET_ASSIGN_OR_RETURN(DeviceBuffer b, create(bytes, what));
  if (bytes > 0) {
    BITNET_RETURN_IF_ERROR(cuda_status(cudaMemcpy(b.ptr_, host, bytes, cudaMemcpyHostToDevice),
                                       fmt::format("upload of {}", what)));
  }
  return b;
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace bitnet::cuda
