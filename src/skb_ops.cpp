// skb_ops.cpp — the operations of skb_ops.hpp. Each function cites the kernel function it models;
// kernel-skb-facts.md and docs/kernel-notes.md give the source references.

#include "skbsim/skb_ops.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "detail/skb_editor.hpp"
#include "skbsim/bug.hpp"

namespace skbsim::ops {
namespace {

using E = detail::SkbEditor;

constexpr std::uint32_t align_up(std::uint32_t x, std::uint32_t a) noexcept {
  return (x + a - 1) / a * a;
}

bool is_v2620(const OpCtx& ctx) noexcept { return ctx.kernel.version == KernelVersion::k2_6_20; }

void record(OpCtx& ctx, const Skb& skb, const Work& w) {
  record_skb_work(ctx.ledger, ctx.cpu, skb, w);
}

void require_live(const Skb& skb, Sym op) {
  if (!skb.live()) {
    raise_bug("use after free", op, skb.id(), "the skb was already freed");
  }
}

void require_page_live(const Page& page, Sym op) {
  if (!page.live) {
    raise_bug("use after free", op, page.id, "the page was already freed");
  }
}

// The first allocation an operation makes consumes an injected failure.
bool allocation_fails(OpCtx& ctx) noexcept { return std::exchange(ctx.fail_next_alloc, false); }

// ---- heads ------------------------------------------------------------------------------------

struct HeadSize {
  std::uint32_t end;          // usable data bytes (skb_end_offset)
  std::uint32_t alloc_bytes;  // the slab object
  bool small_head;
};

// 2.6.20 __alloc_skb / pskb_expand_head: end = SKB_DATA_ALIGN(size), kmalloc(end + shinfo).
// 6.x kmalloc_reserve(SKB_HEAD_ALIGN(size)): the small-head cache when it fits, otherwise
// kmalloc_size_roundup; end = SKB_WITH_OVERHEAD(object) so slack becomes tailroom.
HeadSize size_head(const KernelModel& k, std::uint32_t size) noexcept {
  if (!k.slack_is_tailroom) {
    const std::uint32_t end = k.data_align(size);
    return {end, k.kmalloc_size(end + k.shinfo_bytes), false};
  }
  const std::uint32_t shinfo = k.data_align(k.shinfo_bytes);
  const std::uint32_t obj = k.data_align(size) + shinfo;
  if (obj <= k.small_head_cache_bytes) {
    return {k.small_head_cache_bytes - shinfo, k.small_head_cache_bytes, true};
  }
  const std::uint32_t alloc = k.kmalloc_size(obj);
  return {alloc - shinfo, alloc, false};
}

DataBuf* alloc_head(OpCtx& ctx, const HeadSize& hs, bool traced, std::uint64_t skb_id) {
  DataBuf* b = ctx.pool.take_buf();
  b->end = hs.end;
  b->alloc_bytes = hs.alloc_bytes;
  b->small_head = hs.small_head;
  ctx.ledger.record({.sym = hs.small_head ? Sym::kKmemCacheAlloc : Sym::kKmalloc,
                     .alloc_bytes = hs.alloc_bytes},
                    traced, skb_id);
  return b;
}

void free_head(OpCtx& ctx, DataBuf* b, bool traced, std::uint64_t skb_id) {
  ctx.ledger.record(
      {.sym = b->small_head ? Sym::kKmemCacheFree : Sym::kKfree, .free_bytes = b->alloc_bytes},
      traced, skb_id);
  ctx.pool.give_buf(b);
}

// ---- releasing --------------------------------------------------------------------------------

void put_page_impl(OpCtx& ctx, Page& page, bool traced, std::uint64_t id) {
  require_page_live(page, Sym::kPutPage);
  if (page.refcount == 0) {
    raise_bug("page refcount underflow", Sym::kPutPage, page.id);
  }
  --page.refcount;
  Work w{.sym = Sym::kPutPage, .page_refs = 1};
  if (page.refcount == 0) {
    w.free_bytes = ctx.kernel.page_bytes;
    ctx.pool.give_page(&page);
  }
  ctx.ledger.record(w, traced, id);
}

void kfree_skb_impl(OpCtx& ctx, Skb& skb, Sym sym);

// Frees what a data buffer holds and the buffer: put_page on each frag, kfree_skb on each
// frag_list member (skb_drop_fraglist), kfree(head).
void free_data(OpCtx& ctx, DataBuf* b, bool traced, std::uint64_t id) {
  SharedInfo& si = b->shinfo;
  for (std::uint32_t i = 0; i < si.nr_frags; ++i) {
    put_page_impl(ctx, *si.frags[i].page, traced, id);
  }
  si.nr_frags = 0;
  Skb* list = std::exchange(si.frag_list, nullptr);
  while (list != nullptr) {
    Skb* next = std::exchange(list->next, nullptr);
    kfree_skb_impl(ctx, *list, Sym::kKfreeSkb);
    list = next;
  }
  free_head(ctx, b, traced, id);
}

// skb_release_data(): drops this skb's reference to its data buffer, freeing it at zero.
void release_data(OpCtx& ctx, Skb& skb, Sym op) {
  DataBuf* b = E::buf(skb);
  if (E::cloned(skb)) {
    std::uint32_t& ref = b->shinfo.dataref;
    const std::uint32_t bias = skb.nohdr() ? (1U << kDatarefShift) + 1U : 1U;
    if ((ref & kDatarefMask) < 1 || (skb.nohdr() && (ref >> kDatarefShift) < 1)) {
      raise_bug("dataref underflow", op, skb.id());
    }
    ref -= bias;
    if (ref != 0) {
      return;
    }
  }
  free_data(ctx, b, skb.traced(), skb.id());
}

// kfree_skbmem(): returns the sk_buff to its cache, or its fast-clone pair when fclone_ref
// reaches zero (2.6.20 marks a freed companion UNAVAILABLE again; 6.x reads fclone_ref only —
// the same availability).
void kfree_skbmem(OpCtx& ctx, Skb& skb) {
  const KernelModel& k = ctx.kernel;
  const bool traced = skb.traced();
  const std::uint64_t id = skb.id();
  FclonePair* pair = E::pair(skb);
  switch (skb.fclone()) {
    case Fclone::kUnavailable:
      ctx.ledger.record({.sym = Sym::kKmemCacheFree, .free_bytes = k.sk_buff_bytes}, traced, id);
      ctx.pool.give_skb(&skb);
      return;
    case Fclone::kOrig:
    case Fclone::kClone:
      if (skb.fclone() == Fclone::kClone) {
        E::fclone(skb) = Fclone::kUnavailable;
      }
      ctx.pool.retire_companion(&skb);
      if (--pair->fclone_ref == 0) {
        ctx.ledger.record({.sym = Sym::kKmemCacheFree, .free_bytes = k.fclone_cache_bytes},
                          traced, id);
        ctx.pool.give_pair(pair);
      }
      return;
  }
}

void run_destructor(OpCtx& ctx, Skb& skb) {
  Sock* sk = E::sk(skb);
  switch (skb.destructor()) {
    case Destructor::kNone:
      break;
    case Destructor::kSockWfree:
      sk->wmem_alloc -= skb.truesize();
      record(ctx, skb, {.sym = Sym::kSockWfree});
      if (sk->write_space != nullptr) {
        // The skb's owner fields are cleared first below; the callback sees the socket only.
        E::destructor(skb) = Destructor::kNone;
        E::sk(skb) = nullptr;
        sk->write_space(ctx, *sk);
        return;
      }
      break;
    case Destructor::kSockRfree:
      sk->rmem_alloc -= skb.truesize();
      record(ctx, skb, {.sym = Sym::kSockRfree});
      break;
  }
  E::destructor(skb) = Destructor::kNone;
  E::sk(skb) = nullptr;
}

void require_not_freed(const Skb& skb, Sym op) {
  if (!skb.live()) {
    raise_bug("double free", op, skb.id(), "the skb was already freed");
  }
}

// __kfree_skb(): the destructor, skb_release_data, kfree_skbmem; `op` names the caller in a bug.
void free_now(OpCtx& ctx, Skb& skb, Sym op) {
  record(ctx, skb, {.sym = Sym::kKfreeSkbFree});
  run_destructor(ctx, skb);
  release_data(ctx, skb, op);
  kfree_skbmem(ctx, skb);
}

// kfree_skb() / consume_skb(): one user less; the last one frees (__kfree_skb).
void kfree_skb_impl(OpCtx& ctx, Skb& skb, Sym sym) {
  require_not_freed(skb, sym);
  record(ctx, skb, {.sym = sym});
  if (skb.users() > 1) {
    --E::users(skb);
    return;
  }
  free_now(ctx, skb, sym);
}

// ---- writability ------------------------------------------------------------------------------

// Whether bytes [from, to) of the head (offsets from head) are this skb's to write: a private
// buffer, or a header area that every other reference gave up with skb_header_release.
void require_writable_head(const Skb& skb, std::uint32_t from, std::uint32_t to, Sym op) {
  if (!skb.cloned()) {
    return;
  }
  if (skb.nohdr()) {
    raise_bug("write to shared data", op, skb.id(),
              "a nohdr skb writes its buffer while a clone still uses it");
  }
  if (!skb.header_cloned() && to <= skb.buf().payload_start) {
    return;
  }
  raise_bug(skb.header_cloned() ? "write to shared header" : "write to shared data", op, skb.id(),
            "bytes " + std::to_string(from) + ".." + std::to_string(to) +
                " of the head are still used by another skb; skb_cow first");
}

void copy_header(Skb& to, const Skb& from, std::int64_t shift) {
  auto moved = [shift](std::uint16_t h) -> std::uint16_t {
    return h == kNoHeader ? kNoHeader : static_cast<std::uint16_t>(h + shift);
  };
  to.ip_summed = from.ip_summed;
  to.csum = from.csum;
  to.csum_start = static_cast<std::uint16_t>(from.csum_start + shift);
  to.csum_offset = from.csum_offset;
  to.transport_header = moved(from.transport_header);
  to.network_header = moved(from.network_header);
  to.mac_header = moved(from.mac_header);
  to.protocol = from.protocol;
  to.pkt_type = from.pkt_type;
  to.priority = from.priority;
  to.dev = from.dev;
  to.alloc_cpu = from.alloc_cpu;
  to.cb = from.cb;
  to.set_traced(from.traced());
}

Skb* alloc_skb_impl(OpCtx& ctx, std::uint32_t size, bool fclone) {
  if (allocation_fails(ctx)) {
    return nullptr;
  }
  const KernelModel& k = ctx.kernel;
  Skb* skb = nullptr;
  if (fclone) {
    skb = &ctx.pool.take_pair()->skb1;
  } else {
    skb = ctx.pool.take_skb();
  }
  ctx.ledger.record({.sym = Sym::kAllocSkb});
  ctx.ledger.record({.sym = Sym::kKmemCacheAlloc,
                     .alloc_bytes = fclone ? k.fclone_cache_bytes : k.sk_buff_bytes});
  const HeadSize hs = size_head(k, size);
  E::buf(*skb) = alloc_head(ctx, hs, false, skb->id());
  E::end(*skb) = hs.end;
  E::truesize(*skb) = k.skb_truesize(hs.end);
  skb->alloc_cpu = ctx.cpu;
  skb->touch_cpu = ctx.cpu;
  return skb;
}

}  // namespace

// ---- allocation -------------------------------------------------------------------------------

Skb* alloc_skb(OpCtx& ctx, std::uint32_t size) { return alloc_skb_impl(ctx, size, false); }

Skb* alloc_skb_fclone(OpCtx& ctx, std::uint32_t size) { return alloc_skb_impl(ctx, size, true); }

Skb* netdev_alloc_skb(OpCtx& ctx, std::uint32_t length) {
  const std::uint32_t pad = ctx.kernel.net_skb_pad;
  Skb* skb = alloc_skb_impl(ctx, length + pad, false);
  if (skb == nullptr) {
    return nullptr;
  }
  record(ctx, *skb, {.sym = Sym::kNetdevAllocSkb});
  E::data(*skb) += pad;
  E::tail(*skb) += pad;
  return skb;
}

// ---- geometry ---------------------------------------------------------------------------------

void reserve(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbReserve);
  if (skb.len() != 0) {
    raise_bug("skb_reserve on a non-empty skb", Sym::kSkbReserve, skb.id());
  }
  if (skb.tail_offset() + len > skb.end_offset()) {
    raise_bug("skb_over_panic", Sym::kSkbReserve, skb.id(),
              "reserve " + std::to_string(len) + " beyond end " +
                  std::to_string(skb.end_offset()));
  }
  E::data(skb) += len;
  E::tail(skb) += len;
  record(ctx, skb, {.sym = Sym::kSkbReserve});
}

