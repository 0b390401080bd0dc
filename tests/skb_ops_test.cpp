// skbsim::ops (src/skb_ops.cpp) against the kernel rules in kernel-skb-facts.md and
// docs/kernel-notes.md (which wins where they differ). Every expected number is written out for
// the version it holds for (2.6.20 i386: sk_buff 168 B, shinfo 164 B, NET_SKB_PAD 16; 6.x x86_64:
// sk_buff 232 B (256 aligned), shinfo 320 B with frags at 48, NET_SKB_PAD 64, small head 704 B),
// never recomputed from KernelModel, so a wrong model constant fails a test. Test names end in the
// kernel function whose rule they check.

#include "skbsim/skb_ops.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "skbsim/bug.hpp"
#include "skbsim/kernel.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb.hpp"
#include "skbsim/skb_check.hpp"
#include "skbsim/skb_pool.hpp"

#include "tests/support/model_env.hpp"

namespace skbsim {

// Parameterised test names print the version, not a byte dump.
void PrintTo(KernelVersion v, std::ostream* os) {
  *os << (v == KernelVersion::k2_6_20 ? "2.6.20" : "6.x");
}

namespace {

using V = KernelVersion;

// ---- harness ----------------------------------------------------------------------------------

struct Env : testing::ModelEnv {
  explicit Env(V v) : ModelEnv(v) {}

  bool v2620() const { return k.version == V::k2_6_20; }
  std::uint64_t calls(Sym s) const { return ledger.cell(s).calls; }
  const LedgerCell& cell(Sym s) const { return ledger.cell(s); }
  std::uint64_t total_calls() const { return ledger.total().calls; }
};

std::uint32_t lo16(const Skb& s) { return s.shinfo().dataref_all(); }
std::uint32_t hi16(const Skb& s) { return s.shinfo().dataref_payload(); }

// The condition of the SkbBug `f` raises, or "<no bug>".
template <typename F>
std::string bug_of(F&& f) {
  try {
    f();
  } catch (const SkbBug& b) {
    return b.condition();
  }
  return "<no bug>";
}

#define EXPECT_POOL_VALID(env)                                          \
  do {                                                                  \
    const auto bad_ = check_pool((env).pool, (env).k);                  \
    EXPECT_EQ(bad_, std::nullopt) << (bad_ ? *bad_ : std::string());    \
  } while (0)

// Per-version constants of the modelled kernels, written out (kernel-notes.md §1-§3).
struct Consts {
  std::uint32_t sk_buff;       // sizeof(struct sk_buff)
  std::uint32_t fclone_cache;  // skbuff_fclone_cache object
  std::uint32_t shinfo_whole;  // 2.6.20 copies all of it
  std::uint32_t tcp_h;         // SKB_DATA_ALIGN(MAX_TCP_HEADER) / MAX_TCP_HEADER
  std::uint32_t pad;           // NET_SKB_PAD
};
Consts consts(V v) {
  return v == V::k2_6_20 ? Consts{168, 340, 164, 192, 16} : Consts{232, 472, 320, 320, 64};
}
// Bytes of skb_shared_info pskb_expand_head copies: all 164 (2.6.20) or offsetof(frags[nr]).
std::uint32_t shinfo_copy(V v, std::uint32_t nr_frags) {
  return v == V::k2_6_20 ? 164U : 48U + 16U * nr_frags;
}

constexpr std::uint32_t kMss = 1448;

// sk_stream_alloc_pskb / tcp_stream_alloc_skb: a fast-clone skb with the TCP header reserve and
// one MSS of linear payload copied in by skb_add_data.
Skb* tcp_segment(Env& e, IpSummed summed = IpSummed::kNone) {
  const std::uint32_t h = consts(e.k.version).tcp_h;
  Skb* o = ops::alloc_skb_fclone(e.ctx, h + kMss);
  o->ip_summed = summed;
  ops::reserve(e.ctx, *o, h);
  ops::add_data(e.ctx, *o, kMss);
  return o;
}

// skb_entail (header_release) then tcp_transmit_skb: clone, push TCP (32) and IP (20) headers.
struct TcpPair {
  Skb* o;
  Skb* c;
};
TcpPair tcp_transmit(Env& e, IpSummed summed = IpSummed::kNone) {
  Skb* o = tcp_segment(e, summed);
  ops::header_release(e.ctx, *o);
  Skb* c = ops::clone(e.ctx, *o);
  ops::push(e.ctx, *c, 32);
  ops::set_transport_header(*c, 0);
  ops::push(e.ctx, *c, 20);
  ops::set_network_header(*c, 0);
  return {o, c};
}

// A slab skb: 64 bytes of headroom, 100 linear bytes (tail 164), and `nr` frags of 500 bytes,
// each on its own page whose only reference the skb took over (skb_add_rx_frag).
Skb* frag_skb(Env& e, std::uint32_t nr, Page** pages = nullptr) {
  Skb* s = ops::alloc_skb(e.ctx, 256);
  ops::reserve(e.ctx, *s, 64);
  ops::put(e.ctx, *s, 100);
  for (std::uint32_t i = 0; i < nr; ++i) {
    Page* p = ops::alloc_page(e.ctx);
    if (pages != nullptr) {
      pages[i] = p;
    }
    ops::add_rx_frag(e.ctx, *s, i, *p, 0, 500, 512);
  }
  return s;
}

// Parameterised over both kernels.
class OpsTest : public ::testing::TestWithParam<V> {
 protected:
  OpsTest() : env(GetParam()) {}
  bool v2620() const { return GetParam() == V::k2_6_20; }
  OpCtx& ctx() { return env.ctx; }
  Env env;
};

std::string version_name(const ::testing::TestParamInfo<V>& i) {
  return i.param == V::k2_6_20 ? "v2620" : "v6x";
}

#define SKBSIM_BOTH_KERNELS(Suite)    \
  class Suite : public OpsTest {};    \
  INSTANTIATE_TEST_SUITE_P(Kernels, Suite, ::testing::Values(V::k2_6_20, V::k6x), version_name)

SKBSIM_BOTH_KERNELS(Alloc);
SKBSIM_BOTH_KERNELS(Predicates);
SKBSIM_BOTH_KERNELS(Clone);
SKBSIM_BOTH_KERNELS(SkbCopy);
SKBSIM_BOTH_KERNELS(PskbCopy);
SKBSIM_BOTH_KERNELS(ExpandHead);
SKBSIM_BOTH_KERNELS(Cow);
SKBSIM_BOTH_KERNELS(Geometry);
SKBSIM_BOTH_KERNELS(Unshare);
SKBSIM_BOTH_KERNELS(ShareCheck);
SKBSIM_BOTH_KERNELS(Linearize);
SKBSIM_BOTH_KERNELS(Frags);
SKBSIM_BOTH_KERNELS(Owner);
SKBSIM_BOTH_KERNELS(Free);
SKBSIM_BOTH_KERNELS(Writes);
SKBSIM_BOTH_KERNELS(Charging);
SKBSIM_BOTH_KERNELS(Split);

// ---- allocation (§2.1, kernel-notes §3) -----------------------------------------------------

// 2.6.20: truesize = SKB_DATA_ALIGN(size) + sizeof(sk_buff); kmalloc(end + 164) from a general
// cache. 6.x: kmalloc_size_roundup(SKB_HEAD_ALIGN(size)), end = alloc - 320, truesize = alloc + 256.
TEST_P(Alloc, SizesAndTruesize___alloc_skb) {
  const std::uint32_t size = v2620() ? 1640 : 1500;
  Skb* s = ops::alloc_skb(ctx(), size);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->end_offset(), v2620() ? 1664U : 1728U);
  EXPECT_EQ(s->truesize(), v2620() ? 1832U : 2304U);
  EXPECT_EQ(env.cell(Sym::kKmalloc).alloc_bytes, 2048U);
  EXPECT_EQ(env.cell(Sym::kKmemCacheAlloc).alloc_bytes, v2620() ? 168U : 232U);
  EXPECT_EQ(env.calls(Sym::kAllocSkb), 1U);
  EXPECT_EQ(s->users(), 1U);
  EXPECT_EQ(s->shinfo().dataref, 1U);
  EXPECT_EQ(s->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(s->len(), 0U);
  EXPECT_EQ(s->headroom(), 0U);
  EXPECT_POOL_VALID(env);
}

// TCP's fast-clone head: 2.6.20 alloc_skb_fclone(192 + 1448) from the fclone cache (2 * 168 + 4);
// 6.x alloc_skb_fclone(MAX_TCP_HEADER = 320) takes the 704 B small head: end 384, truesize 960.
TEST_P(Alloc, FcloneHead_alloc_skb_fclone) {
  Skb* s = ops::alloc_skb_fclone(ctx(), v2620() ? 1640 : 320);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->fclone(), Fclone::kOrig);
  EXPECT_EQ(env.pool.live_pairs(), 1U);
  if (v2620()) {
    EXPECT_EQ(env.cell(Sym::kKmemCacheAlloc).alloc_bytes, 340U);
    EXPECT_EQ(env.cell(Sym::kKmalloc).alloc_bytes, 2048U);
    EXPECT_EQ(s->end_offset(), 1664U);
    EXPECT_EQ(s->truesize(), 1832U);
  } else {
    EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), 2U);  // fclone cache + skb_small_head_cache
    EXPECT_EQ(env.cell(Sym::kKmemCacheAlloc).alloc_bytes, 472U + 704U);
    EXPECT_EQ(env.calls(Sym::kKmalloc), 0U);
    EXPECT_EQ(s->end_offset(), 384U);
    EXPECT_EQ(s->truesize(), 960U);
    EXPECT_TRUE(s->buf().small_head);
  }
}

// __netdev_alloc_skb(len): __alloc_skb(len + NET_SKB_PAD) with NET_SKB_PAD reserved (16 / 64).
TEST_P(Alloc, ReservesNetSkbPad___netdev_alloc_skb) {
  Skb* s = ops::netdev_alloc_skb(ctx(), 1500);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->headroom(), v2620() ? 16U : 64U);
  EXPECT_EQ(s->end_offset(), v2620() ? 1536U : 1728U);
  EXPECT_EQ(s->truesize(), v2620() ? 1704U : 2304U);
  EXPECT_EQ(env.calls(Sym::kNetdevAllocSkb), 1U);
  EXPECT_EQ(env.calls(Sym::kAllocSkb), 1U);
}

// A failed allocation returns NULL and records nothing (failslab).
TEST_P(Alloc, FailureReturnsNullAndChargesNothing___alloc_skb) {
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::alloc_skb(ctx(), 256), nullptr);
  EXPECT_FALSE(ctx().fail_next_alloc);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::alloc_skb_fclone(ctx(), 256), nullptr);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::netdev_alloc_skb(ctx(), 256), nullptr);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::alloc_page(ctx()), nullptr);
  EXPECT_EQ(env.total_calls(), 0U);
  EXPECT_TRUE(env.pool.empty());
}

// ---- §1.4 truth table: predicates across a TCP lifecycle -----------------------------------

// Row 1: fresh skb.
TEST_P(Predicates, Row1_FreshIsPrivate___alloc_skb) {
  Skb* s = tcp_segment(env);
  EXPECT_FALSE(s->cloned_flag());
  EXPECT_EQ(lo16(*s), 1U);
  EXPECT_EQ(hi16(*s), 0U);
  EXPECT_FALSE(s->cloned());
  EXPECT_FALSE(s->header_cloned());
  EXPECT_FALSE(s->nohdr());
}

// Row 2: the write-queue skb after skb_entail's header_release: (1,1), nothing cloned.
TEST_P(Predicates, Row2_AfterHeaderRelease_skb_header_release) {
  Skb* s = tcp_segment(env);
  ops::header_release(ctx(), *s);
  EXPECT_TRUE(s->nohdr());
  EXPECT_FALSE(s->cloned_flag());
  EXPECT_EQ(s->shinfo().dataref, 0x00010001U);
  EXPECT_FALSE(s->cloned());
  EXPECT_FALSE(s->header_cloned());
}

// Row 3: tcp_transmit_skb's clone: dataref 0x00010002, skb_cloned T, skb_header_cloned F.
TEST_P(Predicates, Row3_TcpCloneIsClonedButHeaderPrivate_skb_clone) {
  const TcpPair p = tcp_transmit(env);
  EXPECT_EQ(p.c->shinfo().dataref, 0x00010002U);
  EXPECT_TRUE(p.c->cloned_flag());
  EXPECT_FALSE(p.c->nohdr());
  EXPECT_TRUE(p.c->cloned());
  EXPECT_FALSE(p.c->header_cloned());
  EXPECT_POOL_VALID(env);
}

// Row 4: the original of row 3 (nohdr): skb_cloned T, skb_header_cloned F.
TEST_P(Predicates, Row4_OriginalIsNohdrClonedHeaderNotCloned_skb_clone) {
  const TcpPair p = tcp_transmit(env);
  EXPECT_TRUE(p.o->nohdr());
  EXPECT_TRUE(p.o->cloned_flag());
  EXPECT_EQ(lo16(*p.o), 2U);
  EXPECT_EQ(hi16(*p.o), 1U);
  EXPECT_TRUE(p.o->cloned());
  EXPECT_FALSE(p.o->header_cloned());
}

// Row 5: a tap clone (dev_queue_xmit_nit) of the transmitted clone: (3,1), header_cloned T.
TEST_P(Predicates, Row5_TapCloneMakesHeaderCloned_dev_queue_xmit_nit) {
  const TcpPair p = tcp_transmit(env);
  Skb* tap = ops::clone(ctx(), *p.c);
  ASSERT_NE(tap, nullptr);
  EXPECT_EQ(lo16(*p.c), 3U);
  EXPECT_EQ(hi16(*p.c), 1U);
  EXPECT_TRUE(p.c->cloned());
  EXPECT_TRUE(p.c->header_cloned());
  EXPECT_TRUE(tap->cloned());
  EXPECT_TRUE(tap->header_cloned());
  EXPECT_POOL_VALID(env);
}

// Row 6: plain skb_clone without header_release (forwarding + tcpdump): (2,0), both T.
TEST_P(Predicates, Row6_PlainCloneSharesHeader_skb_clone) {
  Skb* s = tcp_segment(env);
  Skb* c = ops::clone(ctx(), *s);
  EXPECT_EQ(s->shinfo().dataref, 2U);
  for (const Skb* x : {s, c}) {
    EXPECT_TRUE(x->cloned_flag());
    EXPECT_TRUE(x->cloned());
    EXPECT_TRUE(x->header_cloned());
  }
}

