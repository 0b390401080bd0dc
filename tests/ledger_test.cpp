// Ledger, LedgerCell, CostModel and TraceSink (include/skbsim/ledger.hpp, src/ledger.cpp).

#include "skbsim/ledger.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "skbsim/kernel.hpp"
#include "skbsim/skb_ops.hpp"
#include "skbsim/skb_pool.hpp"

namespace skbsim {
namespace {

// A model with round numbers: 1000 ps per skb_copy_bits call, 250/400/500 fs per copied/summed/
// fused byte, 30 ps per page reference.
CostModel round_model() {
  CostModel m;
  m.call_ps[index(Sym::kSkbCopyBits)] = 1000;
  m.call_ps[index(Sym::kCsumPartial)] = 200;
  m.copy_fs_per_byte = 250;
  m.csum_fs_per_byte = 400;
  m.fused_fs_per_byte = 500;
  m.page_ref_ps = 30;
  return m;
}

// Keeps the cost of the last Work the ledger told it of.
struct LastCostSink : TraceSink {
  std::int64_t last = 0;
  void on_work(const Work&, std::int64_t cost_ps, std::uint64_t) override { last = cost_ps; }
};

TEST(Ledger, RecordAccumulatesPerSymbol) {
  Ledger l;
  l.record({.sym = Sym::kSkbCopyBits, .copied = 100, .page_refs = 2, .alloc_bytes = 2048});
  l.record({.sym = Sym::kSkbCopyBits, .copied = 50, .summed = 7, .fused = 3, .free_bytes = 512});
  const LedgerCell& c = l.cell(Sym::kSkbCopyBits);
  EXPECT_EQ(c.calls, 2U);
  EXPECT_EQ(c.copied, 150U);
  EXPECT_EQ(c.summed, 7U);
  EXPECT_EQ(c.fused, 3U);
  EXPECT_EQ(c.page_refs, 2U);
  EXPECT_EQ(c.allocs, 1U);  // only a Work with alloc_bytes > 0 is an allocation
  EXPECT_EQ(c.alloc_bytes, 2048U);
  EXPECT_EQ(c.frees, 1U);
  EXPECT_EQ(c.free_bytes, 512U);
  EXPECT_EQ(c.cost_ps, 0);  // no model attached
  EXPECT_EQ(l.cell(Sym::kCsumPartial).calls, 0U);
  EXPECT_EQ(l.pending_ps(), 0);
}

TEST(Ledger, ZeroWorkStillCountsACall) {
  Ledger l;
  l.record({.sym = Sym::kSkbCow});
  EXPECT_EQ(l.cell(Sym::kSkbCow).calls, 1U);
  EXPECT_EQ(l.cell(Sym::kSkbCow).bytes(), 0U);
  EXPECT_EQ(l.cell(Sym::kSkbCow).allocs, 0U);
  EXPECT_EQ(l.cell(Sym::kSkbCow).frees, 0U);
}

// A fused copy-and-checksum (csum_partial_copy_generic) counts in both bytes_copied and
// bytes_checksummed, once in bytes().
TEST(LedgerCell, FusedCountsInBothCopiedAndChecksummed) {
  Ledger l;
  l.record({.sym = Sym::kCsumPartialCopyGeneric, .fused = 1448});
  l.record({.sym = Sym::kCsumPartialCopyGeneric, .copied = 10, .summed = 20});
  const LedgerCell& c = l.cell(Sym::kCsumPartialCopyGeneric);
  EXPECT_EQ(c.bytes_copied(), 1458U);
  EXPECT_EQ(c.bytes_checksummed(), 1468U);
  EXPECT_EQ(c.bytes(), 1478U);
}

TEST(LedgerCell, AddSumsEveryField) {
  LedgerCell a{.calls = 1,
               .copied = 2,
               .summed = 3,
               .fused = 4,
               .page_refs = 5,
               .allocs = 6,
               .alloc_bytes = 7,
               .frees = 8,
               .free_bytes = 9,
               .handovers = 3,
               .cost_ps = 10};
  const LedgerCell b{.calls = 10,
                     .copied = 20,
                     .summed = 30,
                     .fused = 40,
                     .page_refs = 50,
                     .allocs = 60,
                     .alloc_bytes = 70,
                     .frees = 80,
                     .free_bytes = 90,
                     .handovers = 30,
                     .cost_ps = -100};
  a.add(b);
  EXPECT_EQ(a.calls, 11U);
  EXPECT_EQ(a.copied, 22U);
  EXPECT_EQ(a.summed, 33U);
  EXPECT_EQ(a.fused, 44U);
  EXPECT_EQ(a.page_refs, 55U);
  EXPECT_EQ(a.allocs, 66U);
  EXPECT_EQ(a.alloc_bytes, 77U);
  EXPECT_EQ(a.frees, 88U);
  EXPECT_EQ(a.free_bytes, 99U);
  EXPECT_EQ(a.handovers, 33U);
  EXPECT_EQ(a.cost_ps, -90);
  a.subtract(b);
  EXPECT_EQ(a.handovers, 3U);
  EXPECT_EQ(a.cost_ps, 10);
}

// price = call_ps[sym] + page_refs * page_ref_ps + (copied*copy + summed*csum + fused*fused)/1000.
TEST(CostModel, PriceArithmetic) {
  const CostModel m = round_model();
  // 1000*250 + 100*400 + 10*500 = 295000 fs = 295 ps; + 1000 + 2*30.
  EXPECT_EQ(m.price({.sym = Sym::kSkbCopyBits, .copied = 1000, .summed = 100, .fused = 10,
                     .page_refs = 2}),
            1355);
  // A symbol with no call cost prices bytes only.
  EXPECT_EQ(m.price({.sym = Sym::kMemcpy, .copied = 4000}), 1000);
  // Allocation sizes carry no byte cost.
  EXPECT_EQ(m.price({.sym = Sym::kKmalloc, .alloc_bytes = 2048, .free_bytes = 512}), 0);
}

// With a slowdown set (a long halt's exit owed: CostModel::idle_exit_slowdown) a call costs that
// many times its price more, the excess in its own cell, the pending time and what the trace sink
// is told, until the debt is spent; the time-priced costs measured in that state already are not
// slowed. record_priced counts a call and its bytes at the price it is given, slowed or not.
TEST(Ledger, ASlowdownChargesItsExcessToTheCallsUntilTheDebtIsPaid) {
  LastCostSink sink;
  CostModel m = round_model();
  m.call_ps[index(Sym::kSendIpiBlocked)] = 5000;
  m.skb_handover_ps = 200;
  Ledger l(&m);
  l.set_trace_sink(&sink);
  std::int64_t debt = 1500;
  l.set_slowdown(&debt, 0.5);
  l.record({.sym = Sym::kSendIpiBlocked});  // measured as time: 5000, not slowed
  EXPECT_EQ(debt, 1500);
  l.record({.sym = Sym::kSkbCopyBits}, true, 1, true);  // 1000 + 500, hand-over 200 + 100
  EXPECT_EQ(sink.last, 1800);
  EXPECT_EQ(debt, 900);
  l.record({.sym = Sym::kSkbCopyBits, .copied = 8000});  // 3000 + 1500, of which 900 is left
  EXPECT_EQ(debt, 0);
  l.record({.sym = Sym::kSkbCopyBits});  // paid: 1000
  l.clear_slowdown();
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).cost_ps, 1800 + 3900 + 1000);
  EXPECT_EQ(l.cell(Sym::kSendIpiBlocked).cost_ps, 5000);
  l.record_priced({.sym = Sym::kIdleExit, .copied = 64}, 700);
  EXPECT_EQ(l.cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(l.cell(Sym::kIdleExit).copied, 64U);
  EXPECT_EQ(l.cell(Sym::kIdleExit).cost_ps, 700);
  EXPECT_EQ(l.take_pending_ps(), 5000 + 1800 + 3900 + 1000 + 700);
  Ledger bare;
  bare.record_priced({.sym = Sym::kIdleExit}, 700);  // without a model: counted, not priced
  EXPECT_EQ(bare.cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(bare.cell(Sym::kIdleExit).cost_ps, 0);
}

// With idle_exit_slowdown_decay_ps the rate fades with the slowed work done since the exit: a
// call's excess is the integral of rate * exp(-w / tau) over its work, so two calls of half the
// price cost together what one whole does, each later one less, and every slowed call adds its
// price to the work. Without the work counter the rate holds, as before.
TEST(Ledger, AFadingSlowdownChargesTheIntegralOfItsRateOverEachCall) {
  CostModel m = round_model();  // kSkbCopyBits: 1000 ps a call and 0.5 ps a copied byte
  m.idle_exit_slowdown_decay_ps = 2000;
  const double tau = 2000;
  const auto excess = [&](double w, double p) {
    return 0.8 * tau * std::exp(-w / tau) * -std::expm1(-p / tau);
  };
  Ledger l(&m);
  std::int64_t debt = 1'000'000;
  std::int64_t work = 0;
  l.set_slowdown(&debt, 0.8, &work);
  l.record({.sym = Sym::kSkbCopyBits});  // 1000 at w = 0
  l.record({.sym = Sym::kSkbCopyBits});  // 1000 at w = 1000
  EXPECT_EQ(work, 2000);
  const std::int64_t first = static_cast<std::int64_t>(excess(0, 1000));
  const std::int64_t second = static_cast<std::int64_t>(excess(1000, 1000));
  EXPECT_LT(second, first);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).cost_ps, 2000 + first + second);
  EXPECT_NEAR(static_cast<double>(first + second), excess(0, 2000), 2);  // as one call of 2000
  EXPECT_EQ(debt, 1'000'000 - first - second);
  l.clear_slowdown();
  // The debt caps a fading excess as it caps a held one; the work still advances by the price.
  std::int64_t small = 100;
  l.set_slowdown(&small, 0.8, &work);
  l.record({.sym = Sym::kSkbCopyBits});  // its excess, about 230, capped at the 100 left
  EXPECT_EQ(small, 0);
  EXPECT_EQ(work, 3000);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).cost_ps, 3000 + first + second + 100);
  l.clear_slowdown();
  Ledger held(&m);
  std::int64_t debt2 = 1'000'000;
  held.set_slowdown(&debt2, 0.8);  // no work counter: the rate holds
  held.record({.sym = Sym::kSkbCopyBits});
  held.record({.sym = Sym::kSkbCopyBits});
  EXPECT_EQ(held.cell(Sym::kSkbCopyBits).cost_ps, 2 * 1800);
}

