// stack.cpp — the IPv4 and device-layer paths, per kernel version:
// ip_queue_xmit / ip_output / ip_finish_output2 (net/ipv4/ip_output.c), dev_queue_xmit with its
// software fix-ups and the qdisc (net/core/dev.c, net/sched/sch_generic.c), netif_rx and the
// NET_RX softirq, ip_rcv (net/ipv4/ip_input.c) and ip_forward (net/ipv4/ip_forward.c).

#include <string>
#include <vector>

#include "sim/net.hpp"
#include "sim/tcp.hpp"
#include "sim/udp.hpp"
#include "skbsim/bug.hpp"

namespace skbsim::sim {
namespace {

constexpr std::uint32_t kIpHeader = 20;
constexpr std::uint32_t kNetdevMaxBacklog = 1000;  // netdev_max_backlog (both versions)
constexpr std::uint32_t kNetdevBudget = 300;       // netdev_budget
constexpr std::uint8_t kMaxForwardHops = 255;      // more hops than any TTL allows: a loop

bool is_gso(const Skb& skb) noexcept { return skb.shinfo().gso_size != 0; }

// netif_needs_gso(): a GSO skb the device cannot segment, or (2.6.20) one not CHECKSUM_PARTIAL.
bool needs_gso(const Net& net, const Device& dev, const Skb& skb) noexcept {
  if (!is_gso(skb)) {
    return false;
  }
  const bool dev_can = (dev.features & feat::kTso) != 0 &&
                       (net.v2620() || (dev.features & (feat::kSg)) != 0);
  return !dev_can || (net.v2620() && skb.ip_summed != IpSummed::kPartial);
}

// Whether the device finishes a CHECKSUM_PARTIAL TCP/IPv4 checksum itself.
bool dev_can_csum(const Device& dev) noexcept {
  return (dev.features & (feat::kNoCsum | feat::kHwCsum | feat::kIpCsum)) != 0;
}

}  // namespace

// ---- output -------------------------------------------------------------------------------------

void Net::ip_queue_xmit(ExecCtx& ctx, Namespace& ns, Skb& skb, Sym entry) {
  charge(ctx, &skb, {.sym = entry});
  PacketMeta& m = meta(skb);
  const Route* r = ns.lookup(m.daddr);
  if (r == nullptr) {
    drop(ctx, skb, DropReason::kNoRoute);
    return;
  }
  OpCtx o = op(ctx);
  ops::push(o, skb, kIpHeader);
  ops::set_network_header(skb, 0);
  ops::ip_fast_csum(o, skb);  // ip_send_check()
  if (patches_.netfilter) {
    charge(ctx, &skb, {.sym = Sym::kNfHookSlow});  // NF_IP_LOCAL_OUT
  }
  charge(ctx, &skb, {.sym = Sym::kIpOutput});
  charge(ctx, &skb, {.sym = Sym::kIpFinishOutput});
  ip_finish_output2(ctx, *r->dev, skb);
}

void Net::ip_finish_output2(ExecCtx& ctx, Device& dev, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kIpFinishOutput2});
  OpCtx o = op(ctx);
  Skb* s = &skb;
  const std::uint32_t need = ll_reserved_space(dev);
  if (dev.hard_header_len > 0 && s->headroom() < need) {
    // skb_realloc_headroom(): a clone given a bigger private head, the original freed.
    Skb* n = ops::clone(o, *s);
    if (n == nullptr || ops::expand_head(o, *n, kernel_.data_align(need - s->headroom()), 0) != 0) {
      if (n != nullptr) {
        ops::kfree_skb(o, *n);
      }
      drop(ctx, *s, DropReason::kQdiscFull);
      return;
    }
    ops::kfree_skb(o, *s);
    s = n;
  }
  if (dev.hard_header_len > 0) {
    // neigh_hh_output(): the cached hard header, copied 16-byte aligned in front of data.
    ops::push(o, *s, dev.hard_header_len);
    ops::set_mac_header(*s, 0);
    charge(ctx, s, {.sym = Sym::kNeighHhOutput, .copied = (dev.hard_header_len + 15U) & ~15U});
  }
  dev_queue_xmit(ctx, dev, *s);
}

