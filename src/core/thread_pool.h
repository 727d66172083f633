// A fixed pool of worker threads for data-parallel loops. The calling thread takes part,
// so a pool of n threads starts n-1 workers. Workers (and the caller, waiting for the
// last chunk) spin with a CPU pause for up to 2 ms (a decode step dispatches hundreds of loops
// microseconds apart), then sleep on a condition variable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace bitnet {

// A non-owning reference to a callable, cheap to make from a lambda: a std::function would
// heap-allocate for a lambda that captures more than two pointers, once per parallel loop.
// The callable must outlive the reference (parallel_for returns before its argument dies).
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
             std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): made from lambdas at call sites
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  // Body of a parallel loop: handles items [begin, end).
  using RangeFn = FunctionRef<void(int64_t begin, int64_t end)>;
  // The same with the slot of the thread that runs the chunk, in [0, n_threads()): a thread
  // keeps its slot for the whole loop, so per-slot scratch buffers need no locking.
  using SlotRangeFn = FunctionRef<void(int slot, int64_t begin, int64_t end)>;

  explicit ThreadPool(int n_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int n_threads() const { return n_threads_; }

  // Runs fn over [0, n) in chunks of at least `min_chunk` items (but the last) and returns when
  // all are done. Chunks are guided: 1 / (2 n_threads) of the items left each, so they shrink
  // toward the end and the threads finish close together.
  void parallel_for(int64_t n, int64_t min_chunk, RangeFn fn);
  void parallel_for(int64_t n, int64_t min_chunk, SlotRangeFn fn);

  // Bytes a thread prefetches while it waits: the start of its share of the next loop.
  struct Prefetch {
    const void* p = nullptr;
    int64_t bytes = 0;
  };
  // Runs fn over every slot's share [cuts[s], cuts[s + 1]) (cuts: n_threads() + 1 ascending
  // bounds; an empty share is skipped), for loops that stream memory once: one contiguous share
  // per thread is one stream for the prefetchers. With grain = 0 a share is one call, on its
  // own slot. With grain > 0 a slot runs its share grain items at a time from the front, then
  // takes grain items at a time from the back of another slot's share while two grains or more
  // are left there: shares sized by the threads' past rates still end apart when a shared
  // host's bandwidth moves under them. A thread done with its part prefetches prefetch[s] (if
  // given; else nothing) while it waits for the others, through the parallel_for loops that
  // follow and for the next split loop; busy_ns[s] (if given) gets the nanoseconds from the
  // loop's start to the end of slot s's part, done_items[s] (if given) the items it ran.
  void parallel_split(std::span<const int64_t> cuts, SlotRangeFn fn, std::span<const Prefetch> prefetch = {},
                      std::span<int64_t> busy_ns = {}, int64_t grain = 0, std::span<int64_t> done_items = {});

  // The number of hardware threads (at least 1).
  static int hardware_threads();

 private:
  void worker_loop(int slot);
  void run_chunks(int slot);
  // The job's part for this slot: its share (parallel_split: then what it prefetches while it
  // waits is set) or guided chunks.
  void run_job(int slot);
  void finish();

  int n_threads_;
  // What each slot prefetches while it waits; touched by that slot's thread only (a line each).
  struct alignas(64) Waiting {
    Prefetch pf;
  };
  std::vector<Waiting> waiting_;
  // What is left of each slot's share in a split loop with a grain: front << 32 | end.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  std::vector<Share> shares_;
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_ = false;

  // The current job.
  const SlotRangeFn* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  const int64_t* cuts_ = nullptr;    // parallel_split's shares, else null
  const Prefetch* prefetch_ = nullptr;
  int64_t* busy_ns_ = nullptr;
  int64_t grain_ = 0;
  int64_t* done_items_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> next_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
};

}  // namespace bitnet
