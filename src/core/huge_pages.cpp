#include "core/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace bitnet {
namespace {

std::size_t block_align(std::size_t bytes, std::size_t align) {
  return bytes >= kHugeBlockBytes && align < kHugePageBytes ? kHugePageBytes : align;
}

}  // namespace

void* allocate_aligned(std::size_t bytes, std::size_t align) {
  void* p = ::operator new(bytes, std::align_val_t{block_align(bytes, align)});
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only whole huge pages inside the block: the allocator may put other data after its end.
  // A kernel without transparent huge pages refuses the advice, and the block stays as it is.
  if (bytes >= kHugeBlockBytes) ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
#endif
  return p;
}

void free_aligned(void* p, std::size_t bytes, std::size_t align) noexcept {
  ::operator delete(p, std::align_val_t{block_align(bytes, align)});
}

void* allocate_zeroed(std::size_t bytes) noexcept {
  if (bytes == 0) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugeBlockBytes) {
    // Anonymous pages are zero. Mapped with a huge page to spare, then trimmed to a 2 MB
    // aligned start, so that every whole huge page of the block can be one.
    const std::size_t span = bytes + kHugePageBytes;
    void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const auto base = reinterpret_cast<std::uintptr_t>(m);
    const std::uintptr_t start = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    if (start > base) ::munmap(m, start - base);
    if (const std::uintptr_t end = start + bytes; end < base + span) ::munmap(reinterpret_cast<void*>(end), base + span - end);
    void* p = reinterpret_cast<void*>(start);
    ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);
    return p;
  }
#endif
  return std::calloc(bytes, 1);
}

void free_zeroed(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kHugeBlockBytes) {
    ::munmap(p, bytes);
    return;
  }
#endif
  std::free(p);
}

}  // namespace bitnet