// Row 7: the original after its clone was freed: flag sticky, (1,1), skb_cloned F,
// skb_header_cloned T (1 - 1 = 0 != 1).
TEST_P(Predicates, Row7_ClonedFlagIsSticky_skb_release_data) {
  const TcpPair p = tcp_transmit(env);
  ops::kfree_skb(ctx(), *p.c);
  EXPECT_TRUE(p.o->cloned_flag());
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010001U);
  EXPECT_FALSE(p.o->cloned());
  EXPECT_TRUE(p.o->header_cloned());
  EXPECT_POOL_VALID(env);
}

// Row 8: the clone after pskb_expand_head gave it its own buffer: (1,0), flag cleared.
TEST_P(Predicates, Row8_CloneAfterExpandHeadIsPrivate_pskb_expand_head) {
  const TcpPair p = tcp_transmit(env);
  ASSERT_EQ(ops::expand_head(ctx(), *p.c, 0, 0), 0);
  EXPECT_FALSE(p.c->cloned_flag());
  EXPECT_EQ(p.c->shinfo().dataref, 1U);
  EXPECT_FALSE(p.c->cloned());
  EXPECT_FALSE(p.c->header_cloned());
  EXPECT_NE(&p.c->buf(), &p.o->buf());
}

// Row 9: the original after row 8: (1,1), flag 1, skb_cloned F, skb_header_cloned T.
TEST_P(Predicates, Row9_OriginalAfterCloneLeft_pskb_expand_head) {
  const TcpPair p = tcp_transmit(env);
  ASSERT_EQ(ops::expand_head(ctx(), *p.c, 0, 0), 0);
  EXPECT_TRUE(p.o->cloned_flag());
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010001U);
  EXPECT_FALSE(p.o->cloned());
  EXPECT_TRUE(p.o->header_cloned());
  EXPECT_POOL_VALID(env);
}

// skb_shared is users != 1, independent of dataref.
TEST_P(Predicates, SharedIsUsersNotDataref_skb_shared) {
  Skb* s = ops::alloc_skb(ctx(), 128);
  EXPECT_FALSE(s->shared());
  ops::get(ctx(), *s);
  EXPECT_TRUE(s->shared());
  EXPECT_EQ(s->users(), 2U);
  EXPECT_FALSE(s->cloned());
}

// ---- §3.3 skb_clone and fast clones -----------------------------------------------------------

// The companion is used only while free; a second concurrent clone comes from the slab
// (kmem_cache_alloc of one sk_buff).
TEST_P(Clone, FastCloneOnlyWhenCompanionFree_skb_clone) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  const auto allocs = env.calls(Sym::kKmemCacheAlloc);
  const auto alloc_bytes = env.cell(Sym::kKmemCacheAlloc).alloc_bytes;
  Skb* c1 = ops::clone(ctx(), *o);
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ(c1->fclone(), Fclone::kClone);
  EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), allocs);
  Skb* c2 = ops::clone(ctx(), *o);
  ASSERT_NE(c2, nullptr);
  EXPECT_EQ(c2->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), allocs + 1);
  EXPECT_EQ(env.cell(Sym::kKmemCacheAlloc).alloc_bytes, alloc_bytes + (v2620() ? 168U : 232U));
  EXPECT_EQ(lo16(*o), 3U);
  EXPECT_EQ(env.pool.live_skbs(), 3U);
  EXPECT_EQ(env.pool.live_pairs(), 1U);
  EXPECT_POOL_VALID(env);
}

// kfree_skbmem on the CLONE makes the companion slot available again (2.6.20: fclone =
// UNAVAILABLE; 6.x: fclone_ref back to 1), so the next clone needs no allocation.
TEST_P(Clone, CompanionReusableAfterCloneFreed_kfree_skbmem) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  Skb* c1 = ops::clone(ctx(), *o);
  ops::kfree_skb(ctx(), *c1);
  EXPECT_EQ(env.calls(Sym::kKmemCacheFree), 0U);
  EXPECT_EQ(env.pool.live_pairs(), 1U);
  const auto allocs = env.calls(Sym::kKmemCacheAlloc);
  Skb* c3 = ops::clone(ctx(), *o);
  EXPECT_EQ(c3, c1);  // the same companion slot
  EXPECT_EQ(c3->fclone(), Fclone::kClone);
  EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), allocs);
}

// The fclone pair goes back to its cache only when both the original and the clone are gone,
// whichever goes first.
TEST_P(Clone, PairFreedOnlyWhenBothGoneOrigFirst_kfree_skbmem) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  Skb* c = ops::clone(ctx(), *o);
  ops::kfree_skb(ctx(), *o);
  EXPECT_EQ(env.pool.live_pairs(), 1U);
  EXPECT_EQ(env.calls(Sym::kKmemCacheFree), 0U);
  EXPECT_EQ(env.calls(Sym::kKfree), 0U);  // data still held by the clone
  EXPECT_EQ(lo16(*c), 1U);
  ops::kfree_skb(ctx(), *c);
  EXPECT_EQ(env.pool.live_pairs(), 0U);
  // The pair; on 6.x also the small head, which goes back to skb_small_head_cache.
  EXPECT_EQ(env.calls(Sym::kKmemCacheFree), v2620() ? 1U : 2U);
  EXPECT_EQ(env.cell(Sym::kKmemCacheFree).free_bytes, v2620() ? 340U : 472U + 704U);
  EXPECT_TRUE(env.pool.empty());
}

TEST_P(Clone, PairFreedOnlyWhenBothGoneCloneFirst_kfree_skbmem) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  Skb* c = ops::clone(ctx(), *o);
  ops::kfree_skb(ctx(), *c);
  EXPECT_EQ(env.pool.live_pairs(), 1U);
  EXPECT_EQ(env.pool.live_skbs(), 1U);
  ops::kfree_skb(ctx(), *o);
  EXPECT_EQ(env.pool.live_pairs(), 0U);
  EXPECT_TRUE(env.pool.empty());
}

// A clone's clone is not an ORIG: it always comes from the slab.
TEST_P(Clone, CloneOfCloneComesFromSlab_skb_clone) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  Skb* c = ops::clone(ctx(), *o);
  const auto allocs = env.calls(Sym::kKmemCacheAlloc);
  Skb* cc = ops::clone(ctx(), *c);
  EXPECT_EQ(cc->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), allocs + 1);
  EXPECT_EQ(lo16(*o), 3U);
}

// __skb_clone: users 1, no owner, nohdr 0, geometry and truesize copied; 6.x hdr_len is the
// headroom of a nohdr original (0 on 2.6.20, which has no hdr_len).
TEST_P(Clone, FieldRules___skb_clone) {
  Sock sk;
  Skb* o = tcp_segment(env, IpSummed::kPartial);
  ops::set_owner_w(ctx(), *o, sk);
  ops::header_release(ctx(), *o);
  ops::get(ctx(), *o);
  Skb* c = ops::clone(ctx(), *o);
  EXPECT_EQ(c->users(), 1U);
  EXPECT_EQ(c->sk(), nullptr);
  EXPECT_EQ(c->destructor(), Destructor::kNone);
  EXPECT_FALSE(c->nohdr());
  EXPECT_TRUE(o->nohdr());
  EXPECT_EQ(c->truesize(), o->truesize());
  EXPECT_EQ(c->len(), 1448U);
  EXPECT_EQ(c->headroom(), o->headroom());
  EXPECT_EQ(c->ip_summed, IpSummed::kPartial);
  EXPECT_EQ(&c->buf(), &o->buf());
  EXPECT_EQ(c->hdr_len(), v2620() ? 0U : 320U);
  // A clone of a clone (not nohdr) inherits hdr_len.
  Skb* cc = ops::clone(ctx(), *c);
  EXPECT_EQ(cc->hdr_len(), v2620() ? 0U : 320U);
  ops::kfree_skb(ctx(), *cc);
  ops::kfree_skb(ctx(), *c);
  ops::kfree_skb(ctx(), *o);
  ops::kfree_skb(ctx(), *o);
  EXPECT_EQ(sk.wmem_alloc, 0);
  EXPECT_TRUE(env.pool.empty());
}

// skb->alloc_cpu: set by the allocation to the CPU it runs on (__finalize_skb_around), and
// copied by a clone or copy from the original whatever CPU makes it (__copy_skb_header: the
// field is in the headers group), so a copy made on CPU 1 still belongs to CPU 0.
TEST_P(Clone, AllocCpuIsTheAllocatorsAndClonesAndCopiesKeepIt___copy_skb_header) {
  ctx().cpu = 3;
  Skb* o = tcp_segment(env, IpSummed::kPartial);
  EXPECT_EQ(o->alloc_cpu, 3U);
  ctx().cpu = 1;
  Skb* c = ops::clone(ctx(), *o);
  Skb* cc = ops::clone(ctx(), *c);  // from the slab, not the fclone companion
  Skb* n = ops::copy(ctx(), *o);
  Skb* p = ops::pskb_copy(ctx(), *o);
  for (const Skb* s : {c, cc, n, p}) {
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->alloc_cpu, 3U);
    EXPECT_EQ(s->touch_cpu, 1U);  // not a kernel field: the CPU that wrote it (record_skb_work)
  }
  Skb* fresh = ops::alloc_skb(ctx(), 100);
  EXPECT_EQ(fresh->alloc_cpu, 1U);
  for (Skb* s : {fresh, p, n, cc, c, o}) {
    ops::kfree_skb(ctx(), *s);
  }
  EXPECT_TRUE(env.pool.empty());
}

// Skb::touch_cpu, the CPU of the last work on an skb (cache state, not a kernel field): the
// allocating or cloning CPU's at first; a record from another CPU counts one hand-over in that
// work's cell and moves it, so the next record there counts none. A clone made on CPU 1 is CPU 1's
// (it wrote the new sk_buff), and skb_clone's own record on the original, last CPU 0's, is a
// hand-over.
TEST_P(Clone, TheFirstWorkOnAnotherCpusSkbIsAHandover_skb_clone) {
  ctx().cpu = 2;
  Skb* o = tcp_segment(env, IpSummed::kPartial);
  EXPECT_EQ(o->touch_cpu, 2U);
  EXPECT_EQ(env.ledger.total().handovers, 0U);
  ctx().cpu = 1;
  Skb* c = ops::clone(ctx(), *o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->touch_cpu, 1U);
  EXPECT_EQ(o->touch_cpu, 1U);
  EXPECT_EQ(env.cell(Sym::kSkbClone).handovers, 1U);
  ops::record_skb_work(env.ledger, 1, *c, {.sym = Sym::kSkbCopyBits, .copied = 100});
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).handovers, 0U);
  ops::record_skb_work(env.ledger, 2, *c, {.sym = Sym::kSkbCopyBits, .copied = 100});
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).handovers, 1U);
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).calls, 2U);
  EXPECT_EQ(c->touch_cpu, 2U);
  EXPECT_EQ(env.ledger.total().handovers, 2U);
  ops::kfree_skb(ctx(), *c);
  ops::kfree_skb(ctx(), *o);
  EXPECT_TRUE(env.pool.empty());
}

// A slab clone whose allocation fails returns NULL, leaves dataref and flags alone, and
// records nothing.
TEST_P(Clone, SlabAllocFailureChangesNothing_skb_clone) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  const auto before = env.total_calls();
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::clone(ctx(), *s), nullptr);
  EXPECT_EQ(s->shinfo().dataref, 1U);
  EXPECT_FALSE(s->cloned_flag());
  EXPECT_EQ(env.total_calls(), before);
  EXPECT_EQ(env.pool.live_skbs(), 1U);
}

// The companion needs no allocation, so an injected failure is not consumed by it.
TEST_P(Clone, CompanionNeedsNoAllocation_skb_clone) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  ctx().fail_next_alloc = true;
  Skb* c = ops::clone(ctx(), *o);
  EXPECT_NE(c, nullptr);
  EXPECT_TRUE(ctx().fail_next_alloc);
}

// ---- §3.1 skb_copy / pskb_copy ---------------------------------------------------------------

// skb_copy: a new head of end + data_len, headroom + len copied by skb_copy_bits, linear result,
// frags copied (not referenced), new dataref 1.
TEST_P(SkbCopy, CopiesHeadroomPlusAll_skb_copy) {
  Page* pg[1];
  Skb* s = frag_skb(env, 1, pg);
  ASSERT_EQ(s->len(), 600U);
  const auto kmallocs = env.cell(Sym::kKmalloc).alloc_bytes;
  Skb* n = ops::copy(ctx(), *s);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).copied, 64U + 600U);
  EXPECT_EQ(env.calls(Sym::kSkbCopy), 1U);
  EXPECT_EQ(n->len(), 600U);
  EXPECT_EQ(n->data_len(), 0U);
  EXPECT_EQ(n->headlen(), 600U);
  EXPECT_EQ(n->headroom(), 64U);
  EXPECT_EQ(n->shinfo().nr_frags, 0U);
  EXPECT_EQ(n->shinfo().dataref, 1U);
  EXPECT_FALSE(n->cloned_flag());
  EXPECT_EQ(n->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(pg[0]->refcount, 1U);
  // 2.6.20: alloc_skb(256 + 500) -> end 768, kmalloc(932) -> 1024, truesize 768 + 168.
  // 6.x: __alloc_skb(384 + 500) -> SKB_HEAD_ALIGN 896 + 320 = 1216 -> kmalloc 2048, end 1728.
  EXPECT_EQ(n->end_offset(), v2620() ? 768U : 1728U);
  EXPECT_EQ(env.cell(Sym::kKmalloc).alloc_bytes - kmallocs, v2620() ? 1024U : 2048U);
  EXPECT_EQ(n->truesize(), v2620() ? 936U : 2304U);
  // The source is untouched.
  EXPECT_EQ(s->shinfo().dataref, 1U);
  EXPECT_EQ(s->data_len(), 500U);
  EXPECT_POOL_VALID(env);
}

// pskb_copy: headlen copied, headroom reserved (not copied), frags shared by get_page,
// truesize += data_len. 2.6.20 allocates the old end; 6.x headroom + headlen.
TEST_P(PskbCopy, CopiesHeadlenOnlyAndRefsPages_pskb_copy) {
  Page* pg[2];
  Skb* s = frag_skb(env, 2, pg);
  Skb* n = ops::pskb_copy(ctx(), *s);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(env.cell(Sym::kPskbCopy).copied, 100U);
  EXPECT_EQ(env.cell(Sym::kPskbCopy).page_refs, 2U);
  EXPECT_EQ(pg[0]->refcount, 2U);
  EXPECT_EQ(pg[1]->refcount, 2U);
  EXPECT_EQ(n->headroom(), 64U);
  EXPECT_EQ(n->headlen(), 100U);
  EXPECT_EQ(n->len(), 1100U);
  EXPECT_EQ(n->data_len(), 1000U);
  EXPECT_EQ(n->shinfo().nr_frags, 2U);
  EXPECT_EQ(n->shinfo().dataref, 1U);
  EXPECT_FALSE(s->cloned_flag());
  EXPECT_EQ(s->shinfo().dataref, 1U);
  if (v2620()) {
    EXPECT_EQ(n->end_offset(), 256U);
    EXPECT_EQ(n->truesize(), 256U + 168U + 1000U);
  } else {
    EXPECT_EQ(n->end_offset(), 384U);  // 164 -> SKB_HEAD_ALIGN 512 -> small head
    EXPECT_EQ(n->truesize(), 960U + 1000U);
  }
  EXPECT_POOL_VALID(env);
  ops::kfree_skb(ctx(), *s);
  EXPECT_EQ(pg[0]->refcount, 1U);
  ops::kfree_skb(ctx(), *n);
  EXPECT_TRUE(env.pool.empty());
}

