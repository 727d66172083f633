#include "core/mmap_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <vector>

#include "core/test_temp_dir.h"

namespace bitnet {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() { return test::process_temp_dir("bitnet_mmap_test_"); }

// The error for `path` names the file and contains `reason`.
void expect_refused(const fs::path& path, const std::string& reason) {
  const Result<MappedFile> f = MappedFile::open(path.string());
  ASSERT_FALSE(f.ok()) << path;
  EXPECT_NE(f.status().message().find(path.string()), std::string::npos) << f.status().to_string();
  EXPECT_NE(f.status().message().find(reason), std::string::npos)
      << "wanted '" << reason << "' in: " << f.status().to_string();
}

TEST(MappedFile, MapsARegularFile) {
  const fs::path p = temp_dir() / "data.bin";
  std::ofstream(p, std::ios::binary) << "hello";
  const Result<MappedFile> f = MappedFile::open(p.string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), "hello");
  EXPECT_EQ(f->path(), p.string());
}

TEST(MappedFile, RefusesWhatIsNotANonEmptyRegularFile) {
  const fs::path dir = temp_dir() / "dir";
  fs::create_directories(dir);
  expect_refused(dir, "is a directory");
  expect_refused("/dev/zero", "is not a regular file (character device)");
  const fs::path empty = temp_dir() / "empty.gguf";
  std::ofstream(empty).close();
  expect_refused(empty, "is empty");
  const fs::path a = temp_dir() / "loop_a", b = temp_dir() / "loop_b";
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  expect_refused(a, "Too many levels of symbolic links");
  expect_refused(temp_dir() / "missing.gguf", "No such file or directory");
}

// open() of a FIFO blocks until a writer appears; the check must come first.
TEST(MappedFile, RefusesAFifoWithoutBlocking) {
  const fs::path fifo = temp_dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto refused = std::async(std::launch::async, [&] { expect_refused(fifo, "is not a regular file (FIFO)"); });
  if (refused.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "MappedFile::open blocked on a FIFO";
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // unblocks the reader
    refused.wait();
    if (fd >= 0) ::close(fd);
  }
}

// Released pages are whole pages inside the span only, and reading them again gives the file's
// bytes back (they fault in from the file).
TEST(MappedFile, ReleasedPagesReadBackFromTheFile) {
  const fs::path path = temp_dir() / "pages.bin";
  std::vector<uint8_t> want(1 << 20);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(want.data()), static_cast<std::streamsize>(want.size()));
  auto f = MappedFile::open(path.string());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(release_mapped_pages(f->bytes().subspan(100, page)), 0u) << "no whole page inside";
  EXPECT_EQ(release_mapped_pages(f->bytes().subspan(100, 10 * page)), 9 * page);
  EXPECT_EQ(release_mapped_pages(f->bytes()), want.size());
  EXPECT_EQ(release_mapped_pages({}), 0u);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), f->data()));
}

}  // namespace
}  // namespace bitnet