namespace {

// skb_segment() + the TCP/IPv4 GSO callbacks: one skb per MSS. Headers (mac to TCP end) are
// copied into each new skb; the payload is referenced (SG) or copied-and-summed (no SG, one fused
// pass); without checksum offload 6.x sums each segment's payload. The original is freed.
void gso_segment(Net& net, ExecCtx& ctx, Device& dev, Skb& skb, std::vector<Skb*>& out) {
  OpCtx o = net.op(ctx);
  net.charge(ctx, &skb, {.sym = Sym::kSkbGsoSegment});
  const PacketMeta m0 = meta(skb);
  const std::uint32_t mss = skb.shinfo().gso_size;
  const std::uint32_t doffset = skb.transport_header + 32U - skb.data_offset();  // to TCP end
  const std::uint32_t payload = skb.len() - doffset;
  const bool sg = (dev.features & feat::kSg) != 0;
  const bool csum = dev_can_csum(dev) && skb.ip_summed == IpSummed::kPartial;
  // Whether each segment leaves its checksum to the device (CHECKSUM_PARTIAL, as the GSO skb
  // was). 2.6.20's skb_segment sums a linear copy whatever the device can do; 6.x only when the
  // device cannot sum.
  const bool partial = csum && (sg || !net.v2620());
  const std::uint32_t headroom = skb.headroom();
  std::uint32_t frag_i = 0;
  std::uint32_t frag_off = 0;
  std::uint32_t done = 0;
  for (std::uint32_t seg = 0; done < payload; ++seg) {
    const std::uint32_t len = std::min(mss, payload - done);
    Skb* n = ops::alloc_skb(o, headroom + doffset + (sg ? 0U : len));
    if (n == nullptr) {
      break;
    }
    ops::reserve(o, *n, headroom);
    ops::put(o, *n, doffset);
    n->alloc_cpu = skb.alloc_cpu;  // 6.x skb_segment: __copy_skb_header(nskb, head_skb)
    PacketMeta& m = meta(*n);
    m = m0;
    m.seq = m0.seq + done;
    m.end_seq = m.seq + len;
    if (done + len < payload) {
      m.flags &= static_cast<std::uint8_t>(~kFlagPsh);  // tcp_gso_segment: PSH on the last only
    }
    m.trace_seg = m0.trace_seg + seg;
    n->set_traced(net.traced_segment() != 0 && m.trace_seg == net.traced_segment());
    n->protocol = skb.protocol;
    n->dev = skb.dev;
    ops::set_mac_header(*n, 0);
    ops::set_network_header(*n, static_cast<std::int32_t>(skb.network_header - skb.data_offset()));
    ops::set_transport_header(*n,
                              static_cast<std::int32_t>(skb.transport_header - skb.data_offset()));
    net.charge(ctx, n, {.sym = Sym::kSkbSegment, .copied = doffset});
    if (!sg) {
      ops::put(o, *n, len);
      // The payload copied into the head: plain (skb_copy_bits) when the segment leaves its sum
      // to the device, else copied and summed in one pass (skb_copy_and_csum_bits).
      net.charge(ctx, n, partial ? Work{.sym = Sym::kSkbCopyBits, .copied = len}
                                 : Work{.sym = Sym::kCsumPartialCopyGeneric, .fused = len});
    } else {
      // Reference the payload's page ranges (skb_frag_ref / get_page), frag by frag; the segment's
      // truesize grows by the bytes referenced (skb_segment: "nskb->truesize += nskb->data_len").
      std::uint32_t left = len;
      std::uint32_t i = 0;
      const SharedInfo& si = skb.shinfo();
      while (left > 0 && frag_i < si.nr_frags) {
        const Frag& f = si.frags[frag_i];
        const std::uint32_t take = std::min(left, f.size - frag_off);
        ops::get_page(o, *f.page);
        ops::add_rx_frag(o, *n, i++, *f.page, f.off + frag_off, take, take);
        left -= take;
        frag_off += take;
        if (frag_off == f.size) {
          ++frag_i;
          frag_off = 0;
        }
      }
    }
    if (partial) {
      n->ip_summed = IpSummed::kPartial;
      n->csum_start = n->transport_header;
      n->csum_offset = 16;
    } else {
      n->ip_summed = IpSummed::kNone;
      if (sg) {
        ops::checksum(o, *n, doffset, len);  // the segment's payload, summed in software
      }
    }
    ops::ip_fast_csum(o, *n);  // inet_gso_segment: each segment's IP header checksum
    if (n->ip_summed != IpSummed::kPartial) {
      ops::csum_partial(o, 32);  // tcp_gso_segment: the TCP header folded in
    }
    out.push_back(n);
    done += len;
  }
  net.free_skb(ctx, skb);
}

}  // namespace

