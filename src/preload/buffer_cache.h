// The shims' per-buffer compressor cache: least recently used entries are
// evicted (their compressor destroyed) once `capacity` is reached, so a
// program that keeps allocating new buffers cannot grow memory without
// bound. An evicted buffer that comes back starts a fresh compressor: its
// residual was lost with the old one, the only gradient mass the shims can
// drop, and only past the cache's bound (counted in the summary).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

namespace dct::preload {

// (communicator, receive buffer, count, datatype): DDP's bucket buffers are
// stable, so one key per bucket.
struct BufferKey {
  uintptr_t comm = 0;
  uintptr_t buffer = 0;
  size_t count = 0;
  int datatype = 0;
  bool operator==(const BufferKey&) const = default;
};

struct BufferKeyHash {
  size_t operator()(const BufferKey& k) const {
    uint64_t h = k.comm * 0x9e3779b97f4a7c15ull;
    h ^= k.buffer + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
    h ^= k.count + 0x85ebca77c2b2ae63ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.datatype) + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

template <typename Value>
class LruCache {
 public:
  using Evict = std::function<void(const BufferKey&, Value&)>;
  LruCache(size_t capacity, Evict evict) : capacity_(capacity ? capacity : 1), evict_(std::move(evict)) {}
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;
  ~LruCache() { clear(); }

  // The entry, now the most recently used; nullptr when absent.
  Value* find(const BufferKey& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Adds a new key (absent: check with find) as the most recent entry,
  // evicting the least recent one when full.
  Value& insert(const BufferKey& key, Value value) {
    if (order_.size() >= capacity_) {
      auto& victim = order_.back();
      evict_(victim.first, victim.second);
      index_.erase(victim.first);
      order_.pop_back();
      evictions_++;
    }
    order_.emplace_front(key, std::move(value));
    index_[key] = order_.begin();
    return order_.front().second;
  }

  // Evicts every entry (most recent first), without counting evictions.
  void clear() {
    for (auto& e : order_) evict_(e.first, e.second);
    order_.clear();
    index_.clear();
  }

  size_t size() const { return order_.size(); }
  uint64_t evictions() const { return evictions_; }

 private:
  using Entry = std::pair<BufferKey, Value>;
  size_t capacity_;
  Evict evict_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<BufferKey, typename std::list<Entry>::iterator, BufferKeyHash> index_;
  std::atomic<uint64_t> evictions_{0};  // read by the summary from other threads
};

}  // namespace dct::preload
