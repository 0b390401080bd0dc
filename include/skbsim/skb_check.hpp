#pragma once
// skb_check.hpp — the model's invariants, checked on demand (like rte_mbuf_check): every test and
// the `skbsim ops` runner call these after each step; the hot path does not.

#include <optional>
#include <string>

#include "skbsim/skb.hpp"
#include "skbsim/skb_pool.hpp"

namespace skbsim {

// Why `skb` is broken, or nullopt: geometry order (data <= tail <= end), len == headlen +
// data_len, data_len == frag bytes + frag_list lengths, nr_frags within MAX_SKB_FRAGS, live frag
// pages with a reference, dataref sane (lo16 >= 1, hi16 <= lo16, lo16 == 1 unless cloned), users
// >= 1, and a live data buffer.
std::optional<std::string> check_skb(const Skb& skb, const KernelModel& kernel);

// The same for every live skb of the pool, plus the pool-wide rule that each data buffer's lo16
// dataref equals the number of live skbs pointing at it (no reference lost or counted twice).
std::optional<std::string> check_pool(const SkbPool& pool, const KernelModel& kernel);

}  // namespace skbsim
