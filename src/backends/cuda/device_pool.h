// A size-keyed pool of device memory blocks for activations and per-step scratch. The
// bookkeeping is plain C++: the device allocator is injected (cudaMalloc/cudaFree in the
// backend, a fake in the host tests), so reuse, peak bytes and out-of-memory are tested
// without a GPU. Requests are rounded up to a size class (256 bytes minimum, then the classes
// 2^k and 1.5 * 2^k); a released block goes to its class's free list and serves the next
// request of that class, so that steady decoding allocates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "bitnet/status.h"

namespace bitnet::cuda {

struct DeviceAllocator {
  std::function<void*(uint64_t bytes)> alloc;  // nullptr when the device is out of memory
  std::function<void(void* ptr)> free;
};

struct PoolBlock {
  void* ptr = nullptr;
  uint64_t bytes = 0;  // the size class (>= the request)
  explicit operator bool() const { return ptr != nullptr; }
};

struct DevicePoolStats {
  uint64_t allocations = 0;  // blocks created
  uint64_t reuses = 0;       // requests served from a free list
  uint64_t bytes = 0;        // bytes held (in use + free)
  uint64_t peak_bytes = 0;
  uint64_t in_use = 0;       // blocks handed out and not yet released
};

// The size class of a request of `bytes` (0 counts as 1).
uint64_t pool_size_class(uint64_t bytes);

class DevicePool {
 public:
  explicit DevicePool(DeviceAllocator allocator) : allocator_(std::move(allocator)) {}
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // A block of at least `bytes`: a free one of the request's class, else a new one; when the
  // allocator fails, the free lists are emptied and it is tried once more, then kOutOfMemory.
  Result<PoolBlock> acquire(uint64_t bytes);
  // Back to its class's free list (a null block is ignored).
  void release(PoolBlock block);
  // Frees every block on the free lists; blocks in use stay with their holders.
  void clear();

  const DevicePoolStats& stats() const { return stats_; }

 private:
  DeviceAllocator allocator_;
  std::map<uint64_t, std::vector<void*>> free_;  // size class -> free blocks
  DevicePoolStats stats_;
};

}  // namespace bitnet::cuda
