// KernelModel: sizes and switches per version (src/kernel.cpp).
#include "skbsim/kernel.hpp"

#include <gtest/gtest.h>

namespace skbsim {
namespace {

TEST(KernelModel, ParsesBothVersionNames) {
  EXPECT_EQ(KernelModel::parse("2.6.20"), KernelVersion::k2_6_20);
  EXPECT_EQ(KernelModel::parse("6.x"), KernelVersion::k6x);
  EXPECT_EQ(KernelModel::parse("6.18"), KernelVersion::k6x);
  EXPECT_EQ(KernelModel::parse("2.6.21"), std::nullopt);
}

// include/linux/kmalloc_sizes.h (2.6.20, 64-byte lines): no 96 cache; 1828 lands in 2048.
TEST(KernelModel, KmallocClasses2620) {
  const auto& k = KernelModel::get(KernelVersion::k2_6_20);
  EXPECT_EQ(k.kmalloc_size(1), 32U);
  EXPECT_EQ(k.kmalloc_size(65), 128U);
  EXPECT_EQ(k.kmalloc_size(129), 192U);
  EXPECT_EQ(k.kmalloc_size(1828), 2048U);
}

TEST(KernelModel, KmallocClasses6x) {
  const auto& k = KernelModel::get(KernelVersion::k6x);
  EXPECT_EQ(k.kmalloc_size(65), 96U);
  EXPECT_EQ(k.kmalloc_size(1025), 2048U);
}

// CHECKSUM_PARTIAL was 1 in 2.6.20 and is 3 in 6.x (kernel-skb-facts.md §5.1).
TEST(KernelModel, IpSummedRenumbered) {
  EXPECT_EQ(KernelModel::get(KernelVersion::k2_6_20).ip_summed_value(IpSummed::kPartial), 1);
  EXPECT_EQ(KernelModel::get(KernelVersion::k6x).ip_summed_value(IpSummed::kPartial), 3);
  EXPECT_EQ(KernelModel::get(KernelVersion::k6x).ip_summed_value(IpSummed::kUnnecessary), 1);
}

// MAX_HEADER sets TCP's headroom and the 6.x small-head cache (net/core/skbuff.c
// SKB_SMALL_HEAD_SIZE = SKB_HEAD_ALIGN(max(MAX_TCP_HEADER, GRO_MAX_HEAD_PAD))). The defaults are
// what configured() gives for their own MAX_HEADER.
TEST(KernelModel, MaxHeaderSetsTcpHeadroomAndTheSmallHeadCache) {
  for (const KernelVersion v : {KernelVersion::k2_6_20, KernelVersion::k6x}) {
    const KernelModel& d = KernelModel::get(v);
    const KernelModel c = KernelModel::configured(v, d.max_header);
    EXPECT_EQ(c.max_tcp_header, d.max_tcp_header);
    EXPECT_EQ(c.small_head_cache_bytes, d.small_head_cache_bytes);
  }
  // A distribution build: LL_MAX_HEADER 128 + 48 for tunnels.
  const KernelModel distro = KernelModel::configured(KernelVersion::k6x, 176);
  EXPECT_EQ(distro.max_tcp_header, 320U);
  EXPECT_EQ(distro.small_head_cache_bytes, 384U + 320U);  // GRO_MAX_HEAD_PAD 368 rounds to 384
  // An Ethernet-only build without tunnels (this project's measured VM: 576-byte objects).
  const KernelModel minimal = KernelModel::configured(KernelVersion::k6x, 32);
  EXPECT_EQ(minimal.max_tcp_header, 192U);
  EXPECT_EQ(minimal.small_head_cache_bytes, 256U + 320U);  // GRO_MAX_HEAD_PAD 224 rounds to 256
  // 2.6.20 has no small-head cache.
  EXPECT_EQ(KernelModel::configured(KernelVersion::k2_6_20, 80).small_head_cache_bytes, 0U);
  EXPECT_EQ(KernelModel::configured(KernelVersion::k2_6_20, 80).max_tcp_header, 256U);
}

TEST(KernelModel, MaxHeaderIsReadBackFromTheSmallHeadObjectSize) {
  EXPECT_EQ(KernelModel::max_header_from_small_head(576), 32U);
  // 704 bytes: 144 (LL_MAX_HEADER 96 and tunnels) and 176 (128 and tunnels) both give it, and the
  // same MAX_TCP_HEADER: the model cannot tell them apart and needs not.
  EXPECT_EQ(KernelModel::max_header_from_small_head(704), 144U);
  EXPECT_EQ(KernelModel::configured(KernelVersion::k6x, 144).max_tcp_header,
            KernelModel::get(KernelVersion::k6x).max_tcp_header);
  // 640 bytes: Ethernet-only with tunnels (80); LL_MAX_HEADER 96 without them gives the same size,
  // and the smaller is taken.
  EXPECT_EQ(KernelModel::max_header_from_small_head(640), 80U);
  EXPECT_EQ(KernelModel::max_header_from_small_head(1000), std::nullopt);
}

}  // namespace
}  // namespace skbsim