// tcp_transmit_skb retransmitting while a clone is in flight: pskb_copy of the cloned original
// copies the 1448 B MSS into a slab sk_buff and leaves the shared buffer alone.
TEST_P(PskbCopy, RetransmitWhileCloneInFlight_tcp_transmit_skb) {
  const TcpPair p = tcp_transmit(env);
  const auto allocs = env.calls(Sym::kKmemCacheAlloc);
  Skb* r = ops::pskb_copy(ctx(), *p.o);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(env.cell(Sym::kPskbCopy).copied, 1448U);
  EXPECT_EQ(r->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(env.calls(Sym::kKmemCacheAlloc), allocs + 1);  // the slab sk_buff; the head is kmalloc'd
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010002U);
  EXPECT_FALSE(r->cloned());
  EXPECT_POOL_VALID(env);
}

// ---- §3.1 / §3.2 pskb_expand_head ----------------------------------------------------------

// Copies tail - head plus the shared info: all 164 B (2.6.20) or 48 + 16 * nr_frags (6.x).
TEST_P(ExpandHead, CopiesHeadroomPlusLinearPlusShinfo_pskb_expand_head) {
  Skb* s = frag_skb(env, 2);
  ASSERT_EQ(s->tail_offset(), 164U);
  ASSERT_EQ(ops::expand_head(ctx(), *s, 0, 0), 0);
  EXPECT_EQ(env.cell(Sym::kPskbExpandHead).copied, v2620() ? 164U + 164U : 164U + 48U + 32U);
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(s->len(), 1100U);
  EXPECT_EQ(s->data_len(), 1000U);
  EXPECT_EQ(s->shinfo().nr_frags, 2U);
  EXPECT_EQ(s->headroom(), 64U);
  EXPECT_POOL_VALID(env);
}

// The new head: 2.6.20 kmalloc(SKB_DATA_ALIGN(nhead + end + ntail) + 164); 6.x kmalloc_reserve of
// SKB_HEAD_ALIGN(...) with the slack as tailroom. The old head is kfree'd (6.x: the small head
// goes back to its cache).
TEST_P(ExpandHead, AllocAndFreeSizes_pskb_expand_head) {
  Skb* s = frag_skb(env, 0);
  const auto kmalloc_bytes = env.cell(Sym::kKmalloc).alloc_bytes;
  ASSERT_EQ(ops::expand_head(ctx(), *s, 0, 1000), 0);
  EXPECT_EQ(env.cell(Sym::kKmalloc).alloc_bytes - kmalloc_bytes, 2048U);
  if (v2620()) {
    EXPECT_EQ(s->end_offset(), 1280U);  // SKB_DATA_ALIGN(256 + 1000)
    EXPECT_EQ(env.calls(Sym::kKfree), 1U);
    EXPECT_EQ(env.cell(Sym::kKfree).free_bytes, 512U);  // kmalloc(256 + 164)
  } else {
    EXPECT_EQ(s->end_offset(), 1728U);  // 2048 - 320
    EXPECT_EQ(env.calls(Sym::kKfree), 0U);
    EXPECT_EQ(env.cell(Sym::kKmemCacheFree).free_bytes, 704U);
  }
  EXPECT_EQ(s->tailroom(), s->end_offset() - 164U);
}

// 2.6.20 pskb_expand_head never touches truesize.
TEST(ExpandHead2620, TruesizeUnchanged_pskb_expand_head) {
  Env e(V::k2_6_20);
  Skb* s = frag_skb(e, 0);
  ASSERT_EQ(s->truesize(), 424U);
  ASSERT_EQ(ops::expand_head(e.ctx, *s, 0, 1000), 0);
  EXPECT_EQ(s->truesize(), 424U);
}

// 6.x grows truesize by the end growth only for an unowned skb (!skb->sk), so an owner's
// sk_wmem_alloc charge still balances.
TEST(ExpandHead6x, TruesizeGrowsOnlyWhenUnowned_pskb_expand_head) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 0);
  ASSERT_EQ(s->truesize(), 960U);
  ASSERT_EQ(ops::expand_head(e.ctx, *s, 0, 1000), 0);
  EXPECT_EQ(s->truesize(), 960U + (1728U - 384U));

  Sock sk;
  Skb* t = frag_skb(e, 0);
  ops::set_owner_w(e.ctx, *t, sk);
  EXPECT_EQ(sk.wmem_alloc, 960);
  ASSERT_EQ(ops::expand_head(e.ctx, *t, 0, 1000), 0);
  EXPECT_EQ(t->truesize(), 960U);
  ops::kfree_skb(e.ctx, *t);
  EXPECT_EQ(sk.wmem_alloc, 0);
}

// 2.6.20 get_page's every frag always; when the skb was not cloned, skb_release_data frees the old
// buffer at once and put_page's them again (net zero).
TEST(ExpandHead2620, RefsPagesAlwaysReleasedWithOldBuffer_pskb_expand_head) {
  Env e(V::k2_6_20);
  Page* pg[2];
  Skb* s = frag_skb(e, 2, pg);
  ASSERT_EQ(ops::expand_head(e.ctx, *s, 0, 0), 0);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).page_refs, 2U);
  EXPECT_EQ(e.calls(Sym::kPutPage), 2U);
  EXPECT_EQ(pg[0]->refcount, 1U);
  EXPECT_EQ(pg[1]->refcount, 1U);
  EXPECT_EQ(e.pool.live_bufs(), 1U);
}

TEST(ExpandHead2620, RefsPagesKeptWhenCloned_pskb_expand_head) {
  Env e(V::k2_6_20);
  Page* pg[2];
  Skb* s = frag_skb(e, 2, pg);
  Skb* c = ops::clone(e.ctx, *s);
  ASSERT_EQ(ops::expand_head(e.ctx, *c, 0, 0), 0);
  EXPECT_EQ(e.calls(Sym::kPutPage), 0U);
  EXPECT_EQ(pg[0]->refcount, 2U);
  EXPECT_EQ(pg[1]->refcount, 2U);
  ops::kfree_skb(e.ctx, *s);
  EXPECT_EQ(pg[0]->refcount, 1U);
  ops::kfree_skb(e.ctx, *c);
  EXPECT_TRUE(e.pool.empty());
}

// 6.x takes frag refs only when skb_cloned; otherwise skb_free_head and the refs move with the
// descriptors.
TEST(ExpandHead6x, RefsPagesOnlyWhenCloned_pskb_expand_head) {
  Env e(V::k6x);
  Page* pg[2];
  Skb* s = frag_skb(e, 2, pg);
  ASSERT_EQ(ops::expand_head(e.ctx, *s, 0, 0), 0);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).page_refs, 0U);
  EXPECT_EQ(e.calls(Sym::kPutPage), 0U);
  EXPECT_EQ(pg[0]->refcount, 1U);

  Skb* c = ops::clone(e.ctx, *s);
  ASSERT_EQ(ops::expand_head(e.ctx, *c, 0, 0), 0);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).page_refs, 2U);
  EXPECT_EQ(pg[0]->refcount, 2U);
  EXPECT_EQ(pg[1]->refcount, 2U);
  ops::kfree_skb(e.ctx, *c);
  ops::kfree_skb(e.ctx, *s);
  EXPECT_TRUE(e.pool.empty());
}

// The old buffer loses one reference (0x10001 for the nohdr original); the new one has dataref 1;
// cloned and nohdr are reset.
TEST_P(ExpandHead, DatarefOfOldAndNewBuffersNohdr_pskb_expand_head) {
  const TcpPair p = tcp_transmit(env);
  const DataBuf* x = &p.o->buf();
  ASSERT_EQ(x->shinfo.dataref, 0x00010002U);
  ASSERT_EQ(ops::expand_head(ctx(), *p.o, 0, 0), 0);
  EXPECT_EQ(x->shinfo.dataref, 1U);  // 0x00010002 - 0x00010001
  EXPECT_EQ(p.o->shinfo().dataref, 1U);
  EXPECT_FALSE(p.o->nohdr());
  EXPECT_FALSE(p.o->cloned_flag());
  EXPECT_TRUE(p.c->cloned_flag());
  EXPECT_FALSE(p.c->cloned());
  EXPECT_POOL_VALID(env);
}

TEST_P(ExpandHead, DatarefOfOldBufferPlainClone_pskb_expand_head) {
  Skb* s = frag_skb(env, 0);
  Skb* c1 = ops::clone(ctx(), *s);
  Skb* c2 = ops::clone(ctx(), *s);
  const DataBuf* x = &s->buf();
  ASSERT_EQ(ops::expand_head(ctx(), *c1, 0, 0), 0);
  EXPECT_EQ(x->shinfo.dataref, 2U);
  EXPECT_EQ(c1->shinfo().dataref, 1U);
  EXPECT_TRUE(c2->cloned());
  EXPECT_POOL_VALID(env);
}

// cloned, nohdr and (6.x) hdr_len are reset.
TEST_P(ExpandHead, ResetsClonedNohdrHdrLen_pskb_expand_head) {
  const TcpPair p = tcp_transmit(env);
  ASSERT_EQ(p.c->hdr_len(), v2620() ? 0U : 320U);
  ASSERT_EQ(ops::expand_head(ctx(), *p.c, 0, 0), 0);
  EXPECT_FALSE(p.c->cloned_flag());
  EXPECT_FALSE(p.c->nohdr());
  EXPECT_EQ(p.c->hdr_len(), 0U);
}

// BUG_ON(skb_shared(skb)).
TEST_P(ExpandHead, BugsOnSharedSkb_pskb_expand_head) {
  Skb* s = frag_skb(env, 0);
  ops::get(ctx(), *s);
  EXPECT_EQ(bug_of([&] { (void)ops::expand_head(ctx(), *s, 0, 0); }),
            "BUG_ON(skb_shared(skb))");
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 0U);
}

// -ENOMEM: nothing changed, nothing charged.
TEST_P(ExpandHead, EnomemChangesAndChargesNothing_pskb_expand_head) {
  const TcpPair p = tcp_transmit(env);
  const DataBuf* x = &p.c->buf();
  const auto before = env.total_calls();
  const auto headroom = p.c->headroom();
  const auto end = p.c->end_offset();
  const auto truesize = p.c->truesize();
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::expand_head(ctx(), *p.c, 64, 64), kENOMEM);
  EXPECT_FALSE(ctx().fail_next_alloc);
  EXPECT_EQ(env.total_calls(), before);
  EXPECT_EQ(&p.c->buf(), x);
  EXPECT_EQ(x->shinfo.dataref, 0x00010002U);
  EXPECT_EQ(p.c->headroom(), headroom);
  EXPECT_EQ(p.c->end_offset(), end);
  EXPECT_EQ(p.c->truesize(), truesize);
  EXPECT_TRUE(p.c->cloned_flag());
  EXPECT_POOL_VALID(env);
}

// Pointers and header offsets move by nhead; 6.x csum_start moves only for CHECKSUM_PARTIAL
// (skb_headers_offset_update).
TEST_P(ExpandHead, ShiftsHeadersByNhead_pskb_expand_head) {
  Skb* s = frag_skb(env, 0);
  ops::set_network_header(*s, 0);
  ops::set_transport_header(*s, 20);
  s->csum_start = s->transport_header;
  s->ip_summed = IpSummed::kPartial;
  ASSERT_EQ(ops::expand_head(ctx(), *s, 64, 0), 0);
  EXPECT_EQ(s->headroom(), 128U);
  EXPECT_EQ(s->tail_offset(), 228U);
  EXPECT_EQ(s->network_header, 128U);
  EXPECT_EQ(s->transport_header, 148U);
  if (!v2620()) {
    EXPECT_EQ(s->csum_start, 148U);
    s->ip_summed = IpSummed::kNone;
    s->csum_start = 7;
    ASSERT_EQ(ops::expand_head(ctx(), *s, 64, 0), 0);
    EXPECT_EQ(s->csum_start, 7U);
    EXPECT_EQ(s->network_header, 192U);
  }
}

// ---- §4.1 skb_cow / skb_cow_head truth table ---------------------------------------------------

// Builds one truth-table row's skb in `e` and returns the skb to cow.
using RowMaker = std::function<Skb*(Env&)>;

Skb* row_fresh(Env& e) { return frag_skb(e, 0); }  // HR 64, tail 164, (1,0)
Skb* row_tcp_clone(Env& e) { return tcp_transmit(e).c; }
Skb* row_plain_clone(Env& e) {
  Skb* s = frag_skb(e, 0);
  return ops::clone(e.ctx, *s);
}
Skb* row_tcp_clone_plus_tap(Env& e) {
  Skb* c = tcp_transmit(e).c;
  ops::clone(e.ctx, *c);
  return c;
}
Skb* row_sibling_freed(Env& e) {
  Skb* s = frag_skb(e, 0);
  Skb* c = ops::clone(e.ctx, *s);
  ops::kfree_skb(e.ctx, *c);
  return s;
}

// Runs skb_cow (or skb_cow_head) on a fresh instance of a row; returns the bytes
// pskb_expand_head copied (0 if it did not run) and checks kSkbCow/kSkbCowHead recorded once.
struct CowResult {
  bool expanded;
  std::uint64_t copied;
  std::uint32_t headroom;
  std::uint32_t tail;
};
CowResult run_cow(V v, const RowMaker& make, std::uint32_t headroom, bool head) {
  Env e(v);
  Skb* s = make(e);
  const std::uint32_t tail = s->tail_offset();
  const Sym sym = head ? Sym::kSkbCowHead : Sym::kSkbCow;
  const auto cows = e.calls(sym);
  const int ret = head ? ops::cow_head(e.ctx, *s, headroom) : ops::cow(e.ctx, *s, headroom);
  EXPECT_EQ(ret, 0);
  EXPECT_EQ(e.calls(sym), cows + 1);
  const bool expanded = e.calls(Sym::kPskbExpandHead) == 1;
  if (head) {
    EXPECT_FALSE(s->header_cloned());
  } else {
    EXPECT_FALSE(s->cloned());
  }
  const auto bad = check_pool(e.pool, e.k);
  EXPECT_EQ(bad, std::nullopt) << (bad ? *bad : std::string());
  return {expanded, e.cell(Sym::kPskbExpandHead).copied, s->headroom(), tail};
}