void Net::dev_queue_xmit(ExecCtx& ctx, Device& dev, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kDevQueueXmit});
  hop(ctx, skb, "dev_queue_xmit ", dev.name());
  OpCtx o = op(ctx);
  // Software fix-ups (2.6.20 dev_queue_xmit; 6.x validate_xmit_skb). A GSO skb the device cannot
  // take is segmented (2.6.20: in dev_hard_start_xmit) and each segment goes on alone.
  thread_local std::vector<Skb*> segs;
  segs.clear();
  if (needs_gso(*this, dev, skb)) {
    gso_segment(*this, ctx, dev, skb, segs);
  } else {
    if (skb.shinfo().frag_list != nullptr && (dev.features & feat::kFraglist) == 0) {
      (void)ops::linearize(o, skb);
    }
    if (skb.shinfo().nr_frags > 0 && (dev.features & feat::kSg) == 0) {
      (void)ops::linearize(o, skb);
    }
    if (skb.ip_summed == IpSummed::kPartial && !dev_can_csum(dev)) {
      if (!v2620()) {
        charge(ctx, &skb, {.sym = Sym::kValidateXmitSkb});
      }
      (void)ops::checksum_help(o, skb);
    }
    segs.push_back(&skb);
  }
  const std::vector<Skb*> batch = segs;
  for (Skb* s : batch) {
    if (dev.tx_queue_len == 0) {
      // noqueue (virtual devices): dev_hard_start_xmit directly.
      charge(ctx, s, {.sym = Sym::kDevHardStartXmit});
      count_hop();
      start_xmit(dev, *s);
      dev.xmit(*this, ctx, *s);
      continue;
    }
    if (dev.qdisc.size() >= dev.tx_queue_len) {
      drop(ctx, *s, DropReason::kQdiscFull);
      continue;
    }
    charge(ctx, s, {.sym = Sym::kQdiscEnqueue});
    dev.qdisc.push_back(*s);
  }
  if (dev.tx_queue_len != 0) {
    qdisc_run(ctx, dev);
  }
}

void Net::start_xmit(Device& dev, const Skb& skb) {
  dev.counters.xmit.count(skb);
  if (xmit_stamp_armed_) {
    xmit_stamp_ = engine_.task_clock();
    xmit_stamp_armed_ = false;
  }
}

void Net::qdisc_run(ExecCtx& ctx, Device& dev) {
  while (!dev.queue_stopped && !dev.qdisc.empty()) {
    Skb& s = dev.qdisc.front();
    charge(ctx, &s, {.sym = Sym::kQdiscRestart});
    charge(ctx, &s, {.sym = Sym::kDevHardStartXmit});
    dev.qdisc.pop_front();
    start_xmit(dev, s);  // a requeued skb is counted again, as the tracepoint does
    if (!dev.xmit(*this, ctx, s)) {
      dev.qdisc.push_front(s);  // requeue; the driver stopped the queue
      dev.queue_stopped = true;
      return;
    }
    count_hop();
  }
}

// ---- receive ------------------------------------------------------------------------------------

void Net::netif_rx(ExecCtx& ctx, Device& dev, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kNetifRx});
  dev.counters.rx.count(skb);
  Host& host = host_of(ctx);
  Softnet& sn = host.softnet.at(ctx.cpu().index());
  meta(skb).in_dev = &dev;
  skb.dev = dev.index;
  if (sn.backlog.size() >= kNetdevMaxBacklog) {
    drop(ctx, skb, DropReason::kBacklogFull);
    return;
  }
  sn.backlog.push_back(skb);
  raise_net_rx(ctx.cpu(), sn);
}

void Net::raise_net_rx(Cpu& cpu, Softnet& sn) {
  if (sn.raised) {
    return;
  }
  sn.raised = true;
  sn.run_started = false;
  sn.run_left = kNetdevBudget;
  cpu.submit({sn.ctx.get(), [this, &sn] { net_rx_action(sn); }});
}

