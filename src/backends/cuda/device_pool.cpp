#include "backends/cuda/device_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace bitnet::cuda {

uint64_t pool_size_class(uint64_t bytes) {
  constexpr uint64_t kMin = 256;
  if (bytes <= kMin) return kMin;
  const uint64_t pow2 = std::bit_ceil(bytes);  // bytes <= pow2 < 2 * bytes
  const uint64_t three_quarters = pow2 / 4 * 3;
  return bytes <= three_quarters ? three_quarters : pow2;
}

DevicePool::~DevicePool() { clear(); }

Result<PoolBlock> DevicePool::acquire(uint64_t bytes) {
  const uint64_t size = pool_size_class(bytes);
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    ++stats_.reuses;
    ++stats_.in_use;
    return PoolBlock{p, size};
  }
  void* p = allocator_.alloc(size);
  if (p == nullptr && !free_.empty()) {
    clear();  // free the blocks of other classes, then try once more
    p = allocator_.alloc(size);
  }
  if (p == nullptr) {
    return out_of_memory(fmt::format("device memory pool: {} bytes could not be allocated ({} bytes held in use)", size,
                                     stats_.bytes));
  }
  ++stats_.allocations;
  ++stats_.in_use;
  stats_.bytes += size;
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
  return PoolBlock{p, size};
}

void DevicePool::release(PoolBlock block) {
  if (!block) return;
  free_[block.bytes].push_back(block.ptr);
  if (stats_.in_use > 0) --stats_.in_use;
}

void DevicePool::clear() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) {
      allocator_.free(p);
      stats_.bytes -= size;
    }
  }
  free_.clear();
}

}  // namespace bitnet::cuda