// A hand-over (the first work on an skb another CPU worked on last) is counted in that work's
// cell and adds skb_handover_ps to its cost, the pending time and what the trace sink is told;
// the work's own price is unchanged, and without a model only the count is kept.
TEST(Ledger, AHandoverAddsItsTimeToTheWorkThatPaysIt) {
  LastCostSink sink;
  CostModel m = round_model();
  m.skb_handover_ps = 290'000;
  const Work w{.sym = Sym::kSkbCopyBits, .copied = 1000};
  const std::int64_t plain = m.price(w);
  Ledger l(&m);
  l.set_trace_sink(&sink);
  l.record(w, true, 7, true);
  EXPECT_EQ(sink.last, plain + 290'000);
  l.record(w, true, 7);
  EXPECT_EQ(sink.last, plain);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).calls, 2U);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).handovers, 1U);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).cost_ps, 2 * plain + 290'000);
  EXPECT_EQ(l.pending_ps(), 2 * plain + 290'000);
  Ledger counts_only;
  counts_only.record(w, false, 7, true);
  EXPECT_EQ(counts_only.cell(Sym::kSkbCopyBits).handovers, 1U);
  EXPECT_EQ(counts_only.cell(Sym::kSkbCopyBits).cost_ps, 0);
}

// The femtosecond sum is taken over all byte kinds before the one integer division.
TEST(CostModel, SubPicosecondBytesTruncateOnceAfterSumming) {
  const CostModel m = round_model();
  EXPECT_EQ(m.price({.sym = Sym::kMemcpy, .copied = 3}), 0);               // 750 fs
  EXPECT_EQ(m.price({.sym = Sym::kMemcpy, .copied = 3, .summed = 3}), 1);  // 1950 fs
  EXPECT_EQ(m.price({.sym = Sym::kMemcpy, .fused = 1999}), 999);           // 999500 fs
}