// Row 1: private, enough headroom: no copy.
TEST_P(Cow, Row1_PrivateWithHeadroomDoesNotCopy_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_fresh, 16, false);
  EXPECT_FALSE(r.expanded);
  EXPECT_EQ(r.copied, 0U);
  EXPECT_EQ(r.headroom, 64U);
  if (!v2620()) {
    EXPECT_FALSE(run_cow(GetParam(), row_fresh, 16, true).expanded);
  }
}

// Row 2: private, headroom short: grow by ALIGN(delta, NET_SKB_PAD): 36 -> 48 (2.6.20) / 64 (6.x).
TEST_P(Cow, Row2_PrivateShortHeadroomGrows_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_fresh, 100, false);
  EXPECT_TRUE(r.expanded);
  EXPECT_EQ(r.copied, 164U + shinfo_copy(GetParam(), 0));
  EXPECT_EQ(r.headroom, v2620() ? 112U : 128U);
  if (!v2620()) {
    const CowResult h = run_cow(GetParam(), row_fresh, 100, true);
    EXPECT_TRUE(h.expanded);
    EXPECT_EQ(h.headroom, 128U);
  }
}

// Row 3: the TCP clone with plenty of headroom: skb_cow COPIES (skb_cloned), skb_cow_head does not.
TEST_P(Cow, Row3_CopiesWhenClonedEvenWithHeadroom_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_tcp_clone, 16, false);
  EXPECT_TRUE(r.expanded);
  EXPECT_EQ(r.tail, v2620() ? 1640U : 1768U);
  EXPECT_EQ(r.copied, r.tail + shinfo_copy(GetParam(), 0));
  EXPECT_EQ(r.headroom, v2620() ? 140U : 268U);
  if (!v2620()) {
    const CowResult h = run_cow(GetParam(), row_tcp_clone, 16, true);
    EXPECT_FALSE(h.expanded);
    EXPECT_EQ(h.copied, 0U);
  }
}

// Row 4: the TCP clone with short headroom: both copy into a larger buffer.
TEST_P(Cow, Row4_TcpCloneShortHeadroomBothCopy_skb_cow) {
  const std::uint32_t need = v2620() ? 200 : 300;  // HR 140 / 268: delta 60 -> 64 / 32 -> 64
  const CowResult r = run_cow(GetParam(), row_tcp_clone, need, false);
  EXPECT_TRUE(r.expanded);
  EXPECT_EQ(r.headroom, v2620() ? 204U : 332U);
  EXPECT_EQ(r.copied, r.tail + shinfo_copy(GetParam(), 0));
  if (!v2620()) {
    const CowResult h = run_cow(GetParam(), row_tcp_clone, need, true);
    EXPECT_TRUE(h.expanded);
    EXPECT_EQ(h.headroom, 332U);
  }
}

// Row 5: a plain clone (lo16 2, hi16 0): both copy.
TEST_P(Cow, Row5_PlainCloneBothCopy_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_plain_clone, 16, false);
  EXPECT_TRUE(r.expanded);
  EXPECT_EQ(r.copied, 164U + shinfo_copy(GetParam(), 0));
  EXPECT_EQ(r.headroom, 64U);
  if (!v2620()) {
    EXPECT_TRUE(run_cow(GetParam(), row_plain_clone, 16, true).expanded);
  }
}

// Row 6: TCP clone plus a tap clone (3,1): both copy.
TEST_P(Cow, Row6_TcpClonePlusTapBothCopy_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_tcp_clone_plus_tap, 16, false);
  EXPECT_TRUE(r.expanded);
  EXPECT_EQ(r.copied, r.tail + shinfo_copy(GetParam(), 0));
  if (!v2620()) {
    EXPECT_TRUE(run_cow(GetParam(), row_tcp_clone_plus_tap, 16, true).expanded);
  }
}

// Row 7: sibling already freed (flag 1, lo16 1): neither copies.
TEST_P(Cow, Row7_SiblingFreedNoCopy_skb_cow) {
  const CowResult r = run_cow(GetParam(), row_sibling_freed, 16, false);
  EXPECT_FALSE(r.expanded);
  if (!v2620()) {
    EXPECT_FALSE(run_cow(GetParam(), row_sibling_freed, 16, true).expanded);
  }
}

// 2.6.20 skb_cow: need = max(headroom, NET_SKB_PAD = 16): skb_cow(skb, 0) with HR 8 expands by 16.
TEST(Cow2620, FloorIsNetSkbPad16_skb_cow) {
  Env e(V::k2_6_20);
  Skb* s = ops::alloc_skb(e.ctx, 256);
  ops::reserve(e.ctx, *s, 8);
  ops::put(e.ctx, *s, 100);
  ASSERT_EQ(ops::cow(e.ctx, *s, 0), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(s->headroom(), 24U);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).copied, 108U + 164U);
  EXPECT_EQ(s->end_offset(), 320U);  // SKB_DATA_ALIGN(16 + 256)
}

// 6.x __skb_cow has no floor: the same skb is left alone; and delta is ALIGNed to 64.
TEST(Cow6x, NoFloorAlignTo64___skb_cow) {
  Env e(V::k6x);
  Skb* s = ops::alloc_skb(e.ctx, 256);
  ops::reserve(e.ctx, *s, 8);
  ops::put(e.ctx, *s, 100);
  ASSERT_EQ(ops::cow(e.ctx, *s, 0), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
  ASSERT_EQ(ops::cow(e.ctx, *s, 9), 0);  // delta 1 -> 64
  EXPECT_EQ(s->headroom(), 72U);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 1U);
}

// skb_cow_head and consume_skb do not exist in 2.6.20.
TEST(Cow2620, HasNoCowHeadOrConsumeSkb_skb_cow_head) {
  Env e(V::k2_6_20);
  Skb* s = frag_skb(e, 0);
  EXPECT_THROW((void)ops::cow_head(e.ctx, *s, 0), UnsupportedOp);
  EXPECT_THROW(ops::consume_skb(e.ctx, *s), UnsupportedOp);
  EXPECT_EQ(e.calls(Sym::kSkbCowHead), 0U);
  EXPECT_TRUE(s->live());
}

// skb_cow on a shared skb reaches pskb_expand_head's BUG.
TEST_P(Cow, SharedSkbBugs_skb_cow) {
  Skb* s = frag_skb(env, 0);
  Skb* c = ops::clone(ctx(), *s);
  ops::get(ctx(), *c);
  EXPECT_EQ(bug_of([&] { (void)ops::cow(ctx(), *c, 16); }), "BUG_ON(skb_shared(skb))");
}

// ---- §4.2 skb_checksum_help ------------------------------------------------------------------

// 2.6.20: a cloned skb is given a private head first (tail - head + 164), then the sum runs
// from the transport header to the end.
TEST(ChecksumHelp, v2620CopiesIfCloned_skb_checksum_help) {
  Env e(V::k2_6_20);
  const TcpPair p = tcp_transmit(e, IpSummed::kPartial);
  p.c->csum_offset = 16;
  ASSERT_EQ(p.c->ip_summed, IpSummed::kPartial);
  ASSERT_EQ(ops::checksum_help(e.ctx, *p.c), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).copied, 1640U + 164U);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 1500U - 20U);
  EXPECT_EQ(p.c->ip_summed, IpSummed::kNone);
  EXPECT_FALSE(p.c->cloned_flag());
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010001U);
}

// 2.6.20 on a private skb: sum only, no copy.
TEST(ChecksumHelp, v2620PrivateSumsInPlace_skb_checksum_help) {
  Env e(V::k2_6_20);
  Skb* s = frag_skb(e, 1);
  ops::set_transport_header(*s, 20);
  s->csum_offset = 16;
  s->ip_summed = IpSummed::kPartial;
  ASSERT_EQ(ops::checksum_help(e.ctx, *s), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 600U - 20U);  // frags included
  EXPECT_EQ(s->ip_summed, IpSummed::kNone);
}

// 2.6.20: a GSO skb is set NONE without summing ("let GSO fix up the checksum").
TEST(ChecksumHelp, v2620GsoBecomesNoneWithoutSumming_skb_checksum_help) {
  Env e(V::k2_6_20);
  const TcpPair p = tcp_transmit(e, IpSummed::kPartial);
  ops::set_gso(*p.o, 1448, 1, 1);
  ASSERT_EQ(ops::checksum_help(e.ctx, *p.c), 0);
  EXPECT_EQ(p.c->ip_summed, IpSummed::kNone);
  EXPECT_EQ(e.calls(Sym::kCsumPartial), 0U);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
}

// COMPLETE -> NONE, nothing summed (both kernels: dev.c skb_checksum_help out_set_summed).
TEST_P(Writes, CompleteBecomesNone_skb_checksum_help) {
  Skb* s = frag_skb(env, 0);
  s->ip_summed = IpSummed::kComplete;
  ASSERT_EQ(ops::checksum_help(ctx(), *s), 0);
  EXPECT_EQ(s->ip_summed, IpSummed::kNone);
  EXPECT_EQ(env.calls(Sym::kCsumPartial), 0U);
  EXPECT_EQ(env.calls(Sym::kSkbChecksumHelp), 1U);
}

// 6.x: the TCP clone's checksum field lies within hdr_len: skb_ensure_writable finds it
// clone-writable, so the checksum is written in place.
TEST(ChecksumHelp, v6WritesInPlaceForTcpClone_skb_checksum_help) {
  Env e(V::k6x);
  const TcpPair p = tcp_transmit(e, IpSummed::kPartial);
  p.c->csum_start = p.c->transport_header;  // 288
  p.c->csum_offset = 16;
  ASSERT_EQ(p.c->headroom(), 268U);
  ASSERT_EQ(ops::checksum_help(e.ctx, *p.c), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 1500U - 20U);
  EXPECT_EQ(p.c->ip_summed, IpSummed::kNone);
  EXPECT_TRUE(p.c->cloned());
}

// 6.x: a checksum field beyond the clone's hdr_len (payload area) needs a private head.
TEST(ChecksumHelp, v6CopiesWhenFieldBeyondHdrLen_skb_ensure_writable) {
  Env e(V::k6x);
  const TcpPair p = tcp_transmit(e, IpSummed::kPartial);
  p.c->csum_start = static_cast<std::uint16_t>(p.c->data_offset() + 100);  // 368 > hdr_len 320
  p.c->csum_offset = 6;
  ASSERT_EQ(ops::checksum_help(e.ctx, *p.c), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).copied, 1768U + 48U);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 1500U - 100U);
  EXPECT_EQ(p.c->ip_summed, IpSummed::kNone);
}

// 6.x: a header-cloned skb (plain clone) is copied by skb_ensure_writable.
TEST(ChecksumHelp, v6CopiesWhenHeaderCloned_skb_checksum_help) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 0);
  s->ip_summed = IpSummed::kPartial;
  s->csum_start = 64 + 20;
  s->csum_offset = 16;
  Skb* c = ops::clone(e.ctx, *s);
  ASSERT_TRUE(c->header_cloned());
  ASSERT_EQ(ops::checksum_help(e.ctx, *c), 0);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).copied, 164U + 48U);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 80U);
  EXPECT_EQ(c->ip_summed, IpSummed::kNone);
  EXPECT_EQ(s->ip_summed, IpSummed::kPartial);
}

// 6.x: a GSO skb is refused with -EINVAL and stays PARTIAL (skb_warn_bad_offload).
TEST(ChecksumHelp, v6GsoIsEinval_skb_checksum_help) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 0);
  s->ip_summed = IpSummed::kPartial;
  s->csum_start = 84;
  s->csum_offset = 16;
  ops::set_gso(*s, 1448, 2, 1);
  EXPECT_EQ(ops::checksum_help(e.ctx, *s), kEINVAL);
  EXPECT_EQ(s->ip_summed, IpSummed::kPartial);
  EXPECT_EQ(e.calls(Sym::kCsumPartial), 0U);
}

// 6.x: a checksum start at or past headlen is -EINVAL before summing.
TEST(ChecksumHelp, v6StartBeyondHeadlenIsEinval_skb_checksum_help) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 1);
  s->ip_summed = IpSummed::kPartial;
  s->csum_start = 64 + 100;  // == data + headlen
  EXPECT_EQ(ops::checksum_help(e.ctx, *s), kEINVAL);
  EXPECT_EQ(s->ip_summed, IpSummed::kPartial);
  EXPECT_EQ(e.calls(Sym::kCsumPartial), 0U);
}

// 6.x: the 2-byte field must lie in the linear part (offset + 2 > headlen is -EINVAL, after the
// sum was computed).
TEST(ChecksumHelp, v6FieldBeyondHeadlenIsEinval_skb_checksum_help) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 1);
  s->ip_summed = IpSummed::kPartial;
  s->csum_start = 64 + 90;
  s->csum_offset = 16;  // 90 + 16 + 2 > headlen 100
  EXPECT_EQ(ops::checksum_help(e.ctx, *s), kEINVAL);
  EXPECT_EQ(s->ip_summed, IpSummed::kPartial);
  EXPECT_EQ(e.cell(Sym::kCsumPartial).summed, 600U - 90U);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
}

// ---- §11 dataref timeline of one 2007 segment (2.6.20) ----------------------------------------

