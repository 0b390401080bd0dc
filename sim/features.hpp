#pragma once
// features.hpp — the NETIF_F_* device features by kernel name, per version
// (include/linux/netdevice.h 2.6.20, include/linux/netdev_features.h 6.x).
//
// One bit set for both versions; which names a version has is checked when a device is defined
// (NO_CSUM does not exist in 6.x, GRO and RXCSUM are not NETIF_F flags in 2.6.20 — there the model
// uses NETIF_F_RXCSUM for the driver's receive-checksum setting, e.g. e1000's rx_csum).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skbsim/kernel.hpp"

namespace skbsim::sim {

using Features = std::uint32_t;

namespace feat {
inline constexpr Features kSg = 1U << 0;
inline constexpr Features kIpCsum = 1U << 1;
inline constexpr Features kNoCsum = 1U << 2;  // 2.6.20 only
inline constexpr Features kHwCsum = 1U << 3;
inline constexpr Features kIpv6Csum = 1U << 4;  // 6.x
inline constexpr Features kHighDma = 1U << 5;
inline constexpr Features kFraglist = 1U << 6;
inline constexpr Features kLltx = 1U << 7;  // a dev->lltx boolean in 6.x
inline constexpr Features kGso = 1U << 8;   // 2.6.20 only: software GSO switch (off by default)
inline constexpr Features kTso = 1U << 9;
inline constexpr Features kRxCsum = 1U << 10;
inline constexpr Features kGro = 1U << 11;  // 6.x
inline constexpr Features kGsoSoftware = kTso;
inline constexpr Features kGenCsum = kNoCsum | kHwCsum;  // NETIF_F_GEN_CSUM (2.6.20)
inline constexpr Features kAllCsum = kIpCsum | kGenCsum | kIpv6Csum;
}  // namespace feat

std::optional<Features> feature_from_name(std::string_view name, KernelVersion v);
std::vector<std::string> feature_names(Features f);

// The combinations the kernel refuses, dropped as it drops them when a device registers or its
// features change. 2.6.20 register_netdevice: SG needs a checksum feature, TSO needs SG. 6.x
// netdev_fix_features: TSO needs SG and a checksum feature that covers IPv4 (HW_CSUM or
// IP_CSUM); SG without any checksum feature is kept (veth with `ethtool -K tx off` still sends
// skbs with frags).
Features fix_features(Features f, KernelVersion v);

}  // namespace skbsim::sim
