// SkbPool (src/skb_pool.cpp): storage only — live counts, identity, generation on reuse, and no
// leaks once everything is freed through the operations.

#include "skbsim/skb_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "skbsim/kernel.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb_ops.hpp"

namespace skbsim {
namespace {

TEST(SkbPool, StartsEmpty) {
  SkbPool pool;
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(pool.live_skbs(), 0U);
  EXPECT_EQ(pool.live_bufs(), 0U);
  EXPECT_EQ(pool.live_pages(), 0U);
  EXPECT_EQ(pool.live_pairs(), 0U);
}

TEST(SkbPool, LiveCountsFollowTakeAndGive) {
  SkbPool pool;
  Skb* s = pool.take_skb();
  DataBuf* b = pool.take_buf();
  Page* p = pool.take_page();
  FclonePair* f = pool.take_pair();
  EXPECT_EQ(pool.live_skbs(), 2U);  // the slab skb and the pair's original
  EXPECT_EQ(pool.live_bufs(), 1U);
  EXPECT_EQ(pool.live_pages(), 1U);
  EXPECT_EQ(pool.live_pairs(), 1U);
  EXPECT_FALSE(pool.empty());
  pool.activate_companion(&f->skb2);
  EXPECT_EQ(pool.live_skbs(), 3U);
  pool.retire_companion(&f->skb2);
  EXPECT_EQ(pool.live_skbs(), 2U);
  pool.give_skb(s);
  pool.give_buf(b);
  pool.give_page(p);
  pool.give_pair(f);  // also retires the live original
  EXPECT_TRUE(pool.empty());
}

// Fresh objects: a live sk_buff with one user; a pair whose original is ORIG and whose companion
// is not live; a page with one reference; a buffer with dataref 1.
TEST(SkbPool, FreshObjectsAreInitialised) {
  SkbPool pool;
  Skb* s = pool.take_skb();
  EXPECT_TRUE(s->live());
  EXPECT_EQ(s->users(), 1U);
  EXPECT_EQ(s->fclone(), Fclone::kUnavailable);
  EXPECT_EQ(s->len(), 0U);
  FclonePair* f = pool.take_pair();
  EXPECT_TRUE(f->live);
  EXPECT_EQ(f->fclone_ref, 1U);
  EXPECT_TRUE(f->skb1.live());
  EXPECT_EQ(f->skb1.fclone(), Fclone::kOrig);
  EXPECT_FALSE(f->skb2.live());
  pool.activate_companion(&f->skb2);
  EXPECT_TRUE(f->skb2.live());
  EXPECT_EQ(f->skb2.fclone(), Fclone::kClone);
  EXPECT_EQ(f->skb2.users(), 1U);
  Page* p = pool.take_page();
  EXPECT_TRUE(p->live);
  EXPECT_EQ(p->refcount, 1U);
  DataBuf* b = pool.take_buf();
  EXPECT_TRUE(b->live);
  EXPECT_EQ(b->shinfo.dataref, 1U);
  EXPECT_EQ(b->shinfo.nr_frags, 0U);
}

// Ids are unique across every kind of object for the pool's lifetime.
TEST(SkbPool, IdsAreUnique) {
  SkbPool pool;
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 10; ++i) {
    Skb* s = pool.take_skb();
    ids.insert(s->id());
    ids.insert(pool.take_buf()->id);
    ids.insert(pool.take_page()->id);
    ids.insert(pool.take_pair()->skb1.id());
    pool.give_skb(s);  // reuse must not reuse the id
  }
  EXPECT_EQ(ids.size(), 40U);
}

// Storage is reused LIFO and every reuse bumps the generation, so a stale pointer sees a dead or
// different object.
TEST(SkbPool, ReuseBumpsGeneration) {
  SkbPool pool;
  Skb* s = pool.take_skb();
  const std::uint32_t gen = s->gen();
  const std::uint64_t id = s->id();
  pool.give_skb(s);
  EXPECT_FALSE(s->live());
  EXPECT_EQ(s->gen(), gen + 1);
  Skb* again = pool.take_skb();
  EXPECT_EQ(again, s);
  EXPECT_EQ(again->gen(), gen + 1);
  EXPECT_NE(again->id(), id);
  EXPECT_TRUE(again->live());

  DataBuf* b = pool.take_buf();
  const std::uint32_t bgen = b->gen;
  pool.give_buf(b);
  EXPECT_FALSE(b->live);
  EXPECT_EQ(pool.take_buf(), b);
  EXPECT_EQ(b->gen, bgen + 1);

  Page* p = pool.take_page();
  const std::uint32_t pgen = p->gen;
  pool.give_page(p);
  EXPECT_EQ(pool.take_page(), p);
  EXPECT_EQ(p->gen, pgen + 1);

  FclonePair* f = pool.take_pair();
  const std::uint32_t fgen = f->skb1.gen();
  pool.give_pair(f);
  EXPECT_FALSE(f->live);
  EXPECT_EQ(pool.take_pair(), f);
  EXPECT_EQ(f->skb1.gen(), fgen + 1);
}

// More objects than one chunk (256): distinct stable addresses, all live, then all given back.
TEST(SkbPool, GrowsBeyondOneChunk) {
  SkbPool pool;
  std::vector<Skb*> skbs;
  for (int i = 0; i < 600; ++i) {
    skbs.push_back(pool.take_skb());
  }
  EXPECT_EQ(std::set<Skb*>(skbs.begin(), skbs.end()).size(), 600U);
  EXPECT_EQ(pool.live_skbs(), 600U);
  std::size_t visited = 0;
  pool.for_each_live_skb([&](const Skb&) { ++visited; });
  EXPECT_EQ(visited, 600U);
  for (Skb* s : skbs) {
    pool.give_skb(s);
  }
  EXPECT_TRUE(pool.empty());
  visited = 0;
  pool.for_each_live_skb([&](const Skb&) { ++visited; });
  EXPECT_EQ(visited, 0U);
}

// for_each_live_* visits exactly the live objects, pair members included.
TEST(SkbPool, ForEachVisitsOnlyLive) {
  SkbPool pool;
  Skb* a = pool.take_skb();
  Skb* b = pool.take_skb();
  FclonePair* f = pool.take_pair();
  pool.activate_companion(&f->skb2);
  pool.give_skb(a);
  std::set<const Skb*> seen;
  pool.for_each_live_skb([&](const Skb& s) { seen.insert(&s); });
  EXPECT_EQ(seen, (std::set<const Skb*>{b, &f->skb1, &f->skb2}));
  DataBuf* x = pool.take_buf();
  DataBuf* y = pool.take_buf();
  pool.give_buf(x);
  std::set<const DataBuf*> bufs;
  pool.for_each_live_buf([&](const DataBuf& d) { bufs.insert(&d); });
  EXPECT_EQ(bufs, (std::set<const DataBuf*>{y}));
  Page* p = pool.take_page();
  std::size_t pages = 0;
  pool.for_each_live_page([&](const Page& pg) {
    ++pages;
    EXPECT_EQ(&pg, p);
  });
  EXPECT_EQ(pages, 1U);
}

// Everything the operations allocate — fast clones, slab clones, copies, expanded heads, pages —
// goes back once every skb is freed, on both kernels.
class SkbPoolOps : public ::testing::TestWithParam<KernelVersion> {};
INSTANTIATE_TEST_SUITE_P(Kernels, SkbPoolOps,
                         ::testing::Values(KernelVersion::k2_6_20, KernelVersion::k6x),
                         [](const ::testing::TestParamInfo<KernelVersion>& i) {
                           return std::string(i.param == KernelVersion::k2_6_20 ? "v2620" : "v6x");
                         });

TEST_P(SkbPoolOps, NoLeaksAfterFreeingEverything) {
  const KernelModel& k = KernelModel::get(GetParam());
  SkbPool pool;
  Ledger ledger;
  OpCtx ctx(k, pool, ledger);
  for (int round = 0; round < 50; ++round) {
    Skb* o = ops::alloc_skb_fclone(ctx, 1640);
    ops::reserve(ctx, *o, 192);
    ops::add_data(ctx, *o, 1448);
    ops::header_release(ctx, *o);
    Skb* c = ops::clone(ctx, *o);
    ops::push(ctx, *c, 52);
    Skb* tap = ops::clone(ctx, *c);
    ASSERT_EQ(ops::cow(ctx, *c, 16), 0);
    Skb* r = ops::pskb_copy(ctx, *o);
    Skb* f = ops::alloc_skb(ctx, 256);
    for (std::uint32_t i = 0; i < 3; ++i) {
      ops::add_rx_frag(ctx, *f, i, *ops::alloc_page(ctx), 0, 400, 512);
    }
    Skb* fc = ops::clone(ctx, *f);
    Skb* fp = ops::pskb_copy(ctx, *f);
    ASSERT_EQ(ops::linearize(ctx, *f), 0);
    Skb* fcopy = ops::copy(ctx, *fc);
    for (Skb* s : {tap, c, o, r, fc, fp, f, fcopy}) {
      ops::kfree_skb(ctx, *s);
    }
    ASSERT_TRUE(pool.empty()) << "round " << round << ": skbs " << pool.live_skbs() << " bufs "
                              << pool.live_bufs() << " pages " << pool.live_pages() << " pairs "
                              << pool.live_pairs();
  }
  // Allocations and frees balance in the ledger too.
  const LedgerCell t = ledger.total();
  EXPECT_EQ(t.allocs, t.frees);
  EXPECT_EQ(t.alloc_bytes, t.free_bytes);
}

}  // namespace
}  // namespace skbsim