// One NET_RX run (do_softirq -> net_rx_action -> process_backlog) takes up to netdev_budget
// packets, one task each: what a packet hands on (a wake-up of a reader on another CPU, the next
// hop) happens when that packet's work is done, not at the end of the whole run, so a reader can
// start on the first packets while the run goes on. The run's entry costs are paid once.
void Net::net_rx_action(Softnet& sn) {
  ExecCtx& ctx = *sn.ctx;
  if (!sn.run_started) {
    sn.run_started = true;
    net_rx_begin(sn);
    if (!sn.backlog.empty()) {  // (a run raised only to flush, by a kick, polls nothing)
      charge(ctx, Sym::kProcessBacklog);
    }
  }
  if (!sn.backlog.empty() && sn.run_left > 0) {
    --sn.run_left;
    Skb& s = sn.backlog.front();
    sn.backlog.pop_front();
    netif_receive_skb(ctx, *meta(s).in_dev, s);
    if (ctx.cpu().queued_next(Level::kSoftIrq)) {
      // The packet's work goes on in a task of its own (tcp_v4_rcv): whether the run goes on is
      // decided after it, once what it sent back through this CPU's backlog is there.
      ctx.cpu().submit_next({&ctx, [this, &sn] { net_rx_next(sn); }});
      return;
    }
  }
  net_rx_next(sn);
}

// After a packet: the next one in a task of its own, or the run's end.
void Net::net_rx_next(Softnet& sn) {
  ExecCtx& ctx = *sn.ctx;
  if (!sn.backlog.empty() && sn.run_left > 0) {
    ctx.cpu().submit({&ctx, [this, &sn] { net_rx_action(sn); }});
    return;
  }
  skb_defer_free_flush(sn);  // and once more when no poll is left
  sn.raised = false;
  if (!sn.backlog.empty()) {
    raise_net_rx(ctx.cpu(), sn);
  }
}

void Net::net_rx_begin(Softnet& sn) {
  charge(*sn.ctx, Sym::kDoSoftirq);
  charge(*sn.ctx, Sym::kNetRxAction);
  skb_defer_free_flush(sn);  // net_rx_action: before each poll
}

// 6.x skb_defer_free_flush: "if (llist_empty(&sdn->defer_list)) continue; atomic_long_set(
// &sdn->defer_count, 0);" then napi_consume_skb on each, which traces consume_skb.
void Net::skb_defer_free_flush(Softnet& sn) {
  if (sn.defer_list.empty()) {
    return;
  }
  sn.defer_count = 0;
  OpCtx o = op(*sn.ctx);
  while (!sn.defer_list.empty()) {
    Skb& s = sn.defer_list.front();
    sn.defer_list.pop_front();
    ops::consume_skb(o, s);
  }
}

void Net::netif_receive_skb(ExecCtx& ctx, Device& dev, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kNetifReceiveSkb});
  meta(skb).in_dev = &dev;
  // A bridge port's frames go to the bridge (2.6.20 handle_bridge, 6.x the rx_handler).
  if (dev.master != nullptr && dev.master->handle_frame(*this, ctx, dev, skb)) {
    return;
  }
  ip_rcv(ctx, dev, skb);
}

void Net::ip_rcv(ExecCtx& ctx, Device& dev, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kIpRcv});
  Namespace& ns = *dev.ns;
  hop(ctx, skb, "ip_rcv ", ns.name, " via ", dev.name());
  OpCtx o = op(ctx);
  Skb* s = ops::share_check(o, skb);
  if (s == nullptr) {
    return;
  }
  ops::set_network_header(*s, 0);
  ops::ip_fast_csum(o, *s);
  if (!v2620() && s->sk() != nullptr) {
    ops::orphan(o, *s);  // 6.x ip_rcv_core: skb_orphan ("because of tproxy")
  }
  if (patches_.netfilter) {
    charge(ctx, s, {.sym = Sym::kNfHookSlow});  // NF_IP_PRE_ROUTING
  }
  charge(ctx, s, {.sym = Sym::kIpRcvFinish});
  charge(ctx, s, {.sym = Sym::kIpRouteInput});
  const PacketMeta& m = meta(*s);
  if (ns.is_local(m.daddr)) {
    local_deliver(ctx, ns, *s);
  } else if (ns.ip_forward) {
    ip_forward(ctx, ns, dev, *s);
  } else {
    drop(ctx, *s, DropReason::kForwardingOff);
  }
}

