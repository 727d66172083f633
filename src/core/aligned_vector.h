// std::vector storage aligned to a cache line: SIMD kernels load 64-byte vectors from it, and a
// load that straddles two lines costs two (glibc hands large blocks out at 16 bytes past a page).
// Blocks of kHugeBlockBytes or more (repacked weights, the bandwidth probe's buffer) are aligned to
// 2 MB and asked for transparent huge pages (core/huge_pages.h).
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

#include "core/huge_pages.h"

namespace bitnet {

// kDefaultInit: resize(n) and vector(n) leave new elements default-initialized (for bytes,
// unset) instead of value-initialized (zeroed), for buffers that are filled right after.
template <class T, std::size_t kAlign = 64, bool kDefaultInit = false>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, kAlign, kDefaultInit>&) noexcept {}  // NOLINT: rebinding
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign, kDefaultInit>;
  };
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t n) noexcept { free_aligned(p, n * sizeof(T), kAlign); }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (kDefaultInit && sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
  friend bool operator==(const AlignedAllocator&, const AlignedAllocator&) { return true; }
};

template <class T>
using AlignedVector = std::vector<T, AlignedAllocator<T>>;

// An AlignedVector whose resize(n) does not write the new elements: a large block's pages are
// then first touched (and zeroed by the kernel) by whoever fills them, in parallel where the
// filling is, instead of by one thread writing zeros or a fill value first.
template <class T>
using UninitAlignedVector = std::vector<T, AlignedAllocator<T, 64, true>>;

}  // namespace bitnet
