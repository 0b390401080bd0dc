#pragma once
// skb_ops.hpp — the sk_buff operations, named after their kernel functions, with the semantics of
// the kernel version in OpCtx::kernel (net/core/skbuff.c, include/linux/skbuff.h, net/core/dev.c).
//
// Every operation that does work records it once in the context's ledger, under its own symbol,
// for its own work only (self time): skb_cow records kSkbCow and, when it copies,
// pskb_expand_head records the copy under kPskbExpandHead and the allocator its __kmalloc.
// Queries (Skb's const members) record nothing, and neither do refusals (an allocation that fails,
// an skb_pull beyond len): they return -ENOMEM, nullptr or false with the skb untouched.
//
// Conditions the kernel BUGs on (skb_over_panic, pskb_expand_head on a shared skb) and breaches of
// the model's sharing rules (a push into a header area another skb still uses, a write into shared
// payload, a use after free, a double free, a refcount underflow) throw SkbBug.
//
// Contracts below say Requires (else SkbBug), Effects, and Charges. "ALIGN(x, a)" rounds up.

#include <cstdint>

#include "skbsim/kernel.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb.hpp"
#include "skbsim/skb_pool.hpp"

namespace skbsim {

inline constexpr int kENOMEM = -12;
inline constexpr int kEINVAL = -22;

// What every operation runs against: the kernel it follows, the pool that owns the objects, the
// ledger of the execution context it runs in.
struct OpCtx {
  OpCtx(const KernelModel& k, SkbPool& p, Ledger& l) noexcept : kernel(k), pool(p), ledger(l) {}
  const KernelModel& kernel;
  SkbPool& pool;
  Ledger& ledger;
  // Failure injection, as the kernel's failslab: the next allocation any operation makes fails.
  bool fail_next_alloc = false;
  // raw_smp_processor_id() of the context the operations run in: what an allocation records
  // as skb->alloc_cpu.
  std::uint16_t cpu = 0;
};

namespace ops {

// Records `w`, work a context on `cpu` did on `skb`, in `ledger`: as a hand-over when another CPU
// worked on the skb last (Skb::touch_cpu), which `cpu` then becomes. Every operation below records
// through it, and so does the simulation's Net::charge.
inline void record_skb_work(Ledger& ledger, std::uint16_t cpu, const Skb& skb, const Work& w) {
  const bool handover = skb.touch_cpu != cpu;
  skb.touch_cpu = cpu;
  ledger.record(w, skb.traced(), skb.id(), handover);
}

// ---- allocation -------------------------------------------------------------------------------

// __alloc_skb(size). 2.6.20: data area SKB_DATA_ALIGN(size), kmalloc(that + shared info),
// truesize = data area + sizeof(sk_buff). 6.x: kmalloc_reserve(SKB_HEAD_ALIGN(size)) from the
// small-head cache or a kmalloc bucket, the slack becomes tailroom, truesize =
// SKB_TRUESIZE(end). Charges: kAllocSkb, kKmemCacheAlloc (sk_buff), kKmalloc or kKmemCacheAlloc
// (head). Returns nullptr on allocation failure.
Skb* alloc_skb(OpCtx& ctx, std::uint32_t size);
// alloc_skb_fclone(): the same from the fast-clone cache (sk_buff_fclones: orig + companion).
Skb* alloc_skb_fclone(OpCtx& ctx, std::uint32_t size);
// __netdev_alloc_skb(dev, length): alloc_skb(length + NET_SKB_PAD), reserving NET_SKB_PAD.
// (6.x takes small heads from a page-fragment cache; the model uses __alloc_skb sizes.)
Skb* netdev_alloc_skb(OpCtx& ctx, std::uint32_t length);

// ---- geometry ---------------------------------------------------------------------------------

// skb_reserve(len): data and tail advance. Requires an empty skb and room before end.
void reserve(OpCtx& ctx, Skb& skb, std::uint32_t len);
// skb_put(len): returns the old tail offset. Requires a linear skb (SKB_LINEAR_ASSERT), tail +
// len <= end (else "skb_over_panic") and private data (!skb_cloned: a put writes the buffer).
std::uint32_t put(OpCtx& ctx, Skb& skb, std::uint32_t len);
// skb_push(len). Requires headroom >= len (else "skb_under_panic") and a private header area:
// !skb_header_cloned, and not a nohdr skb whose buffer is still cloned.
void push(OpCtx& ctx, Skb& skb, std::uint32_t len);
// skb_pull(len): false (and nothing done) when len > skb->len. Requires len <= headlen
// (__skb_pull BUGs when it would pull into the frags).
[[nodiscard]] bool pull(OpCtx& ctx, Skb& skb, std::uint32_t len);
// __skb_push() undoing an __skb_pull() of the same `len` on the same skb (tcp_add_backlog when
// its merge fails): the bytes were the skb's own, so unlike push() no shared-header check.
void unpull(OpCtx& ctx, Skb& skb, std::uint32_t len);
// skb_trim(len): shortens a linear skb to len; on a nonlinear skb the kernel WARNs and does nothing
// (returns false then).
bool trim(OpCtx& ctx, Skb& skb, std::uint32_t len);

// ---- clones and copies ------------------------------------------------------------------------

// skb_clone(): a new sk_buff on the same data (the fclone companion when the original is an
// available ORIG, else the slab). Both get cloned=1; the clone nohdr=0, users=1, no owner; dataref
// lo16 += 1. 6.x: clone->hdr_len = headroom of a nohdr original. Charges kSkbClone (+
// kKmemCacheAlloc from the slab). nullptr on allocation failure.
Skb* clone(OpCtx& ctx, Skb& skb);
// skb_copy(): a private linear copy: new head of end + data_len, headroom and all len bytes copied
// (skb_copy_bits). Charges kSkbCopy, the allocation, kSkbCopyBits (headroom + len).
Skb* copy(OpCtx& ctx, const Skb& skb);
// pskb_copy(): a private head with the linear part copied (headlen bytes), frags shared by page
// reference, frag_list members by skb_get. 2.6.20 allocates end bytes, 6.x headroom + headlen.
Skb* pskb_copy(OpCtx& ctx, const Skb& skb);
// pskb_expand_head(nhead, ntail): a private head with nhead/ntail more room; copies tail - head
// plus the shared info (2.6.20: all of it; 6.x: up to frags[nr_frags]); frag pages are
// referenced (2.6.20 always; 6.x only when the skb was cloned). After: cloned=0, nohdr=0,
// dataref=1, hdr_len=0. Truesize: unchanged (2.6.20); grown by the end growth when the skb has no
// owner (6.x). Requires !skb_shared (BUG). Returns 0, or kENOMEM with nothing changed.
[[nodiscard]] int expand_head(OpCtx& ctx, Skb& skb, std::uint32_t nhead, std::uint32_t ntail);
// skb_cow(headroom): copy when skb_cloned or headroom is short. 2.6.20: need =
// max(headroom, NET_SKB_PAD), delta rounded to NET_SKB_PAD; 6.x: no floor, ALIGN(delta,
// NET_SKB_PAD). Charges kSkbCow, then pskb_expand_head's charges.
[[nodiscard]] int cow(OpCtx& ctx, Skb& skb, std::uint32_t headroom);
// skb_cow_head(headroom) (6.x only; UnsupportedOp on 2.6.20): the same keyed on
// skb_header_cloned.
[[nodiscard]] int cow_head(OpCtx& ctx, Skb& skb, std::uint32_t headroom);
// skb_header_release(): the skb now references only the payload (nohdr=1). 2.6.20: BUG if nohdr
// already set; dataref += 1 << 16. 6.x (__skb_header_release): dataref = 1 + (1 << 16), only
// valid before any clone exists. The header area ends at the current data offset.
void header_release(OpCtx& ctx, Skb& skb);
// skb_get(): users += 1.
Skb& get(OpCtx& ctx, Skb& skb);
// skb_unshare(): if skb_cloned, skb_copy and free the original (even when the copy failed; 6.x
// frees with consume_skb when the copy succeeded).
// Returns the skb to use from now on, or nullptr.
Skb* unshare(OpCtx& ctx, Skb& skb);
// skb_share_check(): if skb_shared, skb_clone and drop one user of the original (kfree_skb;
// 6.x consume_skb when the clone succeeded). Returns the skb to use, or nullptr.
Skb* share_check(OpCtx& ctx, Skb& skb);
// __pskb_pull_tail(delta): moves delta bytes of frags (and whole frag_list members) into the
// linear area, expanding first (ntail = eat + 128) when the tailroom is short or the skb is
// cloned. False on allocation failure.
[[nodiscard]] bool pull_tail(OpCtx& ctx, Skb& skb, std::uint32_t delta);
// skb_linearize(): __pskb_pull_tail(data_len) for a nonlinear skb; 0 or kENOMEM.
[[nodiscard]] int linearize(OpCtx& ctx, Skb& skb);

// ---- pages and frags --------------------------------------------------------------------------

// alloc_page(): a page with refcount 1. Charges kAllocPages.
Page* alloc_page(OpCtx& ctx);
// get_page / put_page (the last put frees the page: kPutPage with the page's bytes freed).
void get_page(OpCtx& ctx, Page& page);
void put_page(OpCtx& ctx, Page& page);
// skb_fill_page_desc(i, page, off, size): frags[i] = {page, off, size}, nr_frags = i + 1; takes
// over the caller's page reference; lengths are the caller's to update. Requires i <= nr_frags,
// i < MAX_SKB_FRAGS and a private shared info (!skb_cloned).
void fill_page_desc(OpCtx& ctx, Skb& skb, std::uint32_t i, Page& page, std::uint32_t off,
                    std::uint32_t size);
// skb_add_rx_frag(i, page, off, size, truesize): fill_page_desc, then len and data_len += size,
// truesize += truesize. (2.6.20 has no skb_add_rx_frag; its drivers open-coded the same.)
void add_rx_frag(OpCtx& ctx, Skb& skb, std::uint32_t i, Page& page, std::uint32_t off,
                 std::uint32_t size, std::uint32_t truesize);

// The in-place growth of the last frag that tcp_sendmsg open-codes when it appends to the same
// page (skb_can_coalesce): frags[nr_frags - 1].size, len, data_len += size; truesize += truesize.
// An inline field update in the kernel: records nothing. Requires a private shared info.
void frag_grow(OpCtx& ctx, Skb& skb, std::uint32_t size, std::uint32_t truesize);

// ---- ownership and freeing --------------------------------------------------------------------

// skb_set_owner_w(): sk_wmem_alloc += truesize, destructor sock_wfree. 6.x orphans first; 2.6.20
// requires an unowned skb.
void set_owner_w(OpCtx& ctx, Skb& skb, Sock& sk);
// skb_set_owner_r(): sk_rmem_alloc += truesize, destructor sock_rfree. 6.x orphans first; 2.6.20
// requires an unowned skb (it would overwrite the owner and leak its charge).
void set_owner_r(OpCtx& ctx, Skb& skb, Sock& sk);
// skb_orphan(): runs the destructor (sock_wfree / sock_rfree give truesize back) and clears sk.
void orphan(OpCtx& ctx, Skb& skb);
// kfree_skb(): drops one user; the last frees: destructor, skb_release_data (dataref minus 1, or
// minus 0x10001 for a nohdr skb; the data, its frag pages and frag_list go at zero), then
// kfree_skbmem (slab, or the fast-clone pair when fclone_ref reaches zero).
void kfree_skb(OpCtx& ctx, Skb& skb);
// consume_skb() (6.x only): the same memory effect, recorded as a consume, not a drop.
void consume_skb(OpCtx& ctx, Skb& skb);
// skb_try_coalesce() (6.x; 2.6.20 has no such function): appends `from`'s data to `to`, the skb
// before it in a queue, so one skb carries both. Into `to`'s tailroom by copy when it fits (a
// linear `to`), else by moving `from`'s page frags to the end of `to`'s (a reference each when
// `from` is cloned; its frags are emptied when not) while both stay within MAX_SKB_FRAGS. Refused
// when `to` is cloned, either has a frag_list, or `from` has a linear part (skb_head_is_locked:
// the model's heads are kmalloc'd, never a page fragment to steal). On success `to` grows by
// from's len and by `*delta_truesize`, which the caller charges to the socket; `from` is then
// the caller's to free (kfree_skb_partial).
bool try_coalesce(OpCtx& ctx, Skb& to, Skb& from, std::uint32_t* delta_truesize);
// skb_split() (both versions): moves the data of `skb` from byte `len` on to `skb1`, an empty
// skb: the linear part past `len` by copy, then all frags, when `len` falls in the linear part
// (skb_split_inside_header); else the frags past `len`, a frag that straddles it shared by both
// (a page reference more, skb_frag_ref) and cut at `len` (skb_split_no_header). Lengths follow;
// truesize does not (tso_fragment and tcp_fragment move it: move_truesize).
void split(OpCtx& ctx, Skb& skb, Skb& skb1, std::uint32_t len);
// `bytes` of `from`'s truesize to `to`, as tso_fragment and tcp_fragment do around skb_split
// ("buff->truesize += nlen; skb->truesize -= nlen").
void move_truesize(Skb& from, Skb& to, std::uint32_t bytes);
// __kfree_skb(): frees an skb its caller knows to hold the only user of, without reading users
// and without the skb:kfree_skb or skb:consume_skb tracepoint. TCP frees this way what it owns:
// the retransmit queue's originals once ACKed (sk_stream_free_skb / tcp_wmem_free_skb), the
// receive queue's skbs once read (sk_eat_skb / tcp_eat_recv_skb), the pure ACKs it received. A
// shared skb is a bug here (the kernel would free what another user still holds).
void kfree_skb_now(OpCtx& ctx, Skb& skb);

// ---- checksums and writes ---------------------------------------------------------------------

// skb_checksum(offset, len): a software sum over len bytes from data + offset (kCsumPartial).
void checksum(OpCtx& ctx, const Skb& skb, std::uint32_t offset, std::uint32_t len);
// skb_copy_and_csum_bits(offset, len): one fused copy-and-sum pass (csum_partial_copy_generic).
void copy_and_csum_bits(OpCtx& ctx, const Skb& skb, std::uint32_t offset, std::uint32_t len);
// csum_partial over a buffer of len bytes that is not an skb (a header, a user buffer).
void csum_partial(OpCtx& ctx, std::uint32_t len);
// csum_partial_copy_generic: a fused copy-and-sum of len bytes outside an skb.
void csum_partial_copy_generic(OpCtx& ctx, std::uint32_t len);
// skb_add_data(len): skb_put(len) filled from user space; CHECKSUM_NONE skbs copy-and-sum in one
// pass (csum_and_copy_from_user -> csum_partial_copy_generic), others copy (copy_from_user).
void add_data(OpCtx& ctx, Skb& skb, std::uint32_t len);
// skb_checksum_help(): finishes a CHECKSUM_PARTIAL checksum in software.
// 2.6.20: COMPLETE -> NONE; a GSO skb -> NONE ("GSO will fix it"); a cloned skb is first given a
// private head (pskb_expand_head(0, 0)); then sum from the transport header to the end.
// 6.x: COMPLETE -> NONE; otherwise only PARTIAL is touched; GSO -> kEINVAL; sum from csum_start to
// the end (kEINVAL if the 2-byte field is not in the linear part), then
// skb_ensure_writable(csum_start + csum_offset + 2), which copies only when the checksum field
// is outside the clone's writable header (hdr_len) or the header is cloned.
[[nodiscard]] int checksum_help(OpCtx& ctx, Skb& skb);
// ip_decrease_ttl(): the incremental TTL/checksum update (no pass over data) at the network
// header. Requires the network header to be set and writable.
void ip_decrease_ttl(OpCtx& ctx, Skb& skb);
// ip_fast_csum() over the IP header (ihl * 4 = 20 bytes).
void ip_fast_csum(OpCtx& ctx, const Skb& skb);
// skb_store_bits(offset, len): writes len bytes at data + offset. Requires the bytes to be this
// skb's to write (not shared with another skb).
void store_bits(OpCtx& ctx, Skb& skb, std::uint32_t offset, std::uint32_t len);

// ---- metadata ---------------------------------------------------------------------------------

// skb_shinfo(skb)->gso_{size,segs,type}: the stack sets these directly on a private shared info.
void set_gso(Skb& skb, std::uint32_t gso_size, std::uint32_t gso_segs, std::uint32_t gso_type);
// skb_reset_{network,transport,mac}_header with an offset from data.
void set_network_header(Skb& skb, std::int32_t offset_from_data);
void set_transport_header(Skb& skb, std::int32_t offset_from_data);
void set_mac_header(Skb& skb, std::int32_t offset_from_data);

}  // namespace ops
}  // namespace skbsim