TEST(Timeline2007, SegmentThroughEtunAndIpForward_skb_cow) {
  Env e(V::k2_6_20);
  // 1. sk_stream_alloc_pskb (fclone), reserve H = 192, copy+csum 1448 B (etun: NONE).
  Skb* o = ops::alloc_skb_fclone(e.ctx, 192 + 1448);
  ASSERT_NE(o, nullptr);
  ops::reserve(e.ctx, *o, 192);
  ops::add_data(e.ctx, *o, 1448);
  EXPECT_EQ(e.cell(Sym::kCsumPartialCopyGeneric).fused, 1448U);
  EXPECT_EQ(e.cell(Sym::kCsumPartialCopyGeneric).bytes_copied(), 1448U);
  EXPECT_EQ(e.cell(Sym::kCsumPartialCopyGeneric).bytes_checksummed(), 1448U);
  const DataBuf* x = &o->buf();
  EXPECT_EQ(lo16(*o), 1U);
  EXPECT_EQ(hi16(*o), 0U);
  EXPECT_FALSE(o->cloned_flag());
  // 2. skb_entail -> skb_header_release.
  ops::header_release(e.ctx, *o);
  EXPECT_EQ(lo16(*o), 1U);
  EXPECT_EQ(hi16(*o), 1U);
  EXPECT_TRUE(o->nohdr());
  // 3. tcp_transmit_skb -> skb_clone via the companion (fclone_ref 1 -> 2).
  const auto slab_allocs = e.calls(Sym::kKmemCacheAlloc);
  Skb* c = ops::clone(e.ctx, *o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->fclone(), Fclone::kClone);
  EXPECT_EQ(e.calls(Sym::kKmemCacheAlloc), slab_allocs);
  EXPECT_EQ(x->shinfo.dataref_all(), 2U);
  EXPECT_EQ(x->shinfo.dataref_payload(), 1U);
  EXPECT_TRUE(o->cloned_flag());
  EXPECT_TRUE(c->cloned_flag());
  EXPECT_FALSE(c->nohdr());
  EXPECT_TRUE(c->cloned());
  EXPECT_FALSE(c->header_cloned());
  // 4. Push TCP (32) and IP (20), then the hh header: HR 192 -> 126.
  ops::push(e.ctx, *c, 32);
  ops::set_transport_header(*c, 0);
  ops::push(e.ctx, *c, 20);
  ops::set_network_header(*c, 0);
  ops::push(e.ctx, *c, 14);
  EXPECT_EQ(c->headroom(), 126U);
  EXPECT_EQ(x->shinfo.dataref, 0x00010002U);
  // 5. etun xmit: orphan, eth_type_trans (14 B pull, HR 140), netif_rx.
  ops::orphan(e.ctx, *c);
  ASSERT_TRUE(ops::pull(e.ctx, *c, 14));
  EXPECT_EQ(c->headroom(), 140U);
  EXPECT_EQ(c->len(), 1500U);
  EXPECT_EQ(x->shinfo.dataref, 0x00010002U);
  // 6. ip_forward -> skb_cow(LL_RESERVED_SPACE = 16): skb_cloned -> pskb_expand_head(0, 0) copies
  //    1640 + 164 = 1804 B into a new 2048 B buffer Y.
  const auto kmalloc_bytes = e.cell(Sym::kKmalloc).alloc_bytes;
  ASSERT_EQ(ops::cow(e.ctx, *c, 16), 0);
  EXPECT_EQ(e.cell(Sym::kPskbExpandHead).copied, 1804U);
  EXPECT_EQ(e.cell(Sym::kKmalloc).alloc_bytes - kmalloc_bytes, 2048U);
  EXPECT_EQ(e.cell(Sym::kSkbCow).copied, 0U);  // self time: the copy is pskb_expand_head's
  const DataBuf* y = &c->buf();
  EXPECT_NE(y, x);
  EXPECT_EQ(x->shinfo.dataref_all(), 1U);
  EXPECT_EQ(x->shinfo.dataref_payload(), 1U);
  EXPECT_EQ(y->shinfo.dataref_all(), 1U);
  EXPECT_EQ(y->shinfo.dataref_payload(), 0U);
  EXPECT_FALSE(c->cloned_flag());
  EXPECT_TRUE(o->cloned_flag());
  EXPECT_FALSE(o->cloned());
  EXPECT_EQ(c->headroom(), 140U);
  // 7. ip_decrease_ttl and neigh_hh_output in Y.
  ops::ip_decrease_ttl(e.ctx, *c);
  ops::push(e.ctx, *c, 14);
  EXPECT_POOL_VALID(e);
  // 8. e1000 TX done -> dev_kfree_skb(C): Y freed, the companion goes back, fclone_ref 2 -> 1.
  const auto kfrees = e.calls(Sym::kKfree);
  ops::kfree_skb(e.ctx, *c);
  EXPECT_EQ(e.calls(Sym::kKfree), kfrees + 1);
  EXPECT_EQ(e.cell(Sym::kKfree).free_bytes, 2048U);
  EXPECT_EQ(e.pool.live_pairs(), 1U);
  EXPECT_EQ(e.pool.live_bufs(), 1U);
  EXPECT_EQ(x->shinfo.dataref, 0x00010001U);
  // 9. The ACK frees O: cloned=1 and nohdr, so 0x10001 is subtracted -> 0 -> X freed; the pair
  //    is freed with fclone_ref 1 -> 0.
  ops::kfree_skb(e.ctx, *o);
  EXPECT_EQ(e.calls(Sym::kKfree), kfrees + 2);
  EXPECT_EQ(e.cell(Sym::kKmemCacheFree).free_bytes, 340U);
  EXPECT_TRUE(e.pool.empty());
}

// With the 2007 OpenVZ patch (no skb_cow, no TTL decrement): X stays (2,1) until TX completion.
TEST(Timeline2007, WithThePatchNoCow_ip_forward) {
  Env e(V::k2_6_20);
  Skb* o = ops::alloc_skb_fclone(e.ctx, 192 + 1448);
  ops::reserve(e.ctx, *o, 192);
  ops::add_data(e.ctx, *o, 1448);
  ops::header_release(e.ctx, *o);
  Skb* c = ops::clone(e.ctx, *o);
  const DataBuf* x = &o->buf();
  ops::push(e.ctx, *c, 32);
  ops::push(e.ctx, *c, 20);
  ops::set_network_header(*c, 0);
  ops::push(e.ctx, *c, 14);
  ops::orphan(e.ctx, *c);
  ASSERT_TRUE(ops::pull(e.ctx, *c, 14));
  ops::push(e.ctx, *c, 14);  // neigh_hh_output into the clone's private header area
  EXPECT_EQ(x->shinfo.dataref, 0x00010002U);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
  // "tx" completes: the clone goes, dataref (1,1), companion free again.
  ops::kfree_skb(e.ctx, *c);
  EXPECT_EQ(x->shinfo.dataref, 0x00010001U);
  EXPECT_EQ(e.calls(Sym::kKfree), 0U);
  EXPECT_EQ(e.pool.live_pairs(), 1U);
  ops::kfree_skb(e.ctx, *o);
  EXPECT_EQ(e.calls(Sym::kKfree), 1U);
  EXPECT_EQ(e.calls(Sym::kPskbExpandHead), 0U);
  EXPECT_TRUE(e.pool.empty());
}

// ---- geometry: reserve / put / push / pull / trim (§2.2, kernel-notes §12) -----------------

TEST_P(Geometry, ReserveMovesDataAndTail_skb_reserve) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  const std::uint32_t end = s->end_offset();
  ops::reserve(ctx(), *s, 64);
  EXPECT_EQ(s->headroom(), 64U);
  EXPECT_EQ(s->tail_offset(), 64U);
  EXPECT_EQ(s->len(), 0U);
  EXPECT_EQ(s->tailroom(), end - 64U);
}

TEST_P(Geometry, PutReturnsOldTail_skb_put) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  ops::reserve(ctx(), *s, 64);
  EXPECT_EQ(ops::put(ctx(), *s, 100), 64U);
  EXPECT_EQ(ops::put(ctx(), *s, 10), 164U);
  EXPECT_EQ(s->len(), 110U);
  EXPECT_EQ(s->headlen(), 110U);
  // Exactly up to end is fine.
  const std::uint32_t room = s->tailroom();
  EXPECT_EQ(ops::put(ctx(), *s, room), 174U);
  EXPECT_EQ(s->tailroom(), 0U);
}

TEST_P(Geometry, PutBeyondEndPanics_skb_over_panic) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  EXPECT_EQ(bug_of([&] { ops::put(ctx(), *s, s->end_offset() + 1); }), "skb_over_panic");
  EXPECT_EQ(s->len(), 0U);
}

TEST_P(Geometry, PutOnNonlinearAsserts_SKB_LINEAR_ASSERT) {
  Skb* s = frag_skb(env, 1);
  EXPECT_EQ(bug_of([&] { ops::put(ctx(), *s, 1); }), "SKB_LINEAR_ASSERT");
}

TEST_P(Geometry, PushBelowHeadPanics_skb_under_panic) {
  Skb* s = frag_skb(env, 0);
  ops::push(ctx(), *s, 64);
  EXPECT_EQ(s->headroom(), 0U);
  EXPECT_EQ(s->len(), 164U);
  EXPECT_EQ(bug_of([&] { ops::push(ctx(), *s, 1); }), "skb_under_panic");
}

TEST_P(Geometry, PullMovesData_skb_pull) {
  Skb* s = frag_skb(env, 0);
  ASSERT_TRUE(ops::pull(ctx(), *s, 14));
  EXPECT_EQ(s->headroom(), 78U);
  EXPECT_EQ(s->len(), 86U);
}

// skb_pull returns NULL when len > skb->len, touching nothing and recording nothing.
TEST_P(Geometry, PullBeyondLenReturnsFalse_skb_pull) {
  Skb* s = frag_skb(env, 1);
  const auto before = env.total_calls();
  EXPECT_FALSE(ops::pull(ctx(), *s, 601));
  EXPECT_EQ(s->len(), 600U);
  EXPECT_EQ(s->headroom(), 64U);
  EXPECT_EQ(env.total_calls(), before);
}

// __skb_pull BUGs when the pull would reach the frags.
TEST_P(Geometry, PullIntoFragsBugs___skb_pull) {
  Skb* s = frag_skb(env, 1);
  EXPECT_EQ(bug_of([&] { (void)ops::pull(ctx(), *s, 101); }), "BUG_ON(skb->len < skb->data_len)");
}

TEST_P(Geometry, TrimShortensLinear_skb_trim) {
  Skb* s = frag_skb(env, 0);
  EXPECT_TRUE(ops::trim(ctx(), *s, 40));
  EXPECT_EQ(s->len(), 40U);
  EXPECT_EQ(s->tail_offset(), 104U);
  // Trimming to a longer length does nothing.
  EXPECT_TRUE(ops::trim(ctx(), *s, 90));
  EXPECT_EQ(s->len(), 40U);
}

// __skb_trim on a nonlinear skb: WARN_ON(skb->data_len) and nothing done.
TEST_P(Geometry, TrimOnNonlinearDoesNothing___skb_trim) {
  Skb* s = frag_skb(env, 1);
  EXPECT_FALSE(ops::trim(ctx(), *s, 50));
  EXPECT_EQ(s->len(), 600U);
  EXPECT_EQ(s->data_len(), 500U);
  EXPECT_EQ(s->tail_offset(), 164U);
  EXPECT_EQ(s->shinfo().nr_frags, 1U);
}

// ---- header_release ------------------------------------------------------------------------

// 2.6.20 skb_header_release: BUG_ON(skb->nohdr).
TEST(HeaderRelease, v2620BugsWhenAlreadyNohdr_skb_header_release) {
  Env e(V::k2_6_20);
  Skb* s = tcp_segment(e);
  ops::header_release(e.ctx, *s);
  EXPECT_EQ(bug_of([&] { ops::header_release(e.ctx, *s); }), "BUG_ON(skb->nohdr)");
  EXPECT_EQ(s->shinfo().dataref, 0x00010001U);
}

// 6.x __skb_header_release sets dataref = 1 + (1 << 16) (no BUG on a repeat).
TEST(HeaderRelease, v6xSetsDatarefRatherThanAdding___skb_header_release) {
  Env e(V::k6x);
  Skb* s = tcp_segment(e);
  ops::header_release(e.ctx, *s);
  ops::header_release(e.ctx, *s);
  EXPECT_EQ(s->shinfo().dataref, 0x00010001U);
  EXPECT_TRUE(s->nohdr());
}

// 2.6.20 adds 1 << 16 to whatever dataref is (header_release of a clone's sibling).
TEST(HeaderRelease, v2620AddsPayloadReference_skb_header_release) {
  Env e(V::k2_6_20);
  Skb* s = tcp_segment(e);
  Skb* c = ops::clone(e.ctx, *s);
  ops::header_release(e.ctx, *s);
  EXPECT_EQ(s->shinfo().dataref, 0x00010002U);
  EXPECT_FALSE(c->header_cloned());
}

// ---- skb_unshare / skb_share_check (§3.4) ---------------------------------------------------

// skb_unshare copies a cloned skb (skb_copy: headroom + len) and frees the original.
TEST_P(Unshare, CopiesClonedAndFreesOriginal_skb_unshare) {
  const TcpPair p = tcp_transmit(env);
  Skb* c = p.c;
  const auto kfrees = env.calls(Sym::kKfreeSkb);
  const auto consumes = env.calls(Sym::kConsumeSkb);
  Skb* n = ops::unshare(ctx(), *c);
  ASSERT_NE(n, nullptr);
  EXPECT_NE(n, c);
  EXPECT_FALSE(c->live());
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).copied, v2620() ? 140U + 1500U : 268U + 1500U);
  EXPECT_EQ(n->len(), 1500U);
  EXPECT_EQ(n->headroom(), v2620() ? 140U : 268U);
  EXPECT_FALSE(n->cloned_flag());
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010001U);
  // 2.6.20 kfree_skb; 6.x consume_skb when the copy succeeded.
  EXPECT_EQ(env.calls(Sym::kKfreeSkb), kfrees + (v2620() ? 1U : 0U));
  EXPECT_EQ(env.calls(Sym::kConsumeSkb), consumes + (v2620() ? 0U : 1U));
  EXPECT_POOL_VALID(env);
}

// The original is freed even when the copy fails (kfree_skb in both kernels); NULL returned.
TEST_P(Unshare, FreesOriginalEvenIfCopyFails_skb_unshare) {
  const TcpPair p = tcp_transmit(env);
  Skb* c = p.c;
  const auto kfrees = env.calls(Sym::kKfreeSkb);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::unshare(ctx(), *c), nullptr);
  EXPECT_FALSE(c->live());
  EXPECT_EQ(env.calls(Sym::kKfreeSkb), kfrees + 1);
  EXPECT_EQ(env.calls(Sym::kConsumeSkb), 0U);
  EXPECT_EQ(p.o->shinfo().dataref, 0x00010001U);
  EXPECT_EQ(env.calls(Sym::kSkbCopy), 0U);
}

TEST_P(Unshare, PrivateSkbReturnedAsIs_skb_unshare) {
  Skb* s = frag_skb(env, 0);
  EXPECT_EQ(ops::unshare(ctx(), *s), s);
  EXPECT_EQ(env.calls(Sym::kSkbCopy), 0U);
  EXPECT_TRUE(s->live());
}