std::uint32_t put(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbPut);
  if (skb.is_nonlinear()) {
    raise_bug("SKB_LINEAR_ASSERT", Sym::kSkbPut, skb.id(), "skb_put on a nonlinear skb");
  }
  if (skb.tail_offset() + len > skb.end_offset()) {
    raise_bug("skb_over_panic", Sym::kSkbPut, skb.id(),
              "put " + std::to_string(len) + " with tailroom " + std::to_string(skb.tailroom()));
  }
  require_writable_head(skb, skb.tail_offset(), skb.tail_offset() + len, Sym::kSkbPut);
  const std::uint32_t old_tail = skb.tail_offset();
  E::tail(skb) += len;
  E::len(skb) += len;
  record(ctx, skb, {.sym = Sym::kSkbPut});
  return old_tail;
}

void push(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbPush);
  if (len > skb.headroom()) {
    raise_bug("skb_under_panic", Sym::kSkbPush, skb.id(),
              "push " + std::to_string(len) + " with headroom " + std::to_string(skb.headroom()));
  }
  if (skb.cloned() && (skb.header_cloned() || skb.nohdr())) {
    raise_bug("write to shared header", Sym::kSkbPush, skb.id(),
              "push into a header area another skb still uses (skb_header_cloned); "
              "skb_cow_head first");
  }
  E::data(skb) -= len;
  E::len(skb) += len;
  record(ctx, skb, {.sym = Sym::kSkbPush});
}

