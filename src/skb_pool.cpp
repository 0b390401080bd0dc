#include "skbsim/skb_pool.hpp"

#include "detail/skb_editor.hpp"

namespace skbsim {
namespace {

// Each object type links its free list through its own field.
Skb*& free_link(Skb& s) { return detail::SkbEditor::free_link(s); }
FclonePair*& free_link(FclonePair& p) { return p.next_free; }
DataBuf*& free_link(DataBuf& b) { return b.next_free; }
Page*& free_link(Page& p) { return p.next_free; }

}  // namespace

SkbPool::~SkbPool() = default;

template <typename T>
T* SkbPool::take_from(Chunks<T>& c) {
  if (c.free == nullptr) {
    auto chunk = std::make_unique<T[]>(kChunk);
    for (std::size_t i = kChunk; i-- > 0;) {
      free_link(chunk[i]) = c.free;
      c.free = &chunk[i];
    }
    c.chunks.push_back(std::move(chunk));
  }
  T* t = c.free;
  c.free = free_link(*t);
  free_link(*t) = nullptr;
  return t;
}

Skb* SkbPool::take_skb() {
  Skb* s = take_from(skbs_);
  detail::SkbEditor::reset(*s, next_id_++);
  ++live_skbs_;
  return s;
}

FclonePair* SkbPool::take_pair() {
  FclonePair* p = take_from(pairs_);
  detail::SkbEditor::reset(p->skb1, next_id_++);
  detail::SkbEditor::set_pair(p->skb1, p, Fclone::kOrig);
  detail::SkbEditor::kill(p->skb2);
  detail::SkbEditor::set_pair(p->skb2, p, Fclone::kUnavailable);
  p->fclone_ref = 1;
  p->live = true;
  ++live_skbs_;
  ++live_pairs_;
  return p;
}

void SkbPool::activate_companion(Skb* skb) {
  FclonePair* p = detail::SkbEditor::pair(*skb);
  detail::SkbEditor::reset(*skb, next_id_++);
  detail::SkbEditor::set_pair(*skb, p, Fclone::kClone);
  ++live_skbs_;
}

void SkbPool::retire_companion(Skb* skb) noexcept {
  detail::SkbEditor::kill(*skb);
  --live_skbs_;
}

DataBuf* SkbPool::take_buf() {
  DataBuf* b = take_from(bufs_);
  // Reset what a fresh buffer's readers look at; frags[] beyond nr_frags are never read.
  b->shinfo.dataref = 1;
  b->shinfo.nr_frags = 0;
  b->shinfo.gso_size = 0;
  b->shinfo.gso_segs = 0;
  b->shinfo.gso_type = 0;
  b->shinfo.frag_list = nullptr;
  b->end = 0;
  b->alloc_bytes = 0;
  b->payload_start = 0;
  b->small_head = false;
  b->next_free = nullptr;
  b->id = next_id_++;
  b->live = true;
  ++live_bufs_;
  return b;
}

Page* SkbPool::take_page() {
  Page* p = take_from(pages_);
  const std::uint32_t gen = p->gen;
  *p = Page{};
  p->gen = gen;
  p->id = next_id_++;
  p->refcount = 1;
  p->live = true;
  ++live_pages_;
  return p;
}

void SkbPool::give_skb(Skb* skb) noexcept {
  detail::SkbEditor::kill(*skb);
  free_link(*skb) = skbs_.free;
  skbs_.free = skb;
  --live_skbs_;
}

void SkbPool::give_pair(FclonePair* pair) noexcept {
  if (pair->skb1.live()) {
    detail::SkbEditor::kill(pair->skb1);
    --live_skbs_;
  }
  if (pair->skb2.live()) {
    detail::SkbEditor::kill(pair->skb2);
    --live_skbs_;
  }
  pair->live = false;
  pair->next_free = pairs_.free;
  pairs_.free = pair;
  --live_pairs_;
}

void SkbPool::give_buf(DataBuf* buf) noexcept {
  buf->live = false;
  ++buf->gen;
  buf->next_free = bufs_.free;
  bufs_.free = buf;
  --live_bufs_;
}

void SkbPool::give_page(Page* page) noexcept {
  page->live = false;
  ++page->gen;
  page->next_free = pages_.free;
  pages_.free = page;
  --live_pages_;
}

}  // namespace skbsim
