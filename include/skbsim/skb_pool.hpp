#pragma once
// skb_pool.hpp — owns every sk_buff, fast-clone pair, data buffer and page of one model run.
//
// Objects come from chunked free lists: no heap allocation per packet once the pool has warmed up,
// and addresses stay stable for the pool's lifetime (a stale pointer reads a dead, generation-
// bumped object rather than freed memory, which is how use-after-free is detected). The pool does
// no kernel accounting: skbsim::ops decide what to allocate and charge the ledger; the pool only
// hands out and takes back storage and counts what is live, for the leak report.
//
// The downside: memory is never returned before the pool is destroyed, so a run's peak decides its
// footprint.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "skbsim/skb.hpp"

namespace skbsim {

class SkbPool {
 public:
  SkbPool() = default;
  SkbPool(const SkbPool&) = delete;
  SkbPool& operator=(const SkbPool&) = delete;
  ~SkbPool();

  // Storage only: a live, zeroed object with a fresh id.
  Skb* take_skb();          // a slab sk_buff (fclone UNAVAILABLE)
  FclonePair* take_pair();  // skb1 live (ORIG), skb2 not live
  DataBuf* take_buf();
  Page* take_page();

  void give_skb(Skb* skb) noexcept;  // a slab sk_buff, or a pair member being retired
  void give_pair(FclonePair* pair) noexcept;
  void give_buf(DataBuf* buf) noexcept;
  void give_page(Page* page) noexcept;
  // Marks a fast-clone companion live / dead without returning storage.
  void activate_companion(Skb* skb);
  void retire_companion(Skb* skb) noexcept;

  std::size_t live_skbs() const noexcept { return live_skbs_; }
  std::size_t live_bufs() const noexcept { return live_bufs_; }
  std::size_t live_pages() const noexcept { return live_pages_; }
  std::size_t live_pairs() const noexcept { return live_pairs_; }
  bool empty() const noexcept {
    return live_skbs_ == 0 && live_bufs_ == 0 && live_pages_ == 0 && live_pairs_ == 0;
  }

  // Visit every live object (leak reports, invariant sweeps). Order: allocation storage order.
  template <typename F>
  void for_each_live_skb(F&& f) const;
  template <typename F>
  void for_each_live_buf(F&& f) const;
  template <typename F>
  void for_each_live_page(F&& f) const;

 private:
  static constexpr std::size_t kChunk = 256;
  template <typename T>
  struct Chunks {
    std::vector<std::unique_ptr<T[]>> chunks;
    T* free = nullptr;
  };
  template <typename T>
  T* take_from(Chunks<T>& c);

  Chunks<Skb> skbs_;
  Chunks<FclonePair> pairs_;
  Chunks<DataBuf> bufs_;
  Chunks<Page> pages_;
  std::uint64_t next_id_ = 1;
  std::size_t live_skbs_ = 0;
  std::size_t live_bufs_ = 0;
  std::size_t live_pages_ = 0;
  std::size_t live_pairs_ = 0;
};

template <typename F>
void SkbPool::for_each_live_skb(F&& f) const {
  for (const auto& chunk : skbs_.chunks) {
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (chunk[i].live()) {
        f(chunk[i]);
      }
    }
  }
  for (const auto& chunk : pairs_.chunks) {
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (chunk[i].skb1.live()) {
        f(chunk[i].skb1);
      }
      if (chunk[i].skb2.live()) {
        f(chunk[i].skb2);
      }
    }
  }
}

template <typename F>
void SkbPool::for_each_live_buf(F&& f) const {
  for (const auto& chunk : bufs_.chunks) {
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (chunk[i].live) {
        f(chunk[i]);
      }
    }
  }
}

template <typename F>
void SkbPool::for_each_live_page(F&& f) const {
  for (const auto& chunk : pages_.chunks) {
    for (std::size_t i = 0; i < kChunk; ++i) {
      if (chunk[i].live) {
        f(chunk[i]);
      }
    }
  }
}

}  // namespace skbsim
