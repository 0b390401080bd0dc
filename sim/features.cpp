#include "sim/features.hpp"

#include <array>
#include <utility>

namespace skbsim::sim {
namespace {

struct FeatureName {
  std::string_view name;
  Features bit;
  bool in_2620;
  bool in_6x;
};

constexpr std::array<FeatureName, 12> kNames = {{
    {"NETIF_F_SG", feat::kSg, true, true},
    {"NETIF_F_IP_CSUM", feat::kIpCsum, true, true},
    {"NETIF_F_NO_CSUM", feat::kNoCsum, true, false},
    {"NETIF_F_HW_CSUM", feat::kHwCsum, true, true},
    {"NETIF_F_IPV6_CSUM", feat::kIpv6Csum, false, true},
    {"NETIF_F_HIGHDMA", feat::kHighDma, true, true},
    {"NETIF_F_FRAGLIST", feat::kFraglist, true, true},
    {"NETIF_F_LLTX", feat::kLltx, true, true},
    {"NETIF_F_GSO", feat::kGso, true, false},
    {"NETIF_F_TSO", feat::kTso, true, true},
    {"NETIF_F_RXCSUM", feat::kRxCsum, true, true},
    {"NETIF_F_GRO", feat::kGro, false, true},
}};

}  // namespace

std::optional<Features> feature_from_name(std::string_view name, KernelVersion v) {
  for (const auto& f : kNames) {
    if (f.name == name) {
      const bool ok = v == KernelVersion::k2_6_20 ? f.in_2620 : f.in_6x;
      return ok ? std::optional<Features>(f.bit) : std::nullopt;
    }
  }
  return std::nullopt;
}

std::vector<std::string> feature_names(Features f) {
  std::vector<std::string> out;
  for (const auto& n : kNames) {
    if ((f & n.bit) != 0) {
      out.emplace_back(n.name);
    }
  }
  return out;
}

Features fix_features(Features f, KernelVersion v) {
  const bool old = v == KernelVersion::k2_6_20;
  if (old && (f & feat::kAllCsum) == 0) {
    f &= ~feat::kSg;  // 2.6.20: "Dropping NETIF_F_SG since no checksum feature."
  }
  if ((f & feat::kSg) == 0) {
    f &= ~feat::kTso;  // both: "Dropping TSO features since no SG feature."
  }
  if (!old && (f & (feat::kHwCsum | feat::kIpCsum)) == 0) {
    f &= ~feat::kTso;  // 6.x: "Dropping TSO features since no CSUM feature."
  }
  return f;
}

}  // namespace skbsim::sim
