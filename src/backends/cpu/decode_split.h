// How a decode step's matmul loops are split between the threads: one contiguous share of the
// rows per thread (one memory stream each; ThreadPool::parallel_split lets a thread take over
// the end of another's), sized by the rate each thread reached on the same loop in earlier
// steps. Threads that stream the same bytes do not finish together: the one
// that started later (a worker woken by the caller), or that found less of its share already
// prefetched, is slower; an even split makes the others wait for it at every loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bitnet::cpu {

class DecodeSplit {
 public:
  explicit DecodeSplit(int n_threads) : n_threads_(n_threads), share_(static_cast<size_t>(n_threads)) {}

  int n_threads() const { return n_threads_; }

  // The shares of loop `key` over n_items items: cuts[0] = 0 <= cuts[1] <= ... <= cuts[n_threads]
  // = n_items. Even until the loop has been measured; no share below half or above 1.5 times
  // an even one.
  void cuts(size_t key, int64_t n_items, std::span<int64_t> cuts) const;

  // Records a run of loop `key`: thread s ran items[s] items (its share, less what others took
  // of it, plus what it took of theirs: ThreadPool::parallel_split's done_items) and was busy
  // for busy_ns[s] (from the loop's start to the end of its part).
  void record(size_t key, std::span<const int64_t> items, std::span<const int64_t> busy_ns);

 private:
  int n_threads_;
  std::vector<double> rates_;  // [key][thread]: items per ns, smoothed over steps; 0 until measured
  mutable std::vector<double> share_;  // cuts()'s scratch
};

}  // namespace bitnet::cpu