// skb_share_check: a shared skb is cloned and the original loses one user.
TEST_P(ShareCheck, ClonesSharedAndDropsUser_skb_share_check) {
  Skb* s = frag_skb(env, 0);
  ops::get(ctx(), *s);
  const auto kfrees = env.calls(Sym::kKfreeSkb);
  Skb* n = ops::share_check(ctx(), *s);
  ASSERT_NE(n, nullptr);
  EXPECT_NE(n, s);
  EXPECT_EQ(s->users(), 1U);
  EXPECT_TRUE(s->live());
  EXPECT_EQ(n->users(), 1U);
  EXPECT_EQ(lo16(*s), 2U);
  EXPECT_TRUE(n->cloned());
  EXPECT_EQ(env.calls(Sym::kKfreeSkb), kfrees + (v2620() ? 1U : 0U));
  EXPECT_EQ(env.calls(Sym::kConsumeSkb), v2620() ? 0U : 1U);
  EXPECT_EQ(env.calls(Sym::kKfreeSkbFree), 0U);
}

TEST_P(ShareCheck, UnsharedReturnedAsIs_skb_share_check) {
  Skb* s = frag_skb(env, 0);
  EXPECT_EQ(ops::share_check(ctx(), *s), s);
  EXPECT_EQ(env.calls(Sym::kSkbClone), 0U);
}

// A failed clone still drops the user (kfree_skb) and returns NULL.
TEST_P(ShareCheck, FailedCloneStillDropsUser_skb_share_check) {
  Skb* s = frag_skb(env, 0);
  ops::get(ctx(), *s);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::share_check(ctx(), *s), nullptr);
  EXPECT_EQ(s->users(), 1U);
  EXPECT_EQ(env.calls(Sym::kKfreeSkb), 1U);
}

// ---- __pskb_pull_tail / skb_linearize (§3.6, kernel-notes §8) --------------------------------

// Tailroom short: expand first with ntail = eat + 128, then copy data_len; the pulled pages are
// put (all of them: 2.6.20's expand refs were dropped with the old buffer).
TEST_P(Linearize, ExpandsWithEatPlus128AndPutsPages_skb_linearize) {
  Page* pg[2];
  Skb* s = frag_skb(env, 2, pg);
  ASSERT_EQ(ops::linearize(ctx(), *s), 0);
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 1U);
  // 2.6.20: eat = 164 + 1000 - 256 = 908 -> SKB_DATA_ALIGN(256 + 1036) = 1344.
  // 6.x: eat = 164 + 1000 - 384 = 780 -> SKB_HEAD_ALIGN(384 + 908) -> kmalloc 2048 -> end 1728.
  EXPECT_EQ(s->end_offset(), v2620() ? 1344U : 1728U);
  EXPECT_EQ(env.cell(Sym::kPskbExpandHead).copied, 164U + shinfo_copy(GetParam(), 2));
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).copied, 1000U);
  EXPECT_EQ(env.calls(Sym::kPskbPullTail), 1U);
  EXPECT_EQ(s->data_len(), 0U);
  EXPECT_EQ(s->len(), 1100U);
  EXPECT_EQ(s->headlen(), 1100U);
  EXPECT_EQ(s->tail_offset(), 1164U);
  EXPECT_EQ(s->shinfo().nr_frags, 0U);
  EXPECT_EQ(env.pool.live_pages(), 0U);
  EXPECT_EQ(env.calls(Sym::kPutPage), v2620() ? 4U : 2U);
  EXPECT_POOL_VALID(env);
}

// Enough tailroom and private: no expand, only the copy.
TEST_P(Linearize, NoExpandWhenRoomAndPrivate___pskb_pull_tail) {
  Skb* s = ops::alloc_skb(ctx(), 1500);
  ops::reserve(ctx(), *s, 64);
  ops::put(ctx(), *s, 100);
  Page* p = ops::alloc_page(ctx());
  ops::add_rx_frag(ctx(), *s, 0, *p, 0, 1000, 1024);
  ASSERT_EQ(ops::linearize(ctx(), *s), 0);
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 0U);
  EXPECT_EQ(env.cell(Sym::kSkbCopyBits).copied, 1000U);
  EXPECT_EQ(s->data_len(), 0U);
  EXPECT_EQ(env.pool.live_pages(), 0U);
}

// Cloned: expand (ntail 0) even with room, so the clone's data is not written.
TEST_P(Linearize, ExpandsWhenCloned___pskb_pull_tail) {
  Skb* s = ops::alloc_skb(ctx(), 1500);
  ops::reserve(ctx(), *s, 64);
  ops::put(ctx(), *s, 100);
  Page* p = ops::alloc_page(ctx());
  ops::add_rx_frag(ctx(), *s, 0, *p, 0, 1000, 1024);
  Skb* c = ops::clone(ctx(), *s);
  const std::uint32_t end = s->end_offset();
  ASSERT_EQ(ops::linearize(ctx(), *s), 0);
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 1U);
  EXPECT_EQ(s->end_offset(), end);
  EXPECT_EQ(s->data_len(), 0U);
  EXPECT_EQ(c->data_len(), 1000U);
  EXPECT_EQ(p->refcount, 1U);  // the clone's reference
  EXPECT_POOL_VALID(env);
}

// A partial pull eats whole frags from the front and trims the boundary frag.
TEST_P(Linearize, PartialPullTrimsBoundaryFrag___pskb_pull_tail) {
  Page* pg[2];
  Skb* s = frag_skb(env, 2, pg);
  ASSERT_TRUE(ops::pull_tail(ctx(), *s, 600));
  EXPECT_EQ(s->shinfo().nr_frags, 1U);
  EXPECT_EQ(s->shinfo().frags[0].page, pg[1]);
  EXPECT_EQ(s->shinfo().frags[0].off, 100U);
  EXPECT_EQ(s->shinfo().frags[0].size, 400U);
  EXPECT_EQ(s->data_len(), 400U);
  EXPECT_EQ(s->headlen(), 700U);
  EXPECT_EQ(env.pool.live_pages(), 1U);
  EXPECT_POOL_VALID(env);
}

// The expand's allocation failing is a refusal: false, nothing pulled.
TEST_P(Linearize, AllocFailureRefuses___pskb_pull_tail) {
  Skb* s = frag_skb(env, 2);
  const auto before = env.total_calls();
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::linearize(ctx(), *s), kENOMEM);
  EXPECT_EQ(s->data_len(), 1000U);
  EXPECT_EQ(env.total_calls(), before);
}

// ---- frags: skb_add_rx_frag / skb_fill_page_desc (kernel-notes §10) -----------------------

// The skb takes over the caller's page reference; freeing the skb puts it.
TEST_P(Frags, AddRxFragTakesOverPageReference_skb_add_rx_frag) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  const std::uint32_t truesize = s->truesize();
  Page* p = ops::alloc_page(ctx());
  ASSERT_EQ(p->refcount, 1U);
  ops::add_rx_frag(ctx(), *s, 0, *p, 128, 1000, 2048);
  EXPECT_EQ(p->refcount, 1U);
  EXPECT_EQ(s->len(), 1000U);
  EXPECT_EQ(s->data_len(), 1000U);
  EXPECT_EQ(s->truesize(), truesize + 2048U);  // the caller's truesize, not size
  EXPECT_EQ(s->shinfo().nr_frags, 1U);
  ops::kfree_skb(ctx(), *s);
  EXPECT_FALSE(p->live);
  EXPECT_EQ(env.cell(Sym::kPutPage).free_bytes, 4096U);
  EXPECT_TRUE(env.pool.empty());
}

// A page shared by two frags (get_page) survives the first put.
TEST_P(Frags, GetPageKeepsPageAcrossFree_get_page) {
  Skb* a = ops::alloc_skb(ctx(), 256);
  Skb* b = ops::alloc_skb(ctx(), 256);
  Page* p = ops::alloc_page(ctx());
  ops::get_page(ctx(), *p);
  ops::add_rx_frag(ctx(), *a, 0, *p, 0, 100, 100);
  ops::add_rx_frag(ctx(), *b, 0, *p, 100, 100, 100);
  EXPECT_EQ(p->refcount, 2U);
  ops::kfree_skb(ctx(), *a);
  EXPECT_TRUE(p->live);
  EXPECT_EQ(p->refcount, 1U);
  ops::kfree_skb(ctx(), *b);
  EXPECT_TRUE(env.pool.empty());
}

// MAX_SKB_FRAGS: 18 on 2.6.20 i386, 17 on 6.x.
TEST_P(Frags, MaxSkbFrags_skb_fill_page_desc) {
  const std::uint32_t max = v2620() ? 18 : 17;
  Skb* s = ops::alloc_skb(ctx(), 256);
  for (std::uint32_t i = 0; i < max; ++i) {
    ops::add_rx_frag(ctx(), *s, i, *ops::alloc_page(ctx()), 0, 10, 10);
  }
  EXPECT_EQ(s->shinfo().nr_frags, max);
  Page* extra = ops::alloc_page(ctx());
  EXPECT_EQ(bug_of([&] { ops::add_rx_frag(ctx(), *s, max, *extra, 0, 10, 10); }),
            "frag index out of range");
  EXPECT_EQ(bug_of([&] { ops::fill_page_desc(ctx(), *s, max, *extra, 0, 10); }),
            "frag index out of range");
  EXPECT_EQ(s->shinfo().nr_frags, max);
  ops::put_page(ctx(), *extra);
  ops::kfree_skb(ctx(), *s);
  EXPECT_TRUE(env.pool.empty());
}

// skb_fill_page_desc sets frags[i] and nr_frags = i + 1 and nothing else: the lengths are the
// caller's (check_skb reports the mismatch until they are updated).
TEST_P(Frags, FillPageDescLeavesLengths_skb_fill_page_desc) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  const std::uint32_t truesize = s->truesize();
  Page* p = ops::alloc_page(ctx());
  ops::fill_page_desc(ctx(), *s, 0, *p, 0, 300);
  EXPECT_EQ(s->shinfo().nr_frags, 1U);
  EXPECT_EQ(s->shinfo().frags[0].size, 300U);
  EXPECT_EQ(s->len(), 0U);
  EXPECT_EQ(s->data_len(), 0U);
  EXPECT_EQ(s->truesize(), truesize);
  EXPECT_EQ(p->refcount, 1U);
  EXPECT_NE(check_skb(*s, env.k), std::nullopt);
}

// Frags of a cloned skb's shared info cannot be filled.
TEST_P(Frags, FillOnClonedBugs_skb_fill_page_desc) {
  Skb* s = ops::alloc_skb(ctx(), 256);
  ops::clone(ctx(), *s);
  Page* p = ops::alloc_page(ctx());
  EXPECT_EQ(bug_of([&] { ops::add_rx_frag(ctx(), *s, 0, *p, 0, 10, 10); }),
            "write to shared data");
}

// ---- ownership: skb_set_owner_w / skb_orphan / sock_wfree ----------------------------------

TEST_P(Owner, WmemBackToZeroOnOrphan_skb_orphan) {
  Sock sk;
  Skb* s = frag_skb(env, 0);
  ops::set_owner_w(ctx(), *s, sk);
  EXPECT_EQ(sk.wmem_alloc, v2620() ? 424 : 960);
  EXPECT_EQ(s->sk(), &sk);
  EXPECT_EQ(s->destructor(), Destructor::kSockWfree);
  ops::orphan(ctx(), *s);
  EXPECT_EQ(sk.wmem_alloc, 0);
  EXPECT_EQ(s->sk(), nullptr);
  EXPECT_EQ(s->destructor(), Destructor::kNone);
  EXPECT_EQ(env.calls(Sym::kSockWfree), 1U);
  // A second orphan has no destructor to run.
  ops::orphan(ctx(), *s);
  EXPECT_EQ(env.calls(Sym::kSockWfree), 1U);
}

TEST_P(Owner, WmemBackToZeroOnFree_sock_wfree) {
  Sock sk;
  Skb* s = frag_skb(env, 1);
  ops::set_owner_w(ctx(), *s, sk);
  EXPECT_EQ(sk.wmem_alloc, static_cast<std::int64_t>(s->truesize()));
  ops::kfree_skb(ctx(), *s);
  EXPECT_EQ(sk.wmem_alloc, 0);
  EXPECT_TRUE(env.pool.empty());
}

TEST_P(Owner, RmemBackToZeroOnFree_sock_rfree) {
  Sock sk;
  Skb* s = frag_skb(env, 0);
  ops::set_owner_r(ctx(), *s, sk);
  EXPECT_EQ(sk.rmem_alloc, v2620() ? 424 : 960);
  EXPECT_EQ(s->destructor(), Destructor::kSockRfree);
  ops::kfree_skb(ctx(), *s);
  EXPECT_EQ(sk.rmem_alloc, 0);
  EXPECT_EQ(env.calls(Sym::kSockRfree), 1U);
}

// 2.6.20 skb_set_owner_w does not orphan first: re-owning would leak the old charge.
TEST(Owner2620, RefusesSetOwnerWOnOwnedSkb_skb_set_owner_w) {
  Env e(V::k2_6_20);
  Sock a;
  Sock b;
  Skb* s = frag_skb(e, 0);
  ops::set_owner_w(e.ctx, *s, a);
  EXPECT_EQ(bug_of([&] { ops::set_owner_w(e.ctx, *s, b); }), "skb_set_owner_w on an owned skb");
  EXPECT_EQ(a.wmem_alloc, 424);
  EXPECT_EQ(b.wmem_alloc, 0);
}

// 6.x skb_set_owner_w orphans first: the old socket is credited, the new one charged.
TEST(Owner6x, SetOwnerWOrphansFirst_skb_set_owner_w) {
  Env e(V::k6x);
  Sock a;
  Sock b;
  Skb* s = frag_skb(e, 0);
  ops::set_owner_w(e.ctx, *s, a);
  ops::set_owner_w(e.ctx, *s, b);
  EXPECT_EQ(a.wmem_alloc, 0);
  EXPECT_EQ(b.wmem_alloc, 960);
  ops::kfree_skb(e.ctx, *s);
  EXPECT_EQ(b.wmem_alloc, 0);
}

// ---- freeing --------------------------------------------------------------------------------

// kfree_skb with users > 1 only drops a user.
TEST_P(Free, KfreeWithUsersDropsOneUser_kfree_skb) {
  Sock sk;
  Skb* s = frag_skb(env, 0);
  ops::set_owner_w(ctx(), *s, sk);
  ops::get(ctx(), *s);
  ops::kfree_skb(ctx(), *s);
  EXPECT_TRUE(s->live());
  EXPECT_EQ(s->users(), 1U);
  EXPECT_NE(sk.wmem_alloc, 0);
  EXPECT_EQ(env.calls(Sym::kKfreeSkbFree), 0U);
  ops::kfree_skb(ctx(), *s);
  EXPECT_FALSE(s->live());
  EXPECT_EQ(env.calls(Sym::kKfreeSkbFree), 1U);
  EXPECT_EQ(sk.wmem_alloc, 0);
  EXPECT_TRUE(env.pool.empty());
}