void unpull(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbPush);
  if (len > skb.headroom()) {
    raise_bug("skb_under_panic", Sym::kSkbPush, skb.id(),
              "push " + std::to_string(len) + " with headroom " + std::to_string(skb.headroom()));
  }
  E::data(skb) -= len;
  E::len(skb) += len;
  record(ctx, skb, {.sym = Sym::kSkbPush});
}

bool pull(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbPull);
  if (len > skb.len()) {
    return false;
  }
  if (len > skb.headlen()) {
    raise_bug("BUG_ON(skb->len < skb->data_len)", Sym::kSkbPull, skb.id(),
              "__skb_pull into the frags; pskb_pull first");
  }
  E::data(skb) += len;
  E::len(skb) -= len;
  record(ctx, skb, {.sym = Sym::kSkbPull});
  return true;
}

bool trim(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  require_live(skb, Sym::kSkbTrim);
  record(ctx, skb, {.sym = Sym::kSkbTrim});
  if (skb.len() <= len) {
    return true;
  }
  if (skb.is_nonlinear()) {
    return false;  // __skb_trim: WARN_ON(skb->data_len), nothing done
  }
  E::len(skb) = len;
  E::tail(skb) = skb.data_offset() + len;
  return true;
}

// ---- clones and copies ------------------------------------------------------------------------

Skb* clone(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbClone);
  FclonePair* pair = E::pair(skb);
  Skb* n = nullptr;
  if (skb.fclone() == Fclone::kOrig && !pair->skb2.live()) {
    n = &pair->skb2;
    ctx.pool.activate_companion(n);
    ++pair->fclone_ref;
  } else {
    if (allocation_fails(ctx)) {
      return nullptr;
    }
    n = ctx.pool.take_skb();
    ctx.ledger.record({.sym = Sym::kKmemCacheAlloc, .alloc_bytes = ctx.kernel.sk_buff_bytes},
                      skb.traced(), skb.id());
  }
  copy_header(*n, skb, 0);
  n->touch_cpu = ctx.cpu;
  E::buf(*n) = E::buf(skb);
  E::data(*n) = skb.data_offset();
  E::tail(*n) = skb.tail_offset();
  E::end(*n) = skb.end_offset();
  E::len(*n) = skb.len();
  E::data_len(*n) = skb.data_len();
  E::truesize(*n) = skb.truesize();
  E::hdr_len(*n) = is_v2620(ctx) ? 0 : (skb.nohdr() ? skb.headroom() : skb.hdr_len());
  E::cloned(*n) = true;
  E::nohdr(*n) = false;
  ++E::buf(skb)->shinfo.dataref;
  E::cloned(skb) = true;
  record(ctx, skb, {.sym = Sym::kSkbClone});
  return n;
}

Skb* copy(OpCtx& ctx, const Skb& skb) {
  require_live(skb, Sym::kSkbCopy);
  Skb* n = alloc_skb_impl(ctx, skb.end_offset() + skb.data_len(), false);
  if (n == nullptr) {
    return nullptr;
  }
  const std::uint32_t headroom = skb.headroom();
  E::data(*n) = headroom;
  E::tail(*n) = headroom + skb.len();
  E::len(*n) = skb.len();
  copy_header(*n, skb, 0);
  E::buf(*n)->shinfo.gso_size = skb.shinfo().gso_size;
  E::buf(*n)->shinfo.gso_segs = skb.shinfo().gso_segs;
  E::buf(*n)->shinfo.gso_type = skb.shinfo().gso_type;
  record(ctx, skb, {.sym = Sym::kSkbCopy});
  record(ctx, skb, {.sym = Sym::kSkbCopyBits, .copied = headroom + skb.len()});
  return n;
}

