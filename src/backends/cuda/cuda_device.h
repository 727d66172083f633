// Device memory owned by move-only RAII buffers, and CUDA runtime errors as Status codes.
// Host code of the CUDA backend (CUDA runtime API, never the driver API).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <utility>

#include "bitnet/status.h"

namespace bitnet::cuda {

// kOutOfMemory for allocation failures, kDeviceLost for the sticky errors after which the
// context is unusable (faults, illegal addresses), kInternal for the rest.
Status cuda_status(cudaError_t err, std::string_view what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // cudaMalloc of `bytes` (at least 1); kOutOfMemory with `what` when the device is full.
  static Result<DeviceBuffer> create(uint64_t bytes, std::string_view what);
  // create() + a synchronous copy of `bytes` host bytes.
  static Result<DeviceBuffer> upload(const void* host, uint64_t bytes, std::string_view what);

  void reset();
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  uint64_t bytes() const { return bytes_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace bitnet::cuda
