// Device buffers for activations, reused by size: compute() takes what a graph needs and
// gives it back afterwards, so steady decoding allocates nothing.
#pragma once

#include <cstdint>
#include <map>

#include "backends/vulkan/vk_context.h"

namespace bitnet::vulkan {

struct PoolStats {
  uint64_t allocations = 0;  // buffers created
  uint64_t reuses = 0;       // requests served from the free list
  uint64_t bytes = 0;        // bytes held (in use + free)
  uint64_t peak_bytes = 0;
};

class BufferPool {
 public:
  explicit BufferPool(Context& ctx) : ctx_(ctx) {}

  // A buffer of at least `size` bytes: the smallest free one of size..2*size, else a new one.
  Result<Buffer> acquire(uint64_t size);
  // Back to the free list.
  void release(Buffer buffer);
  // Frees every buffer on the free list (buffers in use stay with their holders).
  void clear();

  const PoolStats& stats() const { return stats_; }

 private:
  Context& ctx_;
  std::multimap<uint64_t, Buffer> free_;
  PoolStats stats_;
};

}  // namespace bitnet::vulkan