Skb* pskb_copy(OpCtx& ctx, const Skb& skb) {
  require_live(skb, Sym::kPskbCopy);
  const std::uint32_t headroom = skb.headroom();
  const std::uint32_t size =
      is_v2620(ctx) ? skb.end_offset() : headroom + skb.headlen();  // __pskb_copy_fclone
  Skb* n = alloc_skb_impl(ctx, size, false);
  if (n == nullptr) {
    return nullptr;
  }
  E::data(*n) = headroom;
  E::tail(*n) = headroom + skb.headlen();
  E::len(*n) = skb.len();
  E::data_len(*n) = skb.data_len();
  E::truesize(*n) += skb.data_len();
  const SharedInfo& from = skb.shinfo();
  SharedInfo& to = E::buf(*n)->shinfo;
  for (std::uint32_t i = 0; i < from.nr_frags; ++i) {
    to.frags[i] = from.frags[i];
    ++from.frags[i].page->refcount;
  }
  to.nr_frags = from.nr_frags;
  to.frag_list = from.frag_list;
  for (Skb* m = from.frag_list; m != nullptr; m = m->next) {
    ++E::users(*m);  // skb_clone_fraglist: skb_get on each member
  }
  to.gso_size = from.gso_size;
  to.gso_segs = from.gso_segs;
  to.gso_type = from.gso_type;
  copy_header(*n, skb, 0);
  record(ctx, skb, {.sym = Sym::kPskbCopy, .copied = skb.headlen(), .page_refs = from.nr_frags});
  return n;
}

int expand_head(OpCtx& ctx, Skb& skb, std::uint32_t nhead, std::uint32_t ntail) {
  require_live(skb, Sym::kPskbExpandHead);
  if (skb.shared()) {
    raise_bug("BUG_ON(skb_shared(skb))", Sym::kPskbExpandHead, skb.id(),
              "pskb_expand_head on an skb with " + std::to_string(skb.users()) + " users");
  }
  if (allocation_fails(ctx)) {
    return kENOMEM;
  }
  const KernelModel& k = ctx.kernel;
  DataBuf* old = E::buf(skb);
  const SharedInfo& from = old->shinfo;
  const bool was_cloned = skb.cloned();
  // Page references are taken for the frags whenever the old buffer is not simply freed:
  // always on 2.6.20 (skb_release_data drops them again if it frees), only when cloned on 6.x.
  const bool take_refs = is_v2620(ctx) || was_cloned;
  const std::uint32_t page_refs = take_refs ? from.nr_frags : 0;
  record(ctx, skb,
         {.sym = Sym::kPskbExpandHead,
          .copied = skb.tail_offset() + k.shinfo_copy_bytes(from.nr_frags),
          .page_refs = page_refs});

  const HeadSize hs = size_head(k, k.data_align(nhead + skb.end_offset() + ntail));
  DataBuf* fresh = alloc_head(ctx, hs, skb.traced(), skb.id());
  SharedInfo& to = fresh->shinfo;
  to.nr_frags = from.nr_frags;
  to.frags = from.frags;
  to.gso_size = from.gso_size;
  to.gso_segs = from.gso_segs;
  to.gso_type = from.gso_type;
  to.frag_list = from.frag_list;
  to.dataref = 1;

  if (take_refs) {
    for (std::uint32_t i = 0; i < from.nr_frags; ++i) {
      ++from.frags[i].page->refcount;
    }
    for (Skb* m = from.frag_list; m != nullptr; m = m->next) {
      ++E::users(*m);  // skb_clone_fraglist
    }
    release_data(ctx, skb, Sym::kPskbExpandHead);
  } else {
    // 6.x skb_free_head(): the frags and frag_list moved with the shared info.
    old->shinfo.nr_frags = 0;
    old->shinfo.frag_list = nullptr;
    free_head(ctx, old, skb.traced(), skb.id());
  }

  const std::uint32_t old_end = skb.end_offset();
  E::buf(skb) = fresh;
  E::data(skb) += nhead;
  E::tail(skb) += nhead;
  E::end(skb) = hs.end;
  auto moved = [nhead](std::uint16_t h) -> std::uint16_t {
    return h == kNoHeader ? kNoHeader : static_cast<std::uint16_t>(h + nhead);
  };
  skb.transport_header = moved(skb.transport_header);
  skb.network_header = moved(skb.network_header);
  skb.mac_header = moved(skb.mac_header);
  if (!is_v2620(ctx) && skb.ip_summed == IpSummed::kPartial) {
    skb.csum_start = static_cast<std::uint16_t>(skb.csum_start + nhead);
  }
  E::cloned(skb) = false;
  E::nohdr(skb) = false;
  E::hdr_len(skb) = 0;
  if (!is_v2620(ctx) && skb.sk() == nullptr) {
    E::truesize(skb) += hs.end - old_end;
  }
  return 0;
}

int cow(OpCtx& ctx, Skb& skb, std::uint32_t headroom) {
  require_live(skb, Sym::kSkbCow);
  record(ctx, skb, {.sym = Sym::kSkbCow});
  const std::uint32_t pad = ctx.kernel.net_skb_pad;
  // 2.6.20 skb_cow: need = max(headroom, NET_SKB_PAD); 6.x __skb_cow: no floor.
  const std::uint32_t need = is_v2620(ctx) ? std::max(headroom, pad) : headroom;
  const std::uint32_t delta = need > skb.headroom() ? need - skb.headroom() : 0;
  if (delta > 0 || skb.cloned()) {
    return expand_head(ctx, skb, align_up(delta, pad), 0);
  }
  return 0;
}

