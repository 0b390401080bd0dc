// skb_bench — the per-packet skb operations (simulator speed, items/s). Run with the command in
// the README; the figures there come from it.
#include <benchmark/benchmark.h>

#include "skbsim/skb_ops.hpp"
#include "tests/support/model_env.hpp"

namespace {

using skbsim::KernelModel;
using skbsim::KernelVersion;
using skbsim::Ledger;
using skbsim::OpCtx;
using skbsim::Skb;
using skbsim::SkbPool;
namespace ops = skbsim::ops;

using Fixture = skbsim::testing::ModelEnv;

KernelVersion version_of(const benchmark::State& s) {
  return s.range(0) == 0 ? KernelVersion::k2_6_20 : KernelVersion::k6x;
}

// alloc_skb + kfree_skb of a 1500-byte skb.
void BM_AllocFree(benchmark::State& state) {
  Fixture f(version_of(state));
  for (auto _ : state) {
    Skb* s = ops::alloc_skb(f.ctx, 1500);
    benchmark::DoNotOptimize(s);
    ops::kfree_skb(f.ctx, *s);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocFree)->Arg(0)->Arg(1);

// clone + free of the clone, on a fast-clone original (the TCP transmit pattern).
void BM_CloneFree(benchmark::State& state) {
  Fixture f(version_of(state));
  Skb* o = ops::alloc_skb_fclone(f.ctx, 1640);
  ops::reserve(f.ctx, *o, 192);
  ops::header_release(f.ctx, *o);
  for (auto _ : state) {
    Skb* c = ops::clone(f.ctx, *o);
    benchmark::DoNotOptimize(c);
    ops::kfree_skb(f.ctx, *c);
  }
  ops::kfree_skb(f.ctx, *o);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CloneFree)->Arg(0)->Arg(1);

// One whole round: alloc_skb_fclone, clone, free both (the 50 ns target).
void BM_AllocCloneFreeRound(benchmark::State& state) {
  Fixture f(version_of(state));
  for (auto _ : state) {
    Skb* o = ops::alloc_skb_fclone(f.ctx, 1640);
    Skb* c = ops::clone(f.ctx, *o);
    benchmark::DoNotOptimize(c);
    ops::kfree_skb(f.ctx, *c);
    ops::kfree_skb(f.ctx, *o);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocCloneFreeRound)->Arg(0)->Arg(1);

// skb_cow on a TCP clone: the copy path of the 2007 thread (pskb_expand_head + kmalloc/kfree).
void BM_CowOnClone(benchmark::State& state) {
  Fixture f(version_of(state));
  for (auto _ : state) {
    Skb* o = ops::alloc_skb_fclone(f.ctx, 1640);
    ops::reserve(f.ctx, *o, 192);
    ops::put(f.ctx, *o, 1448);
    ops::header_release(f.ctx, *o);
    Skb* c = ops::clone(f.ctx, *o);
    ops::push(f.ctx, *c, 66);
    benchmark::DoNotOptimize(ops::cow(f.ctx, *c, 16));
    ops::kfree_skb(f.ctx, *c);
    ops::kfree_skb(f.ctx, *o);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CowOnClone)->Arg(0)->Arg(1);

// pskb_expand_head on a cloned skb with N page frags (6.x GSO skbs carry 2-17).
void BM_ExpandHeadWithFrags(benchmark::State& state) {
  Fixture f(KernelVersion::k6x);
  const auto nfrags = static_cast<std::uint32_t>(state.range(0));
  std::vector<skbsim::Page*> pages;
  for (std::uint32_t i = 0; i < nfrags; ++i) {
    pages.push_back(ops::alloc_page(f.ctx));
  }
  for (auto _ : state) {
    Skb* o = ops::alloc_skb_fclone(f.ctx, 320);
    ops::reserve(f.ctx, *o, 320);
    for (std::uint32_t i = 0; i < nfrags; ++i) {
      ops::get_page(f.ctx, *pages[i]);
      ops::add_rx_frag(f.ctx, *o, i, *pages[i], 0, 4096, 4096);
    }
    Skb* c = ops::clone(f.ctx, *o);
    benchmark::DoNotOptimize(ops::expand_head(f.ctx, *c, 0, 0));
    ops::kfree_skb(f.ctx, *c);
    ops::kfree_skb(f.ctx, *o);
  }
  for (auto* p : pages) {
    ops::put_page(f.ctx, *p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ExpandHeadWithFrags)->Arg(2)->Arg(17);

}  // namespace
