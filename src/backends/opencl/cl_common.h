// Shared by the OpenCL backend's sources: the OpenCL headers, RAII handles and the mapping
// of OpenCL error codes onto Status codes.
#pragma once

#include <CL/cl.h>

#include <string>
#include <string_view>
#include <utility>

#include "bitnet/status.h"

namespace bitnet::opencl {

// "CL_OUT_OF_RESOURCES" for -5, "CL_UNKNOWN_ERROR" for codes it does not know.
std::string_view cl_error_name(cl_int err);

// The Status for a failed OpenCL call `what`: allocation failures (CL_MEM_OBJECT_ALLOCATION_FAILURE,
// CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY) are kOutOfMemory, a device that stopped
// answering (CL_DEVICE_NOT_AVAILABLE, an aborted command, vendor reset codes) is kDeviceLost,
// anything else is kInternal. ok when err == CL_SUCCESS.
Status cl_status(cl_int err, std::string_view what);

#define BITNET_CL_RETURN_IF_ERROR(call, what) \
  BITNET_RETURN_IF_ERROR(::bitnet::opencl::cl_status((call), (what)))

// Move-only owner of one OpenCL object (cl_mem, cl_kernel, ...), released with `Release`.
template <class T, cl_int (*Release)(T)>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T h) : h_(h) {}
  ClHandle(ClHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  ClHandle& operator=(ClHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  ~ClHandle() { reset(); }

  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void reset() {
    if (h_ != nullptr) Release(h_);
    h_ = nullptr;
  }

 private:
  T h_ = nullptr;
};

using ClMem = ClHandle<cl_mem, clReleaseMemObject>;
using ClKernel = ClHandle<cl_kernel, clReleaseKernel>;
using ClProgram = ClHandle<cl_program, clReleaseProgram>;
using ClQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using ClContext = ClHandle<cl_context, clReleaseContext>;

}  // namespace bitnet::opencl