int cow_head(OpCtx& ctx, Skb& skb, std::uint32_t headroom) {
  if (!ctx.kernel.has_skb_cow_head) {
    throw UnsupportedOp("skb_cow_head does not exist in " + std::string(ctx.kernel.name));
  }
  require_live(skb, Sym::kSkbCowHead);
  record(ctx, skb, {.sym = Sym::kSkbCowHead});
  const std::uint32_t delta = headroom > skb.headroom() ? headroom - skb.headroom() : 0;
  if (delta > 0 || skb.header_cloned()) {
    return expand_head(ctx, skb, align_up(delta, ctx.kernel.net_skb_pad), 0);
  }
  return 0;
}

void header_release(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbHeaderRelease);
  SharedInfo& si = E::buf(skb)->shinfo;
  if (is_v2620(ctx)) {
    if (skb.nohdr()) {
      raise_bug("BUG_ON(skb->nohdr)", Sym::kSkbHeaderRelease, skb.id());
    }
    si.dataref += 1U << kDatarefShift;
  } else {
    if (si.dataref_all() != 1) {
      raise_bug("__skb_header_release on a cloned skb", Sym::kSkbHeaderRelease, skb.id(),
                "6.x sets dataref = 1 + (1 << 16), valid only before any clone exists");
    }
    si.dataref = 1U + (1U << kDatarefShift);
  }
  E::nohdr(skb) = true;
  E::buf(skb)->payload_start = skb.data_offset();
  record(ctx, skb, {.sym = Sym::kSkbHeaderRelease});
}

Skb& get(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbGet);
  ++E::users(skb);
  record(ctx, skb, {.sym = Sym::kSkbGet});
  return skb;
}

Skb* unshare(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbUnshare);
  record(ctx, skb, {.sym = Sym::kSkbUnshare});
  if (!skb.cloned()) {
    return &skb;
  }
  Skb* n = copy(ctx, skb);
  // 6.x skb_unshare (skbuff.h): consume_skb when the copy succeeded, kfree_skb when it failed;
  // 2.6.20 always kfree_skb.
  const bool consume = n != nullptr && ctx.kernel.has_consume_skb;
  kfree_skb_impl(ctx, skb, consume ? Sym::kConsumeSkb : Sym::kKfreeSkb);
  return n;
}

Skb* share_check(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbShareCheck);
  record(ctx, skb, {.sym = Sym::kSkbShareCheck});
  if (!skb.shared()) {
    return &skb;
  }
  Skb* n = clone(ctx, skb);
  const bool consume = n != nullptr && ctx.kernel.has_consume_skb;
  kfree_skb_impl(ctx, skb, consume ? Sym::kConsumeSkb : Sym::kKfreeSkb);
  return n;
}

bool pull_tail(OpCtx& ctx, Skb& skb, std::uint32_t delta) {
  require_live(skb, Sym::kPskbPullTail);
  if (delta > skb.data_len()) {
    raise_bug("__pskb_pull_tail beyond data_len", Sym::kPskbPullTail, skb.id());
  }
  const std::int64_t eat = static_cast<std::int64_t>(skb.tail_offset()) + delta - skb.end_offset();
  if (eat > 0 || skb.cloned()) {
    const std::uint32_t ntail = eat > 0 ? static_cast<std::uint32_t>(eat) + 128 : 0;
    if (expand_head(ctx, skb, 0, ntail) != 0) {
      return false;
    }
  }
  SharedInfo& si = E::buf(skb)->shinfo;
  std::uint32_t frag_bytes = 0;
  for (std::uint32_t i = 0; i < si.nr_frags; ++i) {
    frag_bytes += si.frags[i].size;
  }
  // Whole frag_list members past the frags are eaten and freed; a partial member is not modelled.
  if (delta > frag_bytes) {
    std::uint32_t rest = delta - frag_bytes;
    while (rest > 0) {
      Skb* m = si.frag_list;
      if (m == nullptr || m->len() > rest) {
        throw UnsupportedOp("__pskb_pull_tail into part of a frag_list skb is not modelled");
      }
      rest -= m->len();
      si.frag_list = std::exchange(m->next, nullptr);
      kfree_skb_impl(ctx, *m, Sym::kKfreeSkb);
    }
  }
  std::uint32_t left = std::min(delta, frag_bytes);
  std::uint32_t k = 0;
  for (std::uint32_t i = 0; i < si.nr_frags; ++i) {
    Frag f = si.frags[i];
    if (f.size <= left) {
      left -= f.size;
      put_page_impl(ctx, *f.page, skb.traced(), skb.id());
    } else {
      f.off += left;
      f.size -= left;
      left = 0;
      si.frags[k++] = f;
    }
  }
  si.nr_frags = k;
  E::tail(skb) += delta;
  E::data_len(skb) -= delta;
  record(ctx, skb, {.sym = Sym::kPskbPullTail});
  record(ctx, skb, {.sym = Sym::kSkbCopyBits, .copied = delta});
  return true;
}

int linearize(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kPskbPullTail);
  if (!skb.is_nonlinear()) {
    return 0;
  }
  return pull_tail(ctx, skb, skb.data_len()) ? 0 : kENOMEM;
}

// ---- pages and frags --------------------------------------------------------------------------

Page* alloc_page(OpCtx& ctx) {
  if (allocation_fails(ctx)) {
    return nullptr;
  }
  Page* p = ctx.pool.take_page();
  ctx.ledger.record({.sym = Sym::kAllocPages, .alloc_bytes = ctx.kernel.page_bytes});
  return p;
}

void get_page(OpCtx& ctx, Page& page) {
  require_page_live(page, Sym::kGetPage);
  ++page.refcount;
  ctx.ledger.record({.sym = Sym::kGetPage, .page_refs = 1});
}

void put_page(OpCtx& ctx, Page& page) { put_page_impl(ctx, page, false, page.id); }

