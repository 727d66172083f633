#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace bitnet {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  return "unknown file type";
}

// Only a non-empty regular file can be mapped: a FIFO or a device has no size to map
// (/dev/zero would "map" as empty), a directory has no bytes.
Status check_mappable(const std::string& path, const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return io_error(path + ": is a directory");
  if (!S_ISREG(st.st_mode)) return io_error(path + ": is not a regular file (" + file_kind(st.st_mode) + ")");
  if (st.st_size == 0) return io_error(path + ": is empty");
  return {};
}

Status errno_error(const std::string& path, const char* what, int err) {
  return io_error(path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  // stat() first so that a FIFO or a device is never opened (opening a FIFO blocks until a
  // writer appears); O_NONBLOCK and the fstat() below cover a file swapped in between.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_error(path, "cannot open", errno);
  BITNET_RETURN_IF_ERROR(check_mappable(path, st));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno_error(path, "cannot open", errno);
  Status s = ::fstat(fd, &st) != 0 ? errno_error(path, "cannot stat", errno) : check_mappable(path, st);
  void* p = MAP_FAILED;
  if (s.ok()) {
    p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) s = errno_error(path, "cannot mmap", errno);
  }
  ::close(fd);
  if (!s.ok()) return s;
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  file.data_ = static_cast<const uint8_t*>(p);
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace bitnet

namespace bitnet {

size_t release_mapped_pages(std::span<const uint8_t> bytes) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(bytes.data());
  const uintptr_t first = (begin + page - 1) / page * page;
  const uintptr_t last = (begin + bytes.size()) / page * page;
  if (bytes.empty() || last <= first) return 0;
  // Advice only: a failure leaves the pages resident, which costs memory, not correctness.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace bitnet
