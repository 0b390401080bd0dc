#include "skbsim/kernel.hpp"

#include <algorithm>
#include <array>
#include <bit>

namespace skbsim {
namespace {

// 2.6.20 on i386, 64-byte cache lines (SMP_CACHE_BYTES for a P6/K7/Core build).
// sizeof(struct sk_buff) is the field sum of include/linux/skbuff.h 2.6.20 with netfilter,
// conntrack, bridge netfilter and NET_SCHED configured (docs/kernel-notes.md §1); the shared info
// is 4+2+2+2+2+4+4+18*8 = 164 bytes (MAX_SKB_FRAGS = 65536/4096 + 2 = 18, skb_frag_t = 8 bytes).
constexpr KernelModel k2620{
    .version = KernelVersion::k2_6_20,
    .name = "2.6.20",
    .arch = "i386",
    .cache_line_bytes = 64,
    .sk_buff_bytes = 168,
    .shinfo_bytes = 164,
    .shinfo_frags_offset = 20,
    .frag_desc_bytes = 8,
    .max_skb_frags = 18,
    .net_skb_pad = 16,
    .page_bytes = 4096,
    .max_header = 32,
    .max_tcp_header = 192,  // SKB_DATA_ALIGN(128 + 32)
    .small_head_cache_bytes = 0,
    .fclone_cache_bytes = 2 * 168 + 4,
    .has_skb_cow_head = false,
    .has_consume_skb = false,
    .slack_is_tailroom = false,
    .shinfo_in_truesize = false,
};

// 6.x (6.12-6.18) on x86_64: sizeof(struct sk_buff) = 232, sizeof(struct skb_shared_info) = 320
// with MAX_SKB_FRAGS = 17 and 16-byte skb_frag_t, frags at offset 48; NET_SKB_PAD =
// max(32, L1_CACHE_BYTES) = 64; skb_small_head_cache objects are SKB_SMALL_HEAD_CACHE_SIZE =
// SKB_HEAD_ALIGN(max(MAX_TCP_HEADER, GRO_MAX_HEAD_PAD = 368)) = 384 + 320 = 704 bytes on a
// distribution config (LL_MAX_HEADER 128, tunnels on) (docs/kernel-notes.md §2.3).
constexpr KernelModel k6x{
    .version = KernelVersion::k6x,
    .name = "6.x",
    .arch = "x86_64",
    .cache_line_bytes = 64,
    .sk_buff_bytes = 232,
    .shinfo_bytes = 320,
    .shinfo_frags_offset = 48,
    .frag_desc_bytes = 16,
    .max_skb_frags = 17,
    .net_skb_pad = 64,
    .page_bytes = 4096,
    .max_header = 176,
    .max_tcp_header = 320,  // L1_CACHE_ALIGN(128 + 176)
    .small_head_cache_bytes = 704,
    .fclone_cache_bytes = 2 * 232 + 8,
    .has_skb_cow_head = true,
    .has_consume_skb = true,
    .slack_is_tailroom = true,
    .shinfo_in_truesize = true,
};

// 2.6.20 include/linux/kmalloc_sizes.h general caches with 64-byte cache lines (4 KiB pages):
// 32, 64, 128, 192, 256, 512, ... 131072 (the 96 cache exists only below 64-byte lines).
// 6.x SLUB kmalloc caches: 8, 16, 32, 64, 96, 128, 192, 256, ... 8192, and past
// KMALLOC_MAX_CACHE_SIZE (two pages) the page allocator, a power of two of pages.
std::uint32_t round_general_cache(std::uint32_t bytes, std::uint32_t smallest,
                                  bool has_96) noexcept {
  if (bytes <= smallest) {
    return smallest;
  }
  if (has_96 && bytes > 64 && bytes <= 96) {
    return 96;
  }
  if (bytes > 128 && bytes <= 192) {
    return 192;
  }
  return std::bit_ceil(bytes);
}

}  // namespace

const KernelModel& KernelModel::get(KernelVersion v) noexcept {
  return v == KernelVersion::k2_6_20 ? k2620 : k6x;
}

KernelModel KernelModel::configured(KernelVersion v, std::uint32_t max_header) noexcept {
  KernelModel k = get(v);
  k.max_header = max_header;
  k.max_tcp_header = k.data_align(128 + max_header);  // 2.6.20 SKB_DATA_ALIGN; 6.x L1_CACHE_ALIGN
  if (v == KernelVersion::k6x) {
    const std::uint32_t gro_max_head_pad = max_header + 128 + k.net_skb_pad;  // NET_IP_ALIGN 0
    std::uint32_t small =
        k.data_align(std::max(k.max_tcp_header, gro_max_head_pad)) + k.data_align(k.shinfo_bytes);
    if (std::has_single_bit(small)) {
      small += k.cache_line_bytes;
    }
    k.small_head_cache_bytes = small;
  }
  return k;
}

std::optional<std::uint32_t> KernelModel::max_header_from_small_head(
    std::uint32_t object_bytes) noexcept {
  for (const std::uint32_t mh : {32U, 80U, 96U, 128U, 144U, 176U}) {
    if (configured(KernelVersion::k6x, mh).small_head_cache_bytes == object_bytes) {
      return mh;
    }
  }
  return std::nullopt;
}

std::optional<KernelVersion> KernelModel::parse(std::string_view name) noexcept {
  if (name == "2.6.20") {
    return KernelVersion::k2_6_20;
  }
  static constexpr std::array<std::string_view, 9> k6names = {
      "6.x", "6", "6.12", "6.13", "6.14", "6.15", "6.16", "6.17", "6.18"};
  for (auto n : k6names) {
    if (name == n) {
      return KernelVersion::k6x;
    }
  }
  return std::nullopt;
}

std::uint32_t KernelModel::kmalloc_size(std::uint32_t bytes) const noexcept {
  const bool old = version == KernelVersion::k2_6_20;
  return round_general_cache(bytes, old ? 32U : 8U, !old);
}

int KernelModel::ip_summed_value(IpSummed s) const noexcept {
  // 2.6.20: NONE 0, PARTIAL 1 (formerly CHECKSUM_HW), UNNECESSARY 2, COMPLETE 3.
  // 6.x:    NONE 0, UNNECESSARY 1, COMPLETE 2, PARTIAL 3.
  const bool old = version == KernelVersion::k2_6_20;
  switch (s) {
    case IpSummed::kNone:
      return 0;
    case IpSummed::kUnnecessary:
      return old ? 2 : 1;
    case IpSummed::kComplete:
      return old ? 3 : 2;
    case IpSummed::kPartial:
      return old ? 1 : 3;
  }
  return 0;
}

std::string_view ip_summed_name(IpSummed s) noexcept {
  switch (s) {
    case IpSummed::kNone:
      return "CHECKSUM_NONE";
    case IpSummed::kUnnecessary:
      return "CHECKSUM_UNNECESSARY";
    case IpSummed::kComplete:
      return "CHECKSUM_COMPLETE";
    case IpSummed::kPartial:
      return "CHECKSUM_PARTIAL";
  }
  return "CHECKSUM_NONE";
}

std::optional<IpSummed> ip_summed_from_name(std::string_view name) noexcept {
  for (auto s : {IpSummed::kNone, IpSummed::kUnnecessary, IpSummed::kComplete,
                 IpSummed::kPartial}) {
    if (ip_summed_name(s) == name) {
      return s;
    }
  }
  return std::nullopt;
}

}  // namespace skbsim