namespace {
void fill_frag(Skb& skb, std::uint32_t i, Page& page, std::uint32_t off, std::uint32_t size,
               std::uint32_t max_frags, Sym op) {
  require_live(skb, op);
  require_page_live(page, op);
  SharedInfo& si = E::buf(skb)->shinfo;
  if (i >= max_frags || i > si.nr_frags) {
    raise_bug("frag index out of range", op, skb.id(),
              "i = " + std::to_string(i) + " with nr_frags " + std::to_string(si.nr_frags) +
                  " and MAX_SKB_FRAGS " + std::to_string(max_frags));
  }
  if (skb.cloned()) {
    raise_bug("write to shared data", op, skb.id(),
              "filling a frag of a shared skb_shared_info; skb_cow first");
  }
  si.frags[i] = {&page, off, size};
  si.nr_frags = i + 1;
}
}  // namespace

void fill_page_desc(OpCtx& ctx, Skb& skb, std::uint32_t i, Page& page, std::uint32_t off,
                    std::uint32_t size) {
  fill_frag(skb, i, page, off, size, ctx.kernel.max_skb_frags, Sym::kSkbFillPageDesc);
  record(ctx, skb, {.sym = Sym::kSkbFillPageDesc});
}

void add_rx_frag(OpCtx& ctx, Skb& skb, std::uint32_t i, Page& page, std::uint32_t off,
                 std::uint32_t size, std::uint32_t truesize) {
  fill_frag(skb, i, page, off, size, ctx.kernel.max_skb_frags, Sym::kSkbAddRxFrag);
  E::len(skb) += size;
  E::data_len(skb) += size;
  E::truesize(skb) += truesize;
  record(ctx, skb, {.sym = Sym::kSkbAddRxFrag});
}

void frag_grow(OpCtx& /*ctx*/, Skb& skb, std::uint32_t size, std::uint32_t truesize) {
  require_live(skb, Sym::kSkbAddRxFrag);
  SharedInfo& si = E::buf(skb)->shinfo;
  if (si.nr_frags == 0 || skb.cloned()) {
    raise_bug(si.nr_frags == 0 ? "no frag to grow" : "write to shared data", Sym::kSkbAddRxFrag,
              skb.id());
  }
  si.frags[si.nr_frags - 1].size += size;
  E::len(skb) += size;
  E::data_len(skb) += size;
  E::truesize(skb) += truesize;
}

// ---- ownership and freeing --------------------------------------------------------------------

void set_owner_w(OpCtx& ctx, Skb& skb, Sock& sk) {
  require_live(skb, Sym::kSkbSetOwnerW);
  if (skb.sk() != nullptr) {
    if (is_v2620(ctx)) {
      raise_bug("skb_set_owner_w on an owned skb", Sym::kSkbSetOwnerW, skb.id(),
                "2.6.20 does not orphan first: the old owner's charge would leak");
    }
    run_destructor(ctx, skb);
  }
  E::sk(skb) = &sk;
  E::destructor(skb) = Destructor::kSockWfree;
  sk.wmem_alloc += skb.truesize();
  record(ctx, skb, {.sym = Sym::kSkbSetOwnerW});
}

void set_owner_r(OpCtx& ctx, Skb& skb, Sock& sk) {
  require_live(skb, Sym::kSkbSetOwnerR);
  if (skb.sk() != nullptr) {
    if (is_v2620(ctx)) {
      raise_bug("skb_set_owner_r on an owned skb", Sym::kSkbSetOwnerR, skb.id(),
                "2.6.20 does not orphan first: the old owner's charge would leak");
    }
    run_destructor(ctx, skb);  // 6.x skb_set_owner_r: skb_orphan first
  }
  E::sk(skb) = &sk;
  E::destructor(skb) = Destructor::kSockRfree;
  sk.rmem_alloc += skb.truesize();
  record(ctx, skb, {.sym = Sym::kSkbSetOwnerR});
}

void orphan(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbOrphan);
  record(ctx, skb, {.sym = Sym::kSkbOrphan});
  run_destructor(ctx, skb);
}

void kfree_skb(OpCtx& ctx, Skb& skb) { kfree_skb_impl(ctx, skb, Sym::kKfreeSkb); }

bool try_coalesce(OpCtx& ctx, Skb& to, Skb& from, std::uint32_t* delta_truesize) {
  require_live(to, Sym::kSkbTryCoalesce);
  require_live(from, Sym::kSkbTryCoalesce);
  if (is_v2620(ctx)) {
    throw UnsupportedOp("skb_try_coalesce does not exist in " + std::string(ctx.kernel.name));
  }
  record(ctx, to, {.sym = Sym::kSkbTryCoalesce});
  *delta_truesize = 0;
  const std::uint32_t len = from.len();
  if (to.cloned()) {
    return false;
  }
  if (len <= to.tailroom()) {
    // skb_copy_bits(from, 0, skb_put(to, len), len)
    (void)put(ctx, to, len);
    record(ctx, to, {.sym = Sym::kSkbCopyBits, .copied = len});
    return true;
  }
  SharedInfo& ts = E::buf(to)->shinfo;
  SharedInfo& fs = E::buf(from)->shinfo;
  if (ts.frag_list != nullptr || fs.frag_list != nullptr || from.headlen() != 0 ||
      ts.nr_frags + fs.nr_frags > ctx.kernel.max_skb_frags) {
    return false;
  }
  const std::uint32_t delta = from.truesize() - ctx.kernel.skb_truesize(from.end_offset());
  const bool from_cloned = from.cloned();
  for (std::uint32_t i = 0; i < fs.nr_frags; ++i) {
    ts.frags[ts.nr_frags++] = fs.frags[i];
    if (from_cloned) {
      get_page(ctx, *fs.frags[i].page);  // __skb_frag_ref: the clone's data still holds them
    }
  }
  if (!from_cloned) {
    fs.nr_frags = 0;
  }
  E::truesize(to) += delta;
  E::len(to) += len;
  E::data_len(to) += len;
  *delta_truesize = delta;
  return true;
}

