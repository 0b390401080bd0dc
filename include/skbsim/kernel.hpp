#pragma once
// kernel.hpp — the kernel a model run follows: one KernelModel per version, passed to every
// operation (never #ifdef). It holds the structure sizes, cache-line size and slab classes that
// decide sizes and truesize, and the switches for behaviour that differs between versions.
//
// 2.6.20 is modelled on i386 (the 2007 thread's host), 6.x on x86_64. Every number below cites
// where it comes from; docs/kernel-notes.md has the derivations.

#include <cstdint>
#include <optional>
#include <string_view>

namespace skbsim {

enum class KernelVersion : std::uint8_t { k2_6_20, k6x };

// skb->ip_summed, by kernel name. The numeric values were renumbered after 2.6.20 (PARTIAL was 1,
// is 3), so the model uses names only; KernelModel::ip_summed_value() gives the number.
enum class IpSummed : std::uint8_t { kNone, kUnnecessary, kComplete, kPartial };

std::string_view ip_summed_name(IpSummed s) noexcept;
std::optional<IpSummed> ip_summed_from_name(std::string_view name) noexcept;

struct KernelModel {
  KernelVersion version;
  std::string_view name;  // "2.6.20" or "6.x"
  std::string_view arch;  // "i386" or "x86_64"

  // SMP_CACHE_BYTES / L1_CACHE_BYTES: SKB_DATA_ALIGN rounds to this.
  std::uint32_t cache_line_bytes;
  // sizeof(struct sk_buff) and sizeof(struct skb_shared_info) on the modelled arch and config.
  std::uint32_t sk_buff_bytes;
  std::uint32_t shinfo_bytes;
  // offsetof(struct skb_shared_info, frags) and sizeof(skb_frag_t): 6.x pskb_expand_head copies
  // the shared info only up to frags[nr_frags].
  std::uint32_t shinfo_frags_offset;
  std::uint32_t frag_desc_bytes;
  std::uint32_t max_skb_frags;  // MAX_SKB_FRAGS
  std::uint32_t net_skb_pad;    // NET_SKB_PAD
  std::uint32_t page_bytes;     // PAGE_SIZE
  // MAX_HEADER (include/linux/netdevice.h): LL_MAX_HEADER (32 for an Ethernet-only build, 96 or
  // 128 with Hyper-V, WLAN or AX.25) plus 48 when IP or IPv6 tunnels are configured. It sets the
  // headroom TCP reserves and, in 6.x, the small-head cache; see configured().
  std::uint32_t max_header;
  // The headroom a TCP skb is allocated with: 2.6.20 sk_stream_alloc_pskb reserves
  // SKB_DATA_ALIGN(MAX_TCP_HEADER), 6.x tcp_stream_alloc_skb MAX_TCP_HEADER; MAX_TCP_HEADER is
  // 128 + MAX_HEADER (2.6.20) or L1_CACHE_ALIGN(128 + MAX_HEADER) (6.x).
  std::uint32_t max_tcp_header;
  // 6.x skb_small_head_cache object size (SKB_SMALL_HEAD_CACHE_SIZE); 0 where there is none.
  std::uint32_t small_head_cache_bytes;
  // sizeof(struct sk_buff_fclones) / the 2.6.20 fclone cache object (two sk_buffs + atomic_t).
  std::uint32_t fclone_cache_bytes;

  // Version switches.
  bool has_skb_cow_head;   // skb_cow_head(): 6.x only (absent from 2.6.20 skbuff.h)
  bool has_consume_skb;    // consume_skb(): 6.x only (appeared around 2.6.30)
  bool slack_is_tailroom;  // 6.x __alloc_skb puts kmalloc slack into tailroom and truesize
  bool shinfo_in_truesize; // 6.x SKB_TRUESIZE counts the shared info

  // The version's model as built for its usual config (2.6.20: an Ethernet-only i386 build,
  // MAX_HEADER 32; 6.x: a distribution x86_64 build, MAX_HEADER 176).
  static const KernelModel& get(KernelVersion v) noexcept;
  // The same with another MAX_HEADER, and what follows from it: max_tcp_header and, in 6.x,
  // SKB_SMALL_HEAD_CACHE_SIZE = SKB_HEAD_ALIGN(max(MAX_TCP_HEADER, GRO_MAX_HEAD_PAD)) (plus a
  // cache line if that is a power of two), GRO_MAX_HEAD_PAD = MAX_HEADER + 128 + NET_SKB_PAD.
  static KernelModel configured(KernelVersion v, std::uint32_t max_header) noexcept;
  // The MAX_HEADER a 6.x kernel was built with, from its skbuff_small_head object size
  // (/sys/kernel/slab/skbuff_small_head/object_size): the smallest of the values the config can
  // give (32, 80, 96, 128, 144, 176) that yields it; nullopt when none does. Where two give the
  // same size they give the same MAX_TCP_HEADER too, so the model does not depend on the choice.
  static std::optional<std::uint32_t> max_header_from_small_head(std::uint32_t object_bytes) noexcept;
  // "2.6.20" or "6.x" (also "6", "6.12" ... "6.18"); nullopt otherwise.
  static std::optional<KernelVersion> parse(std::string_view name) noexcept;

  // SKB_DATA_ALIGN(x).
  std::uint32_t data_align(std::uint32_t x) const noexcept {
    return (x + cache_line_bytes - 1) & ~(cache_line_bytes - 1);
  }
  // The truesize of an skb whose head has `end` usable bytes: 6.x SKB_TRUESIZE(end), 2.6.20
  // end + sizeof(struct sk_buff).
  std::uint32_t skb_truesize(std::uint32_t end) const noexcept {
    return shinfo_in_truesize ? end + data_align(sk_buff_bytes) + data_align(shinfo_bytes)
                              : end + sk_buff_bytes;
  }
  // The size of the kmalloc object a request of `bytes` gets (the general cache it lands in;
  // 6.x kmalloc_size_roundup, including page-allocator sizes past the largest cache).
  std::uint32_t kmalloc_size(std::uint32_t bytes) const noexcept;
  // Bytes pskb_expand_head copies of the shared info for an skb with `nr_frags` frags.
  std::uint32_t shinfo_copy_bytes(std::uint32_t nr_frags) const noexcept {
    return version == KernelVersion::k2_6_20 ? shinfo_bytes
                                             : shinfo_frags_offset + frag_desc_bytes * nr_frags;
  }
  int ip_summed_value(IpSummed s) const noexcept;
};

}  // namespace skbsim
