// check_skb / check_pool (src/skb_check.cpp): healthy states pass, and the broken states the
// public API can reach are reported with their reason.

#include "skbsim/skb_check.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "skbsim/kernel.hpp"
#include "skbsim/ledger.hpp"
#include "skbsim/skb_ops.hpp"
#include "skbsim/skb_pool.hpp"
#include "tests/support/model_env.hpp"

namespace skbsim {
namespace {

using V = KernelVersion;

using Env = testing::ModelEnv;

// The reason text, or "" when healthy.
std::string reason(const std::optional<std::string>& r) { return r ? *r : std::string(); }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class SkbCheck : public ::testing::TestWithParam<V> {
 protected:
  SkbCheck() : env(GetParam()) {}
  Env env;
};

INSTANTIATE_TEST_SUITE_P(Kernels, SkbCheck, ::testing::Values(V::k2_6_20, V::k6x),
                         [](const ::testing::TestParamInfo<V>& i) {
                           return std::string(i.param == V::k2_6_20 ? "v2620" : "v6x");
                         });

// Every state of a TCP lifecycle (header_release, clone, tap clone, cow, frags) is valid, and so
// is the pool after each step.
TEST_P(SkbCheck, HealthyLifecyclePasses) {
  OpCtx& c = env.ctx;
  Skb* o = ops::alloc_skb_fclone(c, 2048);
  ops::reserve(c, *o, 192);
  ops::add_data(c, *o, 1448);
  EXPECT_EQ(check_skb(*o, env.k), std::nullopt);
  ops::header_release(c, *o);
  Skb* cl = ops::clone(c, *o);
  ops::push(c, *cl, 52);
  Skb* tap = ops::clone(c, *cl);
  EXPECT_EQ(check_pool(env.pool, env.k), std::nullopt) << reason(check_pool(env.pool, env.k));
  ASSERT_EQ(ops::cow(c, *cl, 16), 0);
  for (const Skb* s : {o, cl, tap}) {
    EXPECT_EQ(check_skb(*s, env.k), std::nullopt) << reason(check_skb(*s, env.k));
  }
  Skb* f = ops::alloc_skb(c, 256);
  Page* p = ops::alloc_page(c);
  ops::add_rx_frag(c, *f, 0, *p, 0, 1000, 1024);
  EXPECT_EQ(check_skb(*f, env.k), std::nullopt);
  EXPECT_EQ(check_pool(env.pool, env.k), std::nullopt) << reason(check_pool(env.pool, env.k));
  ops::kfree_skb(c, *tap);
  ops::kfree_skb(c, *cl);
  ops::kfree_skb(c, *o);
  ops::kfree_skb(c, *f);
  EXPECT_EQ(check_pool(env.pool, env.k), std::nullopt);
  EXPECT_TRUE(env.pool.empty());
}

// skb_fill_page_desc leaves the lengths to the caller: until they are updated, data_len
// disagrees with the frag bytes.
TEST_P(SkbCheck, FillPageDescWithoutLengthUpdateIsDataLenMismatch) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  Page* p = ops::alloc_page(env.ctx);
  ops::fill_page_desc(env.ctx, *s, 0, *p, 0, 500);
  const std::string r = reason(check_skb(*s, env.k));
  EXPECT_TRUE(contains(r, "data_len 0 != frag bytes 500")) << r;
  EXPECT_TRUE(contains(r, "skb #" + std::to_string(s->id()))) << r;
  EXPECT_TRUE(contains(reason(check_pool(env.pool, env.k)), "data_len 0 != frag bytes 500"));
}

// A put_page that drops the frag's own reference frees the page under the skb.
TEST_P(SkbCheck, FragOnFreedPageIsReported) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  Page* p = ops::alloc_page(env.ctx);
  ops::add_rx_frag(env.ctx, *s, 0, *p, 0, 100, 100);
  ops::put_page(env.ctx, *p);
  const std::string r = reason(check_skb(*s, env.k));
  EXPECT_TRUE(contains(r, "frag 0 points at a freed page")) << r;
}

// A frag whose offset + size runs past its (order-3 at most) page.
TEST_P(SkbCheck, FragBeyondItsPageIsReported) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  Page* p = ops::alloc_page(env.ctx);
  ops::add_rx_frag(env.ctx, *s, 0, *p, 100, 32768, 32768);
  const std::string r = reason(check_skb(*s, env.k));
  EXPECT_TRUE(contains(r, "frag 0 beyond its page")) << r;
}

TEST_P(SkbCheck, FreedSkbIsNotLive) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  ops::kfree_skb(env.ctx, *s);
  EXPECT_TRUE(contains(reason(check_skb(*s, env.k)), "not live"));
}

// A data buffer taken from the pool but given to no skb is a leak.
TEST_P(SkbCheck, PoolReportsBufferWithoutSkb) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  ASSERT_NE(s, nullptr);
  env.pool.take_buf();
  const std::string r = reason(check_pool(env.pool, env.k));
  EXPECT_TRUE(contains(r, "1 live data buffers have no skb")) << r;
}

// Returning a clone's storage without skb_release_data loses a reference: lo16 says 2, one skb
// is left.
TEST_P(SkbCheck, PoolReportsDatarefNotMatchingLiveSkbs) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  Skb* c = ops::clone(env.ctx, *s);
  EXPECT_EQ(check_pool(env.pool, env.k), std::nullopt);
  env.pool.give_skb(c);
  const std::string r = reason(check_pool(env.pool, env.k));
  EXPECT_TRUE(contains(r, "lo16 dataref 2 but 1 live skbs use it")) << r;
  // The remaining skb is itself consistent.
  EXPECT_EQ(check_skb(*s, env.k), std::nullopt);
}

// The checks are queries: they charge nothing.
TEST_P(SkbCheck, ChecksRecordNothing) {
  Skb* s = ops::alloc_skb(env.ctx, 256);
  const auto before = env.ledger.total().calls;
  (void)check_skb(*s, env.k);
  (void)check_pool(env.pool, env.k);
  EXPECT_EQ(env.ledger.total().calls, before);
}

}  // namespace
}  // namespace skbsim
