#pragma once
// skb_queue.hpp — struct sk_buff_head: an intrusive FIFO of skbs (Boost.Intrusive list through
// Skb::queue_hook), O(1) push/pop, no allocation. An skb is on at most one queue at a time, as in
// the kernel; the queue never owns or frees skbs.

#include <boost/intrusive/list.hpp>

#include "skbsim/skb.hpp"

namespace skbsim {

using SkbQueue = boost::intrusive::list<
    Skb, boost::intrusive::member_hook<Skb, Skb::QueueHook, &Skb::queue_hook>,
    boost::intrusive::constant_time_size<true>>;

}  // namespace skbsim
