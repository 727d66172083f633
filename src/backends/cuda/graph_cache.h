// The captured decode graphs of the CUDA backend (cuda_graph.cpp), most recently used first and
// at most `capacity` of them: a server's batch changes size as sequences join and leave, and
// goes back to sizes it had, so each recent step signature keeps its graph instead of one graph
// being replaced at every change. Plain C++ (T has a `signature`), tested on the host.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

namespace bitnet::cuda {

template <class T>
class GraphCache {
 public:
  explicit GraphCache(size_t capacity) : capacity_(capacity > 0 ? capacity : 1) {}

  // The entry of `signature`, made the most recently used, or null.
  T* find(std::string_view signature) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i]->signature == signature) {
        std::unique_ptr<T> hit = std::move(entries_[i]);
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        entries_.insert(entries_.begin(), std::move(hit));
        return entries_.front().get();
      }
    }
    return nullptr;
  }

  // Adds `entry` as the most recently used; returns the least recently used one when that makes
  // more than `capacity` (the caller frees what it holds), else null.
  std::unique_ptr<T> insert(std::unique_ptr<T> entry) {
    entries_.insert(entries_.begin(), std::move(entry));
    if (entries_.size() <= capacity_) return nullptr;
    std::unique_ptr<T> out = std::move(entries_.back());
    entries_.pop_back();
    return out;
  }

  // Takes the entry of `signature` out (a replay that failed), or null.
  std::unique_ptr<T> remove(std::string_view signature) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i]->signature == signature) {
        std::unique_ptr<T> out = std::move(entries_[i]);
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        return out;
      }
    }
    return nullptr;
  }

  // Every entry, most recently used first; the cache is empty after.
  std::vector<std::unique_ptr<T>> take_all() { return std::exchange(entries_, {}); }

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  size_t capacity_;
  std::vector<std::unique_ptr<T>> entries_;
};

}  // namespace bitnet::cuda
