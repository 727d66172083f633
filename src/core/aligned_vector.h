// std::vector storage aligned to a cache line: SIMD kernels load 64-byte vectors from it, and a
// load that straddles two lines costs two (glibc hands large blocks out at 16 bytes past a page).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

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
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlign})); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kAlign}); }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

}  // namespace bitnet