TEST(CostModel, PricingIsDeterministic) {
  const CostModel m = round_model();
  std::vector<Work> works;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    works.push_back({.sym = i % 2 == 0 ? Sym::kSkbCopyBits : Sym::kCsumPartial,
                     .copied = i * 7 % 1500,
                     .summed = i * 13 % 1500,
                     .fused = i % 3,
                     .page_refs = i % 4});
  }
  Ledger a(&m);
  Ledger b(&m);
  for (const Work& w : works) {
    a.record(w);
  }
  for (const Work& w : works) {
    b.record(w);
  }
  EXPECT_EQ(a.pending_ps(), b.pending_ps());
  EXPECT_EQ(a.total().cost_ps, b.total().cost_ps);
  std::int64_t expected = 0;
  for (const Work& w : works) {
    expected += m.price(w);
  }
  EXPECT_EQ(a.pending_ps(), expected);
  EXPECT_EQ(a.total().cost_ps, expected);
  EXPECT_GT(expected, 0);
}

// take_pending_ps hands over the priced time once and resets it; the cells keep their cost.
TEST(Ledger, TakePendingPsResets) {
  const CostModel m = round_model();
  Ledger l;
  l.set_cost_model(&m);
  l.record({.sym = Sym::kSkbCopyBits, .copied = 1000});  // 1000 + 250
  l.record({.sym = Sym::kCsumPartial, .summed = 1000});  // 200 + 400
  EXPECT_EQ(l.pending_ps(), 1850);
  EXPECT_EQ(l.take_pending_ps(), 1850);
  EXPECT_EQ(l.pending_ps(), 0);
  EXPECT_EQ(l.take_pending_ps(), 0);
  l.record({.sym = Sym::kCsumPartial, .summed = 10});  // 200 + 4
  EXPECT_EQ(l.take_pending_ps(), 204);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).cost_ps, 1250);
  EXPECT_EQ(l.cell(Sym::kCsumPartial).cost_ps, 804);
  EXPECT_EQ(l.total().cost_ps, 2054);
}