// skb_release_data: a normal clone subtracts 1, a nohdr skb 0x10001, an uncloned skb frees
// without reading dataref; data goes only at zero.
TEST_P(Free, NohdrSubtractsBoth_skb_release_data) {
  const TcpPair p = tcp_transmit(env);
  const DataBuf* x = &p.o->buf();
  ops::kfree_skb(ctx(), *p.o);  // nohdr: 0x00010002 - 0x00010001
  EXPECT_EQ(x->shinfo.dataref, 1U);
  EXPECT_TRUE(x->live);
  ops::kfree_skb(ctx(), *p.c);  // 1 - 1 = 0
  EXPECT_FALSE(x->live);
  EXPECT_TRUE(env.pool.empty());
}

// __kfree_skb frees at once, without kfree_skb's or consume_skb's entry (so without their
// tracepoints): the destructor runs, a clone's dataref drops, the original's data stays.
TEST_P(Free, KfreeNowFreesWithoutTheTracedEntry___kfree_skb) {
  const TcpPair p = tcp_transmit(env);
  const DataBuf* x = &p.o->buf();
  ops::kfree_skb_now(ctx(), *p.c);
  EXPECT_FALSE(p.c->live());
  EXPECT_TRUE(x->live);
  ops::kfree_skb_now(ctx(), *p.o);
  EXPECT_FALSE(x->live);
  EXPECT_EQ(env.calls(Sym::kKfreeSkbFree), 2U);
  EXPECT_EQ(env.calls(Sym::kKfreeSkb), 0U);
  EXPECT_EQ(env.calls(Sym::kConsumeSkb), 0U);
  EXPECT_TRUE(env.pool.empty());
}

// __kfree_skb does not read users: on a shared skb it would free what another user holds.
TEST_P(Free, KfreeNowOnASharedSkbBugs___kfree_skb) {
  Skb* s = frag_skb(env, 0);
  ops::get(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::kfree_skb_now(ctx(), *s); }), "__kfree_skb on a shared skb");
  EXPECT_TRUE(s->live());
  ops::kfree_skb(ctx(), *s);
  ops::kfree_skb_now(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::kfree_skb_now(ctx(), *s); }), "double free");
  EXPECT_TRUE(env.pool.empty());
}

TEST_P(Free, DoubleFreeBugs_kfree_skb) {
  Skb* s = frag_skb(env, 0);
  ops::kfree_skb(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::kfree_skb(ctx(), *s); }), "double free");
}

TEST_P(Free, DoubleFreeOfFcloneBugs_kfree_skb) {
  Skb* o = ops::alloc_skb_fclone(ctx(), 256);
  Skb* c = ops::clone(ctx(), *o);
  ops::kfree_skb(ctx(), *c);
  EXPECT_EQ(bug_of([&] { ops::kfree_skb(ctx(), *c); }), "double free");
}

TEST_P(Free, UseAfterFreeBugs_kfree_skb) {
  Skb* s = frag_skb(env, 0);
  ops::kfree_skb(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::push(ctx(), *s, 4); }), "use after free");
  EXPECT_EQ(bug_of([&] { ops::clone(ctx(), *s); }), "use after free");
  EXPECT_EQ(bug_of([&] { (void)ops::cow(ctx(), *s, 0); }), "use after free");
}

// ---- skb_split (both versions) ----------------------------------------------------------------

// skb_split_no_header: a cut inside the frags. The frags wholly past it move to skb1; the one it
// falls in is shared, each keeping its part, with a page reference more (skb_frag_ref). Lengths
// follow the cut; truesize does not (the caller, tso_fragment, moves it).
TEST_P(Split, ACutInTheFragsSharesTheFragItFallsIn_skb_split) {
  Page* pages[3] = {};
  Skb* skb = frag_skb(env, 3, pages);  // 100 linear + 3 x 500 in frags
  ASSERT_TRUE(ops::pull(ctx(), *skb, 100));  // a write-queue skb: all its data in frags
  Skb* skb1 = ops::alloc_skb(ctx(), 64);
  const std::uint32_t truesize = skb->truesize();
  ops::split(ctx(), *skb, *skb1, 700);  // inside the second frag
  EXPECT_EQ(skb->len(), 700U);
  EXPECT_EQ(skb->data_len(), 700U);
  EXPECT_EQ(skb1->len(), 800U);
  EXPECT_EQ(skb1->data_len(), 800U);
  ASSERT_EQ(skb->shinfo().nr_frags, 2U);
  ASSERT_EQ(skb1->shinfo().nr_frags, 2U);
  EXPECT_EQ(skb->shinfo().frags[1].size, 200U);
  EXPECT_EQ(skb1->shinfo().frags[0].page, pages[1]);
  EXPECT_EQ(skb1->shinfo().frags[0].off, 200U);
  EXPECT_EQ(skb1->shinfo().frags[0].size, 300U);
  EXPECT_EQ(skb1->shinfo().frags[1].page, pages[2]);
  EXPECT_EQ(pages[1]->refcount, 2U) << "both skbs hold part of the page";
  EXPECT_EQ(pages[2]->refcount, 1U) << "the reference moved with the frag";
  EXPECT_EQ(skb->truesize(), truesize);
  EXPECT_EQ(env.calls(Sym::kSkbSplit), 1U);
  EXPECT_EQ(env.calls(Sym::kGetPage), 1U);
  ops::kfree_skb(ctx(), *skb);
  EXPECT_EQ(pages[1]->refcount, 1U);
  ops::kfree_skb(ctx(), *skb1);
  EXPECT_TRUE(env.pool.empty());
}

// A cut on a frag boundary moves whole frags and takes no reference.
TEST_P(Split, ACutOnAFragBoundaryMovesWholeFrags_skb_split) {
  Page* pages[2] = {};
  Skb* skb = frag_skb(env, 2, pages);
  ASSERT_TRUE(ops::pull(ctx(), *skb, 100));
  Skb* skb1 = ops::alloc_skb(ctx(), 64);
  ops::split(ctx(), *skb, *skb1, 500);
  EXPECT_EQ(skb->shinfo().nr_frags, 1U);
  EXPECT_EQ(skb1->shinfo().nr_frags, 1U);
  EXPECT_EQ(pages[1]->refcount, 1U);
  EXPECT_EQ(env.calls(Sym::kGetPage), 0U);
  ops::kfree_skb(ctx(), *skb);
  ops::kfree_skb(ctx(), *skb1);
  EXPECT_TRUE(env.pool.empty());
}

// skb_split_inside_header: a cut in the linear part copies the linear tail into skb1 (which
// needs the room) and moves every frag.
TEST_P(Split, ACutInTheLinearPartCopiesItsTailAndMovesTheFrags_skb_split) {
  Page* pages[2] = {};
  Skb* skb = frag_skb(env, 2, pages);  // 100 linear + 2 x 500
  Skb* skb1 = ops::alloc_skb(ctx(), 256);
  ops::split(ctx(), *skb, *skb1, 40);
  EXPECT_EQ(skb->len(), 40U);
  EXPECT_EQ(skb->data_len(), 0U);
  EXPECT_EQ(skb->shinfo().nr_frags, 0U);
  EXPECT_EQ(skb1->len(), 60U + 1000U);
  EXPECT_EQ(skb1->headlen(), 60U);
  EXPECT_EQ(skb1->shinfo().nr_frags, 2U);
  EXPECT_EQ(env.cell(Sym::kMemcpy).bytes(), 60U);
  ops::kfree_skb(ctx(), *skb);
  ops::kfree_skb(ctx(), *skb1);
  EXPECT_TRUE(env.pool.empty());
}

// The cut is the skb's own data: a clone's shared skb_shared_info cannot be cut, nor past len.
TEST_P(Split, RefusedForACloneOrPastTheEnd_skb_split) {
  Skb* skb = frag_skb(env, 1);
  Skb* skb1 = ops::alloc_skb(ctx(), 64);
  EXPECT_EQ(bug_of([&] { ops::split(ctx(), *skb, *skb1, 601); }), "skb_split out of range");
  Skb* c = ops::clone(ctx(), *skb);
  EXPECT_EQ(bug_of([&] { ops::split(ctx(), *skb, *skb1, 300); }), "write to shared data");
  for (Skb* s : {c, skb, skb1}) {
    ops::kfree_skb(ctx(), *s);
  }
  EXPECT_TRUE(env.pool.empty());
}

// tcp_add_backlog undoes its __skb_pull with __skb_push when the merge fails: the bytes are the
// skb's own, so a clone whose header another skb shares may take them back (unpull), where a
// push into that header would write to it (push: a bug).
TEST_P(Split, UnpullGivesBackWhatAPullTookEvenFromAHeaderClone___skb_push) {
  Skb* skb = frag_skb(env, 1);
  Skb* c = ops::clone(ctx(), *skb);
  ASSERT_TRUE(c->header_cloned());
  ASSERT_TRUE(ops::pull(ctx(), *c, 32));
  ops::unpull(ctx(), *c, 32);
  EXPECT_EQ(c->len(), 600U);
  EXPECT_EQ(c->headlen(), 100U);
  EXPECT_EQ(bug_of([&] { ops::push(ctx(), *c, 8); }), "write to shared header");
  ops::kfree_skb(ctx(), *c);
  ops::kfree_skb(ctx(), *skb);
  EXPECT_TRUE(env.pool.empty());
}

// ---- skb_try_coalesce (6.x) -------------------------------------------------------------------

// A received skb whose payload is all in frags (its headers pulled): what tcp_queue_rcv offers.
Skb* pulled_frag_skb(Env& e, std::uint32_t nr) {
  Skb* s = frag_skb(e, nr);
  (void)ops::pull(e.ctx, *s, 100);  // 100 linear bytes: always within the skb
  return s;
}

// Frags of an skb nobody else holds move to the tail, references and all; `from` keeps none.
TEST(Coalesce6x, FragsMoveIntoTheTail_skb_try_coalesce) {
  Env e(V::k6x);
  Skb* to = pulled_frag_skb(e, 2);
  Skb* from = pulled_frag_skb(e, 3);
  Page* p0 = from->shinfo().frags[0].page;
  const std::uint32_t to_truesize = to->truesize();
  const std::uint32_t from_truesize = from->truesize();
  std::uint32_t delta = 0;
  ASSERT_TRUE(ops::try_coalesce(e.ctx, *to, *from, &delta));
  EXPECT_EQ(to->shinfo().nr_frags, 5U);
  EXPECT_EQ(to->len(), 2500U);
  EXPECT_EQ(to->data_len(), 2500U);
  EXPECT_EQ(from->shinfo().nr_frags, 0U);
  EXPECT_EQ(p0->refcount, 1U) << "the reference moved with the frag";
  // delta = from's truesize less SKB_TRUESIZE(skb_end_offset(from)): its frags' share.
  EXPECT_EQ(delta, 3U * 512U);
  EXPECT_LT(delta, from_truesize);
  EXPECT_EQ(to->truesize(), to_truesize + delta);
  EXPECT_EQ(e.calls(Sym::kSkbTryCoalesce), 1U);
  ops::kfree_skb_now(e.ctx, *from);
  EXPECT_EQ(p0->refcount, 1U);
  ops::kfree_skb_now(e.ctx, *to);
  EXPECT_TRUE(e.pool.empty());
}

// A cloned `from` keeps its frags: the tail takes a reference on each page (__skb_frag_ref).
TEST(Coalesce6x, ACloneLendsItsFragsWithAReferenceEach_skb_try_coalesce) {
  Env e(V::k6x);
  Skb* to = pulled_frag_skb(e, 1);
  Skb* orig = pulled_frag_skb(e, 2);
  Skb* from = ops::clone(e.ctx, *orig);
  std::uint32_t delta = 0;
  ASSERT_TRUE(ops::try_coalesce(e.ctx, *to, *from, &delta));
  EXPECT_EQ(from->shinfo().nr_frags, 2U);
  EXPECT_EQ(to->shinfo().frags[1].page->refcount, 2U);
  ops::kfree_skb_now(e.ctx, *from);
  ops::kfree_skb_now(e.ctx, *orig);
  EXPECT_EQ(to->shinfo().frags[1].page->refcount, 1U);
  ops::kfree_skb_now(e.ctx, *to);
  EXPECT_TRUE(e.pool.empty());
}

// Refused: a cloned tail (its data is shared), a `from` with a linear part that does not fit
// in the tail's tailroom (a kmalloc'd head cannot be stolen), frags past MAX_SKB_FRAGS.
TEST(Coalesce6x, RefusedForACloneALockedHeadOrTooManyFrags_skb_try_coalesce) {
  Env e(V::k6x);
  std::uint32_t delta = 0;
  Skb* to = pulled_frag_skb(e, 1);
  Skb* tap = ops::clone(e.ctx, *to);
  Skb* from = pulled_frag_skb(e, 1);
  EXPECT_FALSE(ops::try_coalesce(e.ctx, *to, *from, &delta));
  ops::kfree_skb(e.ctx, *tap);
  Skb* linear = frag_skb(e, 1);
  EXPECT_FALSE(ops::try_coalesce(e.ctx, *to, *linear, &delta));
  Skb* many = pulled_frag_skb(e, e.k.max_skb_frags);
  EXPECT_FALSE(ops::try_coalesce(e.ctx, *to, *many, &delta));
  EXPECT_EQ(to->len(), 500U);
  EXPECT_EQ(delta, 0U);
  for (Skb* s : {to, from, linear, many}) {
    ops::kfree_skb(e.ctx, *s);
  }
  EXPECT_TRUE(e.pool.empty());
}

// A linear tail with room takes a short `from` by copy (skb_copy_bits into skb_put).
TEST(Coalesce6x, ALinearTailWithRoomTakesACopy_skb_try_coalesce) {
  Env e(V::k6x);
  Skb* to = ops::alloc_skb(e.ctx, 1024);
  ops::put(e.ctx, *to, 100);
  Skb* from = frag_skb(e, 0);
  ASSERT_GE(to->tailroom(), from->len());
  std::uint32_t delta = 7;
  ASSERT_TRUE(ops::try_coalesce(e.ctx, *to, *from, &delta));
  EXPECT_EQ(delta, 0U);
  EXPECT_EQ(to->len(), 200U);
  EXPECT_EQ(e.cell(Sym::kSkbCopyBits).copied, 100U);
  ops::kfree_skb_now(e.ctx, *from);
  ops::kfree_skb_now(e.ctx, *to);
  EXPECT_TRUE(e.pool.empty());
}

TEST(Coalesce2620, DoesNotExist_skb_try_coalesce) {
  Env e(V::k2_6_20);
  Skb* a = frag_skb(e, 0);
  Skb* b = frag_skb(e, 0);
  std::uint32_t delta = 0;
  EXPECT_THROW((void)ops::try_coalesce(e.ctx, *a, *b, &delta), UnsupportedOp);
}

