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

}  // namespace
}  // namespace skbsim
