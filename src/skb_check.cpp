#include "skbsim/skb_check.hpp"

#include <map>

namespace skbsim {
namespace {

std::string where(const Skb& skb) { return "skb #" + std::to_string(skb.id()) + ": "; }

}  // namespace

std::optional<std::string> check_skb(const Skb& skb, const KernelModel& kernel) {
  if (!skb.live()) {
    return where(skb) + "not live";
  }
  const DataBuf& b = skb.buf();
  if (!b.live) {
    return where(skb) + "data buffer freed under it";
  }
  if (skb.data_offset() > skb.tail_offset() || skb.tail_offset() > skb.end_offset()) {
    return where(skb) + "geometry out of order: data " + std::to_string(skb.data_offset()) +
           " tail " + std::to_string(skb.tail_offset()) + " end " +
           std::to_string(skb.end_offset());
  }
  if (skb.end_offset() > b.end) {
    return where(skb) + "end beyond the buffer";
  }
  if (skb.len() != skb.headlen() + skb.data_len()) {
    return where(skb) + "len " + std::to_string(skb.len()) + " != headlen + data_len";
  }
  const SharedInfo& si = b.shinfo;
  if (si.nr_frags > kernel.max_skb_frags) {
    return where(skb) + "nr_frags beyond MAX_SKB_FRAGS";
  }
  std::uint64_t frag_bytes = 0;
  for (std::uint32_t i = 0; i < si.nr_frags; ++i) {
    const Frag& f = si.frags[i];
    if (f.page == nullptr || !f.page->live || f.page->refcount == 0) {
      return where(skb) + "frag " + std::to_string(i) + " points at a freed page";
    }
    if (f.off + f.size > kernel.page_bytes * 8) {
      return where(skb) + "frag " + std::to_string(i) + " beyond its page";
    }
    frag_bytes += f.size;
  }
  for (const Skb* m = si.frag_list; m != nullptr; m = m->next) {
    if (!m->live()) {
      return where(skb) + "frag_list member freed";
    }
    frag_bytes += m->len();
  }
  if (frag_bytes != skb.data_len()) {
    return where(skb) + "data_len " + std::to_string(skb.data_len()) + " != frag bytes " +
           std::to_string(frag_bytes);
  }
  const std::uint32_t all = si.dataref_all();
  const std::uint32_t payload = si.dataref_payload();
  if (all < 1 || payload > all) {
    return where(skb) + "dataref (" + std::to_string(all) + "," + std::to_string(payload) +
           ") out of range";
  }
  if (!skb.cloned_flag() && all != 1) {
    return where(skb) + "shares its data (lo16 " + std::to_string(all) +
           ") without the cloned flag";
  }
  if (skb.users() < 1) {
    return where(skb) + "users < 1";
  }
  return std::nullopt;
}

std::optional<std::string> check_pool(const SkbPool& pool, const KernelModel& kernel) {
  std::optional<std::string> bad;
  std::map<const DataBuf*, std::uint32_t> refs;
  pool.for_each_live_skb([&](const Skb& s) {
    if (!bad) {
      bad = check_skb(s, kernel);
    }
    ++refs[&s.buf()];
  });
  if (bad) {
    return bad;
  }
  for (const auto& [buf, n] : refs) {
    if (buf->shinfo.dataref_all() != n) {
      return "buffer #" + std::to_string(buf->id) + ": lo16 dataref " +
             std::to_string(buf->shinfo.dataref_all()) + " but " + std::to_string(n) +
             " live skbs use it";
    }
  }
  std::size_t bufs = 0;
  pool.for_each_live_buf([&](const DataBuf&) { ++bufs; });
  if (bufs != refs.size()) {
    return std::to_string(bufs - refs.size()) + " live data buffers have no skb";
  }
  return std::nullopt;
}

}  // namespace skbsim