void split(OpCtx& ctx, Skb& skb, Skb& skb1, std::uint32_t len) {
  require_live(skb, Sym::kSkbSplit);
  require_live(skb1, Sym::kSkbSplit);
  if (len > skb.len() || skb1.len() != 0) {
    raise_bug("skb_split out of range", Sym::kSkbSplit, skb.id(),
              "split at " + std::to_string(len) + " of " + std::to_string(skb.len()) +
                  " into an skb of " + std::to_string(skb1.len()));
  }
  if (skb.cloned()) {
    raise_bug("write to shared data", Sym::kSkbSplit, skb.id(),
              "skb_split of a cloned skb's skb_shared_info");
  }
  record(ctx, skb, {.sym = Sym::kSkbSplit});
  SharedInfo& si = E::buf(skb)->shinfo;
  SharedInfo& si1 = E::buf(skb1)->shinfo;
  const std::uint32_t pos = skb.headlen();
  if (len < pos) {
    // skb_split_inside_header: the linear tail by copy, then every frag as it is
    const std::uint32_t tail_bytes = pos - len;
    (void)put(ctx, skb1, tail_bytes);
    record(ctx, skb, {.sym = Sym::kMemcpy, .copied = tail_bytes});
    for (std::uint32_t i = 0; i < si.nr_frags; ++i) {
      si1.frags[i] = si.frags[i];
    }
    si1.nr_frags = si.nr_frags;
    si.nr_frags = 0;
    E::data_len(skb1) = skb.data_len();
    E::len(skb1) += skb.data_len();
    E::data_len(skb) = 0;
    E::len(skb) = len;
    E::tail(skb) = skb.data_offset() + len;
    return;
  }
  // skb_split_no_header
  const std::uint32_t nfrags = si.nr_frags;
  si.nr_frags = 0;
  E::len(skb1) = skb.len() - len;
  E::data_len(skb1) = skb.len() - len;
  E::len(skb) = len;
  E::data_len(skb) = len - pos;
  std::uint32_t at = pos;
  std::uint32_t k = 0;
  for (std::uint32_t i = 0; i < nfrags; ++i) {
    const std::uint32_t size = si.frags[i].size;
    if (at + size > len) {
      si1.frags[k] = si.frags[i];
      if (at < len) {
        get_page(ctx, *si.frags[i].page);  // skb_frag_ref: both keep a part of the page
        si1.frags[k].off += len - at;
        si1.frags[k].size -= len - at;
        si.frags[i].size = len - at;
        ++si.nr_frags;
      }
      ++k;
    } else {
      ++si.nr_frags;
    }
    at += size;
  }
  si1.nr_frags = k;
}

void move_truesize(Skb& from, Skb& to, std::uint32_t bytes) {
  E::truesize(from) -= bytes;
  E::truesize(to) += bytes;
}

void kfree_skb_now(OpCtx& ctx, Skb& skb) {
  require_not_freed(skb, Sym::kKfreeSkbFree);
  if (skb.users() != 1) {
    raise_bug("__kfree_skb on a shared skb", Sym::kKfreeSkbFree, skb.id(),
              std::to_string(skb.users()) + " users; kfree_skb or consume_skb drop one");
  }
  free_now(ctx, skb, Sym::kKfreeSkbFree);
}

void consume_skb(OpCtx& ctx, Skb& skb) {
  if (!ctx.kernel.has_consume_skb) {
    throw UnsupportedOp("consume_skb does not exist in " + std::string(ctx.kernel.name));
  }
  kfree_skb_impl(ctx, skb, Sym::kConsumeSkb);
}

// ---- checksums and writes ---------------------------------------------------------------------

void checksum(OpCtx& ctx, const Skb& skb, std::uint32_t offset, std::uint32_t len) {
  require_live(skb, Sym::kSkbChecksum);
  if (offset > skb.len() || len > skb.len() - offset) {
    raise_bug("BUG_ON(len)", Sym::kSkbChecksum, skb.id(), "skb_checksum beyond skb->len");
  }
  record(ctx, skb, {.sym = Sym::kSkbChecksum});
  record(ctx, skb, {.sym = Sym::kCsumPartial, .summed = len});
}

void copy_and_csum_bits(OpCtx& ctx, const Skb& skb, std::uint32_t offset, std::uint32_t len) {
  require_live(skb, Sym::kSkbCopyAndCsumBits);
  if (offset > skb.len() || len > skb.len() - offset) {
    raise_bug("BUG_ON(len)", Sym::kSkbCopyAndCsumBits, skb.id(),
              "skb_copy_and_csum_bits beyond skb->len");
  }
  record(ctx, skb, {.sym = Sym::kSkbCopyAndCsumBits});
  record(ctx, skb, {.sym = Sym::kCsumPartialCopyGeneric, .fused = len});
}

void csum_partial(OpCtx& ctx, std::uint32_t len) {
  ctx.ledger.record({.sym = Sym::kCsumPartial, .summed = len});
}

void csum_partial_copy_generic(OpCtx& ctx, std::uint32_t len) {
  ctx.ledger.record({.sym = Sym::kCsumPartialCopyGeneric, .fused = len});
}

void add_data(OpCtx& ctx, Skb& skb, std::uint32_t len) {
  put(ctx, skb, len);
  if (skb.ip_summed == IpSummed::kNone) {
    record(ctx, skb, {.sym = Sym::kCsumPartialCopyGeneric, .fused = len});
  } else {
    record(ctx, skb, {.sym = Sym::kCopyFromUser, .copied = len});
  }
}

