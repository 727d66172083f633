#include "membw.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/huge_pages.h"

namespace bitnet::bench {

namespace {

// Sums a slice with four independent accumulators so that loads, not the add chain, bound it.
uint64_t sum_slice(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

}  // namespace

double measure_read_bandwidth(int n_threads, size_t n_bytes, int reps) {
  const size_t n = n_bytes / sizeof(uint64_t);
  // On huge pages where the system gives them, as the repacked weights the kernels read; filled
  // by the loop below alone (a vector would zero the gigabyte first).
  const auto free_buffer = [n](uint64_t* p) { free_aligned(p, n * sizeof(uint64_t), 64); };
  const std::unique_ptr<uint64_t[], decltype(free_buffer)> buffer(
      static_cast<uint64_t*>(allocate_aligned(n * sizeof(uint64_t), 64)), free_buffer);
  for (size_t i = 0; i < n; ++i) buffer[i] = i;  // touch every page before timing
  const size_t slice = n / static_cast<size_t>(n_threads);
  std::vector<uint64_t> sums(static_cast<size_t>(n_threads));
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int t = 1; t < n_threads; ++t) {
      threads.emplace_back([&, t] { sums[static_cast<size_t>(t)] = sum_slice(buffer.get() + slice * t, slice); });
    }
    sums[0] = sum_slice(buffer.get(), slice);
    for (std::thread& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(slice * static_cast<size_t>(n_threads) * sizeof(uint64_t)) / seconds / 1e9);
  }
  // The sums feed a value the caller cannot see, so the reads cannot be optimised away.
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return best;
}

}  // namespace bitnet::bench