TEST(Ledger, TotalAddAndClear) {
  const CostModel m = round_model();
  Ledger a(&m);
  Ledger b(&m);
  a.record({.sym = Sym::kSkbCopyBits, .copied = 8});
  b.record({.sym = Sym::kSkbCopyBits, .copied = 4});
  b.record({.sym = Sym::kCsumPartial, .summed = 5});
  a.add(b);
  EXPECT_EQ(a.cell(Sym::kSkbCopyBits).calls, 2U);
  EXPECT_EQ(a.cell(Sym::kSkbCopyBits).copied, 12U);
  EXPECT_EQ(a.cell(Sym::kCsumPartial).summed, 5U);
  EXPECT_EQ(a.total().calls, 3U);
  EXPECT_EQ(a.total().bytes(), 17U);
  EXPECT_EQ(a.pending_ps(), 1002 + 1001 + 202);
  a.clear();
  EXPECT_EQ(a.total().calls, 0U);
  EXPECT_EQ(a.total().cost_ps, 0);
  EXPECT_EQ(a.pending_ps(), 0);
  EXPECT_EQ(b.total().calls, 2U);  // add() leaves the source alone
}

class RecordingSink : public TraceSink {
 public:
  struct Seen {
    Work w;
    std::int64_t cost_ps;
    std::uint64_t skb_id;
  };
  void on_work(const Work& w, std::int64_t cost_ps, std::uint64_t skb_id) override {
    seen.push_back({w, cost_ps, skb_id});
  }
  std::vector<Seen> seen;
};

// Only works recorded for a traced skb reach the sink, with their price.
TEST(TraceSink, ReceivesOnlyTracedWorks) {
  const CostModel m = round_model();
  Ledger l(&m);
  RecordingSink sink;
  l.record({.sym = Sym::kSkbCopyBits, .copied = 1}, true, 7);  // no sink yet
  l.set_trace_sink(&sink);
  l.record({.sym = Sym::kSkbCopyBits, .copied = 1000}, false, 8);
  l.record({.sym = Sym::kSkbCopyBits, .copied = 1000}, true, 9);
  l.record({.sym = Sym::kCsumPartial});
  ASSERT_EQ(sink.seen.size(), 1U);
  EXPECT_EQ(sink.seen[0].skb_id, 9U);
  EXPECT_EQ(sink.seen[0].w.sym, Sym::kSkbCopyBits);
  EXPECT_EQ(sink.seen[0].w.copied, 1000U);
  EXPECT_EQ(sink.seen[0].cost_ps, 1250);
  EXPECT_EQ(l.cell(Sym::kSkbCopyBits).calls, 3U);  // every record counts, traced or not
}

TEST(TraceSink, CostIsZeroWithoutModel) {
  Ledger l;
  RecordingSink sink;
  l.set_trace_sink(&sink);
  l.record({.sym = Sym::kSkbCopyBits, .copied = 1000}, true, 1);
  ASSERT_EQ(sink.seen.size(), 1U);
  EXPECT_EQ(sink.seen[0].cost_ps, 0);
}

// Through the operations: a traced skb's works reach the sink under its id; an untraced skb's
// never do.
TEST(TraceSink, ReceivesOnlyTracedSkbsWorksFromOps) {
  const KernelModel& k = KernelModel::get(KernelVersion::k2_6_20);
  SkbPool pool;
  Ledger l;
  RecordingSink sink;
  l.set_trace_sink(&sink);
  OpCtx ctx(k, pool, l);
  Skb* quiet = ops::alloc_skb(ctx, 512);
  Skb* loud = ops::alloc_skb(ctx, 512);
  loud->set_traced(true);
  ops::reserve(ctx, *quiet, 64);
  ops::put(ctx, *quiet, 100);
  ASSERT_TRUE(sink.seen.empty());
  ops::reserve(ctx, *loud, 64);
  ops::add_data(ctx, *loud, 100);
  ops::copy_and_csum_bits(ctx, *loud, 0, 100);
  ops::kfree_skb(ctx, *quiet);
  ops::kfree_skb(ctx, *loud);
  std::uint64_t fused = 0;
  for (const auto& s : sink.seen) {
    EXPECT_EQ(s.skb_id, loud->id());
    EXPECT_NE(s.w.sym, Sym::kAllocSkb);  // recorded before the skb was traced
    fused += s.w.fused;
  }
  EXPECT_EQ(fused, 200U);
  // reserve, put, csum_partial_copy_generic, skb_copy_and_csum_bits, csum_partial_copy_generic,
  // kfree_skb, __kfree_skb, kfree (head), kmem_cache_free (sk_buff).
  EXPECT_EQ(sink.seen.size(), 9U);
}

}  // namespace
}  // namespace skbsim