void Net::local_deliver(ExecCtx& ctx, Namespace& ns, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kIpLocalDeliver});
  if (patches_.netfilter) {
    charge(ctx, &skb, {.sym = Sym::kNfHookSlow});  // NF_IP_LOCAL_IN
  }
  OpCtx o = op(ctx);
  (void)ops::pull(o, skb, kIpHeader);
  ops::set_transport_header(skb, 0);
  const PacketMeta& m = meta(skb);
  if (m.proto == 17) {
    for (UdpSock* u : ns.udp_sockets) {
      if (u->matches(m)) {
        udp_rcv(*this, ctx, *u, skb);
        return;
      }
    }
  } else {
    for (TcpSock* t : ns.sockets) {
      if (t->matches(m)) {
        tcp_v4_rcv(*this, ctx, *t, skb);
        return;
      }
    }
  }
  drop(ctx, skb, DropReason::kNoSocket);
}

void Net::ip_forward(ExecCtx& ctx, Namespace& ns, Device& in, Skb& skb) {
  charge(ctx, &skb, {.sym = Sym::kIpForward});
  PacketMeta& m = meta(skb);
  if (++m.hops > kMaxForwardHops || m.hops == 0) {
    hazard("routing_loop",
           "a packet was forwarded more than 255 times without its TTL running out: a routing loop "
           "the skip-cow patch made endless (it skips the TTL decrement); a real kernel would "
           "forward it forever",
           ns.name);
    drop(ctx, skb, DropReason::kRoutingLoop);
    return;
  }
  if (!v2620() && skb.sk() != nullptr) {
    drop(ctx, skb, DropReason::kSkOwned);
    return;
  }
  if (v2620()) {
    // 2.6.20: skb->ip_summed = CHECKSUM_NONE, unconditionally.
    if (skb.ip_summed == IpSummed::kPartial) {
      hazard("partial_checksum_forwarded",
             "2.6.20 ip_forward sets CHECKSUM_NONE on a CHECKSUM_PARTIAL skb: its TCP checksum "
             "field holds only the pseudo-header sum and leaves the host wrong on the wire (the "
             "skb_forward_csum fix came later)",
             ns.name + " from " + in.name());
    }
    skb.ip_summed = IpSummed::kNone;
  } else if (skb.ip_summed == IpSummed::kComplete) {
    skb.ip_summed = IpSummed::kNone;  // skb_forward_csum()
  }
  if (m.ttl <= 1) {
    drop(ctx, skb, DropReason::kTtlExceeded);
    return;
  }
  const Route* r = ns.lookup(m.daddr);
  if (r == nullptr) {
    drop(ctx, skb, DropReason::kNoRoute);
    return;
  }
  Device& out = *r->dev;
  OpCtx o = op(ctx);
  bool skip = false;
  for (DevKind k : patches_.skip_cow_from) {
    skip = skip || in.kind() == k;
  }
  if (skip) {
    if (in.hard_header_len == 0 && out.hard_header_len > 0) {
      hazard("skip_cow_hard_header",
             "the skip-cow patch forwards a packet that entered from a device without an Ethernet "
             "header (" + in.name() + ") out of one whose hard header must be written (" +
                 out.name() + ") without making the skb private first (Eric Biederman's "
                 "objection in the thread)",
             ns.name);
    }
  } else {
    if (ops::cow(o, skb, ll_reserved_space(out)) != 0) {
      drop(ctx, skb, DropReason::kQdiscFull);
      return;
    }
    ops::ip_decrease_ttl(o, skb);
    --m.ttl;
  }
  if (patches_.netfilter) {
    charge(ctx, &skb, {.sym = Sym::kNfHookSlow});  // NF_IP_FORWARD
  }
  charge(ctx, &skb, {.sym = Sym::kIpForwardFinish});
  charge(ctx, &skb, {.sym = Sym::kIpOutput});
  charge(ctx, &skb, {.sym = Sym::kIpFinishOutput});
  ip_finish_output2(ctx, out, skb);
}

}  // namespace skbsim::sim