// 6.x consume_skb has kfree_skb's memory effect, recorded as a consume.
TEST(Free6x, ConsumeSkbFreesLikeKfree_consume_skb) {
  Env e(V::k6x);
  Skb* s = frag_skb(e, 1);
  ops::consume_skb(e.ctx, *s);
  EXPECT_EQ(e.calls(Sym::kConsumeSkb), 1U);
  EXPECT_EQ(e.calls(Sym::kKfreeSkb), 0U);
  EXPECT_TRUE(e.pool.empty());
}

// Page put below zero is a refcount underflow.
TEST_P(Free, PutPageOnFreedPageBugs_put_page) {
  Page* p = ops::alloc_page(ctx());
  ops::put_page(ctx(), *p);
  EXPECT_FALSE(p->live);
  EXPECT_EQ(bug_of([&] { ops::put_page(ctx(), *p); }), "use after free");
}

// ---- write checks -----------------------------------------------------------------------------

// TCP may push headers into its clone after header_release: the header area is private.
TEST_P(Writes, TcpPushIntoCloneAfterHeaderReleasePasses_skb_push) {
  const TcpPair p = tcp_transmit(env);
  ops::push(ctx(), *p.c, 14);
  EXPECT_EQ(p.c->headroom(), v2620() ? 126U : 254U);
  // The clone's private headers may be rewritten too.
  ops::store_bits(ctx(), *p.c, 0, 66);
}

// skb_put into a cloned skb writes the shared buffer.
TEST_P(Writes, PutIntoClonedBugs_skb_put) {
  Skb* s = frag_skb(env, 0);
  Skb* c = ops::clone(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::put(ctx(), *c, 4); }).rfind("write to shared", 0), 0U);
  const TcpPair p = tcp_transmit(env);
  EXPECT_EQ(bug_of([&] { ops::put(ctx(), *p.c, 4); }), "write to shared data");
}

// skb_push into a header-cloned skb (a plain clone) writes a header another skb still uses.
TEST_P(Writes, PushIntoHeaderClonedBugs_skb_push) {
  Skb* s = frag_skb(env, 0);
  Skb* c = ops::clone(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::push(ctx(), *c, 14); }), "write to shared header");
  EXPECT_EQ(c->headroom(), 64U);
}

// The nohdr original must not touch headers while its clone is alive.
TEST_P(Writes, PushIntoNohdrOriginalBugs_skb_push) {
  const TcpPair p = tcp_transmit(env);
  EXPECT_EQ(bug_of([&] { ops::push(ctx(), *p.o, 20); }), "write to shared header");
}

// skb_store_bits into the payload the TCP clone shares with its original.
TEST_P(Writes, StoreIntoSharedPayloadBugs_skb_store_bits) {
  const TcpPair p = tcp_transmit(env);
  EXPECT_EQ(bug_of([&] { ops::store_bits(ctx(), *p.c, 52, 10); }), "write to shared data");
  EXPECT_EQ(bug_of([&] { ops::store_bits(ctx(), *p.o, 0, 10); }), "write to shared data");
}

// skb_store_bits into a frag whose page another skb references (pskb_copy shares pages).
TEST_P(Writes, StoreIntoSharedFragPageBugs_skb_store_bits) {
  Skb* s = frag_skb(env, 1);
  Skb* n = ops::pskb_copy(ctx(), *s);
  ASSERT_NE(n, nullptr);
  ops::store_bits(ctx(), *n, 0, 100);  // its own linear copy
  EXPECT_EQ(bug_of([&] { ops::store_bits(ctx(), *n, 150, 10); }), "write to shared data");
}

// ip_decrease_ttl in the TCP clone's private header area passes; in a plain clone it does not.
TEST_P(Writes, DecreaseTtlInPrivateHeaderPasses_ip_decrease_ttl) {
  const TcpPair p = tcp_transmit(env);
  ops::ip_decrease_ttl(ctx(), *p.c);
  EXPECT_EQ(env.calls(Sym::kIpDecreaseTtl), 1U);
  Skb* s = frag_skb(env, 0);
  ops::set_network_header(*s, 0);
  Skb* c = ops::clone(ctx(), *s);
  EXPECT_EQ(bug_of([&] { ops::ip_decrease_ttl(ctx(), *c); }), "write to shared header");
}

// ---- charging: one Work per call, under the op's own symbol -----------------------------------

class OneCall {
 public:
  explicit OneCall(Env& e) : e_(e) {}
  template <typename F>
  void operator()(Sym s, F&& f) {
    const auto before = e_.calls(s);
    f();
    EXPECT_EQ(e_.calls(s), before + 1) << symbol_name(s);
  }

 private:
  Env& e_;
};

TEST_P(Charging, EachOpRecordsItsOwnSymbolOnce) {
  OneCall one(env);
  OpCtx& c = ctx();
  Sock sk;
  Skb* s = nullptr;
  one(Sym::kAllocSkb, [&] { s = ops::alloc_skb(c, 512); });
  one(Sym::kNetdevAllocSkb, [&] { ops::kfree_skb(c, *ops::netdev_alloc_skb(c, 100)); });
  one(Sym::kSkbReserve, [&] { ops::reserve(c, *s, 64); });
  one(Sym::kSkbPut, [&] { ops::put(c, *s, 100); });
  one(Sym::kSkbPush, [&] { ops::push(c, *s, 14); });
  one(Sym::kSkbPull, [&] { ASSERT_TRUE(ops::pull(c, *s, 14)); });
  one(Sym::kSkbTrim, [&] { ops::trim(c, *s, 90); });
  one(Sym::kSkbGet, [&] { ops::get(c, *s); });
  one(Sym::kKfreeSkb, [&] { ops::kfree_skb(c, *s); });
  one(Sym::kSkbHeaderRelease, [&] { ops::header_release(c, *s); });
  Skb* cl = nullptr;
  one(Sym::kSkbClone, [&] { cl = ops::clone(c, *s); });
  one(Sym::kSkbCow, [&] { ASSERT_EQ(ops::cow(c, *cl, 16), 0); });
  one(Sym::kPskbExpandHead, [&] { ASSERT_EQ(ops::expand_head(c, *s, 0, 0), 0); });
  Skb* cp = nullptr;
  one(Sym::kSkbCopy, [&] { cp = ops::copy(c, *s); });
  one(Sym::kSkbCopyBits, [&] { ops::kfree_skb(c, *ops::copy(c, *s)); });
  Skb* pc = nullptr;
  one(Sym::kPskbCopy, [&] { pc = ops::pskb_copy(c, *s); });
  one(Sym::kSkbUnshare, [&] { EXPECT_EQ(ops::unshare(c, *s), s); });
  one(Sym::kSkbShareCheck, [&] { EXPECT_EQ(ops::share_check(c, *s), s); });
  Page* p = nullptr;
  one(Sym::kAllocPages, [&] { p = ops::alloc_page(c); });
  one(Sym::kGetPage, [&] { ops::get_page(c, *p); });
  one(Sym::kPutPage, [&] { ops::put_page(c, *p); });
  one(Sym::kSkbAddRxFrag, [&] { ops::add_rx_frag(c, *s, 0, *p, 0, 300, 300); });
  one(Sym::kPskbPullTail, [&] { ASSERT_TRUE(ops::pull_tail(c, *s, 100)); });
  one(Sym::kPskbPullTail, [&] { ASSERT_EQ(ops::linearize(c, *s), 0); });
  one(Sym::kSkbFillPageDesc, [&] {
    Page* q = ops::alloc_page(c);
    ops::fill_page_desc(c, *cp, 0, *q, 0, 0);
  });
  one(Sym::kSkbSetOwnerW, [&] { ops::set_owner_w(c, *s, sk); });
  one(Sym::kSkbOrphan, [&] { ops::orphan(c, *s); });
  one(Sym::kSkbSetOwnerR, [&] { ops::set_owner_r(c, *s, sk); });
  one(Sym::kSockRfree, [&] { ops::orphan(c, *s); });
  one(Sym::kSkbChecksum, [&] { ops::checksum(c, *s, 0, 50); });
  one(Sym::kCsumPartial, [&] { ops::checksum(c, *s, 0, 50); });
  one(Sym::kSkbCopyAndCsumBits, [&] { ops::copy_and_csum_bits(c, *s, 0, 50); });
  one(Sym::kCsumPartialCopyGeneric, [&] { ops::copy_and_csum_bits(c, *s, 0, 50); });
  one(Sym::kSkbChecksumHelp, [&] {
    s->ip_summed = IpSummed::kComplete;
    ASSERT_EQ(ops::checksum_help(c, *s), 0);
  });
  one(Sym::kIpDecreaseTtl, [&] {
    ops::set_network_header(*s, 0);
    ops::ip_decrease_ttl(c, *s);
  });
  one(Sym::kIpFastCsum, [&] { ops::ip_fast_csum(c, *s); });
  one(Sym::kSkbStoreBits, [&] { ops::store_bits(c, *s, 0, 10); });
  if (!v2620()) {
    one(Sym::kSkbCowHead, [&] { ASSERT_EQ(ops::cow_head(c, *s, 0), 0); });
    one(Sym::kConsumeSkb, [&] { ops::consume_skb(c, *pc); });
  } else {
    ops::kfree_skb(c, *pc);
  }
  one(Sym::kKfreeSkbFree, [&] { ops::kfree_skb(c, *cl); });
  ops::kfree_skb(c, *cp);
  ops::kfree_skb(c, *s);
  EXPECT_TRUE(env.pool.empty());
}

// Amounts: the copy symbols carry exactly the bytes of their own call.
TEST_P(Charging, AmountsAreSelfTime) {
  Skb* s = frag_skb(env, 0);
  ops::checksum(ctx(), *s, 10, 50);
  EXPECT_EQ(env.cell(Sym::kCsumPartial).summed, 50U);
  EXPECT_EQ(env.cell(Sym::kSkbChecksum).bytes(), 0U);
  ops::copy_and_csum_bits(ctx(), *s, 0, 70);
  EXPECT_EQ(env.cell(Sym::kCsumPartialCopyGeneric).fused, 70U);
  ops::ip_fast_csum(ctx(), *s);
  EXPECT_EQ(env.cell(Sym::kIpFastCsum).summed, 20U);
  ops::store_bits(ctx(), *s, 0, 30);
  EXPECT_EQ(env.cell(Sym::kSkbStoreBits).copied, 30U);
  ops::csum_partial(ctx(), 32);
  EXPECT_EQ(env.cell(Sym::kCsumPartial).summed, 82U);
  ops::csum_partial_copy_generic(ctx(), 5);
  EXPECT_EQ(env.cell(Sym::kCsumPartialCopyGeneric).fused, 75U);
  // skb_add_data: NONE -> fused copy+sum; PARTIAL -> plain copy_from_user.
  Skb* t = ops::alloc_skb(ctx(), 512);
  ops::add_data(ctx(), *t, 100);
  EXPECT_EQ(env.cell(Sym::kCsumPartialCopyGeneric).fused, 175U);
  t->ip_summed = IpSummed::kPartial;
  ops::add_data(ctx(), *t, 40);
  EXPECT_EQ(env.cell(Sym::kCopyFromUser).copied, 40U);
  EXPECT_EQ(env.cell(Sym::kSkbPut).calls, 3U);  // frag_skb's put + two add_data
}

// Queries record nothing.
TEST_P(Charging, QueriesRecordNothing) {
  const TcpPair p = tcp_transmit(env);
  const auto before = env.total_calls();
  const Skb& c = *p.c;
  std::uint64_t sink = c.len() + c.data_len() + c.headlen() + c.headroom() + c.tailroom() +
                       c.truesize() + c.users() + c.hdr_len() + c.end_offset() +
                       c.shinfo().dataref;
  sink += static_cast<std::uint64_t>(c.cloned()) + static_cast<std::uint64_t>(c.header_cloned()) +
          static_cast<std::uint64_t>(c.shared()) + static_cast<std::uint64_t>(c.is_nonlinear());
  EXPECT_GT(sink, 0U);
  EXPECT_EQ(check_skb(c, env.k), std::nullopt);
  EXPECT_EQ(check_pool(env.pool, env.k), std::nullopt);
  EXPECT_EQ(env.total_calls(), before);
}

// Refusals record nothing: failed allocations, failed clones, copies and expands, pull beyond len.
TEST_P(Charging, RefusalsRecordNothing) {
  Skb* s = frag_skb(env, 1);
  const auto before = env.total_calls();
  EXPECT_FALSE(ops::pull(ctx(), *s, 10000));
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::copy(ctx(), *s), nullptr);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::pskb_copy(ctx(), *s), nullptr);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::clone(ctx(), *s), nullptr);
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::expand_head(ctx(), *s, 0, 0), kENOMEM);
  ctx().fail_next_alloc = true;
  EXPECT_FALSE(ops::pull_tail(ctx(), *s, 500));
  EXPECT_EQ(env.total_calls(), before);
  // skb_cow's own call happened; the expand it asked for did not.
  ctx().fail_next_alloc = true;
  EXPECT_EQ(ops::cow(ctx(), *s, 200), kENOMEM);
  EXPECT_EQ(env.total_calls(), before + 1);
  EXPECT_EQ(env.calls(Sym::kSkbCow), 1U);
  EXPECT_EQ(env.calls(Sym::kPskbExpandHead), 0U);
  EXPECT_POOL_VALID(env);
}

// Traced skbs forward their records to the sink; clones inherit tracing.
class CountingSink : public TraceSink {
 public:
  void on_work(const Work& w, std::int64_t, std::uint64_t skb_id) override {
    ++works;
    last_sym = w.sym;
    last_id = skb_id;
  }
  int works = 0;
  Sym last_sym = Sym::kCount;
  std::uint64_t last_id = 0;
};

TEST_P(Charging, OnlyTracedSkbsReachTheSink) {
  CountingSink sink;
  env.ledger.set_trace_sink(&sink);
  Skb* a = frag_skb(env, 0);
  Skb* b = frag_skb(env, 0);
  EXPECT_EQ(sink.works, 0);
  a->set_traced(true);
  ops::push(ctx(), *b, 4);
  EXPECT_EQ(sink.works, 0);
  ops::push(ctx(), *a, 4);
  EXPECT_EQ(sink.works, 1);
  EXPECT_EQ(sink.last_sym, Sym::kSkbPush);
  EXPECT_EQ(sink.last_id, a->id());
  Skb* c = ops::clone(ctx(), *a);
  EXPECT_TRUE(c->traced());
  const int after_clone = sink.works;
  ops::kfree_skb(ctx(), *b);
  EXPECT_EQ(sink.works, after_clone);
  (void)ops::pull(ctx(), *c, 4);
  EXPECT_EQ(sink.last_id, c->id());
}

}  // namespace
}  // namespace skbsim
