#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace bitnet {

namespace {

// How long a thread spins before it sleeps. The gaps between the ops of one forward pass, and
// the wait for the slowest thread at the end of an op, are microseconds to a millisecond: a
// thread that slept through them would pay a futex wake-up (5-20 us) on every op, hundreds of
// times per decoded token. Between tokens and between requests the threads do go to sleep.
constexpr auto kSpinTime = std::chrono::milliseconds(2);
// After this much of it, the spinning thread yields its core on every round instead of only
// pausing: on a machine with more runnable threads than cores (other processes, or more -t
// than cores) the thread being waited for may be the one that is not running, and a pure spin
// would burn its time slice.
constexpr auto kPauseTime = std::chrono::microseconds(50);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// One round of a waiting thread: the next 4 lines of what it prefetches (pf shrinks), else a
// pause. A prefetch that finds the miss queue full stalls the thread until memory catches up,
// which paces it at the bandwidth left over by the threads still working.
void wait_round(ThreadPool::Prefetch& pf) {
  if (pf.bytes <= 0) return cpu_relax();
  const char* p = static_cast<const char*>(pf.p);
  for (int i = 0; i < 4; ++i) __builtin_prefetch(p + 64 * i, 0, 3);
  pf.p = p + 256;
  pf.bytes -= 256;
}

// Spins until done() holds or kSpinTime has passed; returns done(). Prefetches pf meanwhile.
template <typename Done>
bool spin_until(Done done, ThreadPool::Prefetch& pf) {
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  for (int i = 1;; ++i) {
    if (done()) return true;
    if (pf.bytes > 0 || !yielding) {
      wait_round(pf);
    } else {
      std::this_thread::yield();
    }
    if (i % 256 == 0) {
      const auto spun = std::chrono::steady_clock::now() - start;
      if (spun > kSpinTime) return done();
      yielding = spun > kPauseTime;
    }
  }
}

uint64_t pack_range(int64_t front, int64_t end) { return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(end); }

// Takes `grain` items of what is left of a share (range: pack_range) into [b, e): from the
// front (its own slot, the last take possibly shorter), or from the back (another slot, only
// while two grains or more are left, so the owner is not left waiting for the thief's chunk).
bool take_items(std::atomic<uint64_t>& range, int64_t grain, bool from_back, int64_t& b, int64_t& e) {
  uint64_t r = range.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = static_cast<int64_t>(r >> 32);
    const int64_t end = static_cast<int64_t>(r & 0xffffffffu);
    if (from_back ? end - front < 2 * grain : front >= end) return false;
    b = from_back ? end - grain : front;
    e = from_back ? end : std::min(end, front + grain);
    const uint64_t left = from_back ? pack_range(front, b) : pack_range(e, end);
    // The CAS alone decides who runs which items; the job's start and end publish the data.
    if (range.compare_exchange_weak(r, left, std::memory_order_relaxed)) return true;
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::max(1, n_threads)), waiting_(static_cast<size_t>(n_threads_)), shares_(static_cast<size_t>(n_threads_)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int slot = 1; slot < n_threads_; ++slot) workers_.emplace_back([this, slot] { worker_loop(slot); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

// Guided: each chunk takes 1 / (2 n_threads) of the items left, at least chunk_ (the grain), so
// chunks shrink toward the end of the loop and the threads finish within one small chunk of
// each other, while the first chunks are large (few calls, long runs over a cache block).
void ThreadPool::run_chunks(int slot) {
  const int64_t parts = 2 * static_cast<int64_t>(n_threads_);
  int64_t begin = next_.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t left = n_ - begin;
    if (left <= 0) break;
    const int64_t size = std::min(left, std::max(chunk_, (left + parts - 1) / parts));
    if (!next_.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) continue;
    (*fn_)(slot, begin, begin + size);
    begin = next_.load(std::memory_order_relaxed);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, RangeFn fn) {
  parallel_for(n, min_chunk, [fn](int, int64_t begin, int64_t end) { fn(begin, end); });
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, SlotRangeFn fn) {
  if (n <= 0) return;
  // One chunk when there is less than two chunks' work; else guided chunks (run_chunks) no
  // smaller than min_chunk nor than 1/16 of a thread's share.
  const int64_t grain = std::max<int64_t>({1, min_chunk, n / (16 * static_cast<int64_t>(n_threads_))});
  if (workers_.empty() || n < 2 * grain) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunk_ = grain;
    next_.store(0, std::memory_order_relaxed);
    active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_job(0);
  finish();
}

void ThreadPool::parallel_split(std::span<const int64_t> cuts, SlotRangeFn fn, std::span<const Prefetch> prefetch,
                                std::span<int64_t> busy_ns, int64_t grain, std::span<int64_t> done_items) {
  if (cuts.size() != static_cast<size_t>(n_threads_) + 1 || (!prefetch.empty() && prefetch.size() + 1 != cuts.size()) ||
      (!busy_ns.empty() && busy_ns.size() + 1 != cuts.size()) ||
      (!done_items.empty() && done_items.size() + 1 != cuts.size())) {
    std::fprintf(stderr, "ThreadPool::parallel_split: %zu cuts (and prefetch %zu, busy_ns %zu, done_items %zu) for %d threads\n",
                 cuts.size(), prefetch.size(), busy_ns.size(), done_items.size(), n_threads_);
    std::abort();
  }
  if (workers_.empty()) {
    const auto start = std::chrono::steady_clock::now();
    if (cuts[0] < cuts[1]) fn(0, cuts[0], cuts[1]);
    if (!busy_ns.empty()) busy_ns[0] = (std::chrono::steady_clock::now() - start).count();
    if (!done_items.empty()) done_items[0] = std::max<int64_t>(0, cuts[1] - cuts[0]);
    return;
  }
  // Shares are taken in grains only where every bound fits the packed ranges (and a grain
  // past them is a share each).
  constexpr int64_t kMaxPacked = 0xffffffff;
  if (std::any_of(cuts.begin(), cuts.end(), [](int64_t c) { return c < 0 || c > kMaxPacked; })) grain = 0;
  grain = std::clamp<int64_t>(grain, 0, kMaxPacked);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = cuts.back();
    cuts_ = cuts.data();
    prefetch_ = prefetch.empty() ? nullptr : prefetch.data();
    busy_ns_ = busy_ns.empty() ? nullptr : busy_ns.data();
    grain_ = grain;
    done_items_ = done_items.empty() ? nullptr : done_items.data();
    if (grain_ > 0) {
      for (size_t s = 0; s < shares_.size(); ++s) {
        shares_[s].range.store(pack_range(cuts[s], std::max(cuts[s], cuts[s + 1])), std::memory_order_relaxed);
      }
    }
    start_ = std::chrono::steady_clock::now();
    active_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_job(0);
  finish();
}

void ThreadPool::run_job(int slot) {
  if (cuts_ == nullptr) return run_chunks(slot);
  int64_t done = 0;
  if (grain_ == 0) {
    if (cuts_[slot] < cuts_[slot + 1]) (*fn_)(slot, cuts_[slot], cuts_[slot + 1]);
    done = std::max<int64_t>(0, cuts_[slot + 1] - cuts_[slot]);
  } else {
    int64_t b = 0, e = 0;
    while (take_items(shares_[static_cast<size_t>(slot)].range, grain_, false, b, e)) {
      (*fn_)(slot, b, e);
      done += e - b;
    }
    for (int k = 1; k < n_threads_; ++k) {
      std::atomic<uint64_t>& other = shares_[static_cast<size_t>((slot + k) % n_threads_)].range;
      while (take_items(other, grain_, true, b, e)) {
        (*fn_)(slot, b, e);
        done += e - b;
      }
    }
  }
  if (busy_ns_ != nullptr) busy_ns_[slot] = (std::chrono::steady_clock::now() - start_).count();
  if (done_items_ != nullptr) done_items_[slot] = done;
  // A split loop sets what the slot prefetches next (or nothing); guided loops, the small ops
  // between, leave it running.
  waiting_[static_cast<size_t>(slot)].pf = prefetch_ != nullptr ? prefetch_[slot] : Prefetch{};
}

// The calling thread, done with its part (prefetching meanwhile), waits for the workers.
void ThreadPool::finish() {
  const auto all_done = [this] { return active_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done, waiting_[0].pf)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, all_done);
  }
  fn_ = nullptr;
  cuts_ = nullptr;
  prefetch_ = nullptr;
  busy_ns_ = nullptr;
  grain_ = 0;
  done_items_ = nullptr;
}

void ThreadPool::worker_loop(int slot) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a while for the next job, then sleep.
    const auto new_job = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(new_job, waiting_[static_cast<size_t>(slot)].pf)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, new_job);
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    run_job(slot);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace bitnet
