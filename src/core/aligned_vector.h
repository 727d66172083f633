// std::vector storage aligned to a cache line: SIMD kernels load 64-byte vectors from it, and a
// load that straddles two lines costs two (glibc hands large blocks out at 16 bytes past a page).
// Blocks of kHugeBlockBytes or more (repacked weights, the bandwidth probe's buffer) are aligned to
// 2 MB and asked for transparent huge pages (core/huge_pages.h).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

#include "core/huge_pages.h"

namespace bitnet {

template <class T, std::size_t kAlign = 64>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) noexcept {}  // NOLINT: rebinding
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t n) noexcept { free_aligned(p, n * sizeof(T), kAlign); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace bitnet
