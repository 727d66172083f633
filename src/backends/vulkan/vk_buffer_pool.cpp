#include "backends/vulkan/vk_buffer_pool.h"

#include <algorithm>

namespace bitnet::vulkan {

Result<Buffer> BufferPool::acquire(uint64_t size) {
  size = std::max<uint64_t>(256, (size + 255) / 256 * 256);
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    Buffer b = std::move(it->second);
    free_.erase(it);
    ++stats_.reuses;
    return b;
  }
  auto created = ctx_.create_buffer(size, MemoryKind::kDevice);
  if (!created.ok() && created.status().code() == StatusCode::kOutOfMemory && !free_.empty()) {
    clear();  // free buffers of other sizes, then try once more
    created = ctx_.create_buffer(size, MemoryKind::kDevice);
  }
  if (!created.ok()) return created.status();
  ++stats_.allocations;
  stats_.bytes += created->size();
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
  return std::move(created).value();
}

void BufferPool::release(Buffer buffer) {
  if (!buffer) return;
  const uint64_t size = buffer.size();
  free_.emplace(size, std::move(buffer));
}

void BufferPool::clear() {
  for (const auto& [size, buffer] : free_) stats_.bytes -= buffer.size();
  free_.clear();
}

}  // namespace bitnet::vulkan
