// Device memory of the OpenCL backend: an allocator that knows the device's limits (largest
// single buffer, an optional byte budget used by tests to inject out-of-memory) and a pool of
// scratch buffers reused by size across compute() calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "backends/opencl/cl_common.h"

namespace bitnet::opencl {

class ClAllocator;

// One device buffer (move-only); gives its bytes back to the allocator's count when freed.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  cl_mem get() const { return mem_.get(); }
  size_t n_bytes() const { return n_bytes_; }
  explicit operator bool() const { return static_cast<bool>(mem_); }
  void reset();

 private:
  friend class ClAllocator;
  DeviceBuffer(ClAllocator* owner, cl_mem mem, size_t n_bytes) : owner_(owner), mem_(mem), n_bytes_(n_bytes) {}

  ClAllocator* owner_ = nullptr;
  ClMem mem_;
  size_t n_bytes_ = 0;
};

class ClAllocator {
 public:
  // max_alloc_bytes: the largest single buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE or a lower test
  // limit); budget_bytes: 0 for none, else creating more than this in all is kOutOfMemory.
  ClAllocator(cl_context context, uint64_t max_alloc_bytes, uint64_t budget_bytes)
      : context_(context), max_alloc_bytes_(max_alloc_bytes), budget_bytes_(budget_bytes) {}

  // A read-write buffer of n_bytes (> 0). `what` names it in errors.
  Result<DeviceBuffer> create(size_t n_bytes, std::string_view what);

  uint64_t max_alloc_bytes() const { return max_alloc_bytes_; }
  uint64_t used_bytes() const { return used_bytes_; }

 private:
  friend class DeviceBuffer;
  cl_context context_;
  uint64_t max_alloc_bytes_;
  uint64_t budget_bytes_;
  uint64_t used_bytes_ = 0;
};

struct PoolStats {
  uint64_t allocations = 0;  // buffers created
  uint64_t reuses = 0;       // requests served from the free list
  uint64_t bytes = 0;        // held now (in use + free)
  uint64_t peak_bytes = 0;
};

// Scratch buffers keyed by (rounded) size: release() returns a buffer to the free list of its
// size and the next acquire() of that size takes it back. A decode step asks for the same
// sizes every time, so after the first step it allocates nothing.
class BufferPool {
 public:
  explicit BufferPool(ClAllocator& allocator) : allocator_(allocator) {}

  // A buffer of at least n_bytes. On out-of-memory the free lists are dropped and the
  // allocation retried once before the error is returned.
  Result<DeviceBuffer> acquire(size_t n_bytes, std::string_view what);
  void release(DeviceBuffer buffer);
  // Frees every buffer on the free lists (buffers handed out stay valid).
  void clear();

  const PoolStats& stats() const { return stats_; }

 private:
  static size_t size_class(size_t n_bytes);

  ClAllocator& allocator_;
  std::map<size_t, std::vector<DeviceBuffer>> free_;
  PoolStats stats_;
};

}  // namespace bitnet::opencl