int checksum_help(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kSkbChecksumHelp);
  record(ctx, skb, {.sym = Sym::kSkbChecksumHelp});
  if (is_v2620(ctx)) {
    if (skb.ip_summed == IpSummed::kComplete || skb.shinfo().gso_size != 0) {
      skb.ip_summed = IpSummed::kNone;
      return 0;
    }
    if (skb.cloned()) {
      if (const int ret = expand_head(ctx, skb, 0, 0); ret != 0) {
        return ret;
      }
    }
    if (skb.transport_header == kNoHeader || skb.transport_header < skb.data_offset() ||
        skb.transport_header - skb.data_offset() > skb.len()) {
      raise_bug("BUG_ON(offset > (int)skb->len)", Sym::kSkbChecksumHelp, skb.id(),
                "the transport header is not set inside the data");
    }
    const std::uint32_t offset = skb.transport_header - skb.data_offset();
    checksum(ctx, skb, offset, skb.len() - offset);
    const std::uint32_t field = skb.transport_header + skb.csum_offset;
    require_writable_head(skb, field, field + 2, Sym::kSkbChecksumHelp);
    skb.ip_summed = IpSummed::kNone;
    return 0;
  }
  if (skb.ip_summed == IpSummed::kComplete) {
    skb.ip_summed = IpSummed::kNone;  // 6.x dev.c skb_checksum_help: goto out_set_summed
    return 0;
  }
  if (skb.ip_summed != IpSummed::kPartial) {
    return 0;
  }
  if (skb.shinfo().gso_size != 0) {
    return kEINVAL;  // skb_warn_bad_offload: GSO skbs must be segmented first
  }
  if (skb.csum_start < skb.data_offset() || skb.csum_start - skb.data_offset() >= skb.headlen()) {
    return kEINVAL;  // WARN_ON_ONCE(offset >= skb_headlen(skb))
  }
  const std::uint32_t offset = skb.csum_start - skb.data_offset();
  checksum(ctx, skb, offset, skb.len() - offset);
  // skb_ensure_writable(skb, offset + csum_offset + 2): a clone may write inside hdr_len.
  const std::uint32_t write_len = offset + skb.csum_offset + 2;
  if (write_len > skb.headlen()) {
    return kEINVAL;  // WARN_ONCE(offset + sizeof(__sum16) > skb_headlen(skb)), after the sum
  }
  const bool clone_writable =
      !skb.header_cloned() && skb.headroom() + write_len <= skb.hdr_len();
  if (skb.cloned() && !clone_writable) {
    if (const int ret = expand_head(ctx, skb, 0, 0); ret != 0) {
      return ret;
    }
  }
  skb.ip_summed = IpSummed::kNone;
  return 0;
}

void ip_decrease_ttl(OpCtx& ctx, Skb& skb) {
  require_live(skb, Sym::kIpDecreaseTtl);
  if (skb.network_header == kNoHeader) {
    raise_bug("network header not set", Sym::kIpDecreaseTtl, skb.id());
  }
  // iph->ttl (offset 8) and iph->check (offset 10..11).
  require_writable_head(skb, skb.network_header + 8U, skb.network_header + 12U,
                        Sym::kIpDecreaseTtl);
  record(ctx, skb, {.sym = Sym::kIpDecreaseTtl});
}

void ip_fast_csum(OpCtx& ctx, const Skb& skb) {
  require_live(skb, Sym::kIpFastCsum);
  record(ctx, skb, {.sym = Sym::kIpFastCsum, .summed = 20});
}

void store_bits(OpCtx& ctx, Skb& skb, std::uint32_t offset, std::uint32_t len) {
  require_live(skb, Sym::kSkbStoreBits);
  if (offset > skb.len() || len > skb.len() - offset) {
    raise_bug("skb_store_bits beyond skb->len", Sym::kSkbStoreBits, skb.id());
  }
  const std::uint32_t from = skb.data_offset() + offset;
  const std::uint32_t linear_end = std::min(offset + len, skb.headlen());
  if (offset < linear_end) {
    require_writable_head(skb, from, skb.data_offset() + linear_end, Sym::kSkbStoreBits);
  }
  if (offset + len > skb.headlen()) {
    // The write reaches the frags: their pages must not be shared with another holder.
    std::uint32_t pos = skb.headlen();
    for (std::uint32_t i = 0; i < skb.shinfo().nr_frags; ++i) {
      const Frag& f = skb.shinfo().frags[i];
      const bool overlaps = pos < offset + len && offset < pos + f.size;
      if (overlaps && (skb.cloned() || f.page->refcount > 1)) {
        raise_bug("write to shared data", Sym::kSkbStoreBits, skb.id(),
                  "frag " + std::to_string(i) + " is shared");
      }
      pos += f.size;
    }
  }
  record(ctx, skb, {.sym = Sym::kSkbStoreBits, .copied = len});
}

// ---- metadata ---------------------------------------------------------------------------------

void set_gso(Skb& skb, std::uint32_t gso_size, std::uint32_t gso_segs, std::uint32_t gso_type) {
  SharedInfo& si = E::buf(skb)->shinfo;
  si.gso_size = gso_size;
  si.gso_segs = gso_segs;
  si.gso_type = gso_type;
}

namespace {
std::uint16_t header_at(const Skb& skb, std::int32_t offset_from_data) {
  const std::int64_t h = static_cast<std::int64_t>(skb.data_offset()) + offset_from_data;
  if (h < 0 || h > skb.end_offset()) {
    raise_bug("header offset outside the head", Sym::kSkbReserve, skb.id());
  }
  return static_cast<std::uint16_t>(h);
}
}  // namespace

void set_network_header(Skb& skb, std::int32_t offset_from_data) {
  skb.network_header = header_at(skb, offset_from_data);
}
void set_transport_header(Skb& skb, std::int32_t offset_from_data) {
  skb.transport_header = header_at(skb, offset_from_data);
}
void set_mac_header(Skb& skb, std::int32_t offset_from_data) {
  skb.mac_header = header_at(skb, offset_from_data);
}

}  // namespace skbsim::ops
