// dev_nic.cpp — a physical NIC: e1000 (drivers/net/e1000/e1000_main.c, 7.2.9-k4, 2.6.19/20
// era) or a modern NIC on 6.x. The CPU pays for the driver's work; DMA and the wire are free.

#include <algorithm>

#include "sim/devices.hpp"

namespace skbsim::sim {
namespace {

constexpr std::uint32_t kEthHeader = 14;
constexpr std::uint32_t kWireOverhead = 4 + 8 + 12;  // FCS, preamble + SFD, inter-frame gap
constexpr std::uint32_t kMinFrame = 64;              // with FCS
constexpr std::uint32_t kNetIpAlign = 2;

std::uint32_t wire_bytes(std::uint32_t frame_len) noexcept {
  return std::max(frame_len + 4, kMinFrame) + kWireOverhead - 4;
}

}  // namespace

bool NicDevice::xmit(Net& net, ExecCtx& ctx, Skb& skb) {
  if (ring_used_ >= p_.tx_ring) {
    return false;  // netif_stop_queue: the qdisc keeps the skb
  }
  net.charge(ctx, &skb, {.sym = Sym::kE1000XmitFrame});
  net.hop(ctx, skb, "xmit ", name());
  OpCtx o = net.op(ctx);
  if (skb.shinfo().gso_size != 0) {
    // e1000_tso rewrites the IP and TCP headers: 2.6.20 pskb_expand_head when the header is
    // cloned; 6.x skb_cow_head(skb, 0).
    if (net.v2620()) {
      if (skb.header_cloned()) {
        (void)ops::expand_head(o, skb, 0, 0);
      }
    } else {
      (void)ops::cow_head(o, skb, 0);
    }
  }
  ++ring_used_;
  if (irq_ctx_ == nullptr) {
    Host& host = net.host_of(ctx);
    irq_ctx_ = &net.add_context(host, "irq/" + name(), p_.irq_cpu, Level::kHardIrq);
  }
  Skb* s = &skb;
  net.engine().after_task([this, &net, s] { start_wire(net, s); });
  return true;
}

void NicDevice::start_wire(Net& net, Skb* skb) {
  Engine& e = net.engine();
  const std::uint32_t segs = skb->shinfo().gso_size != 0 ? std::max(1U, skb->shinfo().gso_segs) : 1U;
  const PacketMeta m0 = meta(*skb);
  const std::uint32_t mss = skb->shinfo().gso_size;
  const std::uint32_t header = skb->transport_header + 32U - skb->data_offset();  // to TCP end
  const std::uint32_t payload = skb->len() - std::min(skb->len(), header);
  Time t = std::max(e.now(), wire_free_at_);
  for (std::uint32_t i = 0; i < segs; ++i) {
    Frame f{skb->len(), m0, skb->traced()};
    if (segs > 1) {  // TSO: the NIC cuts the payload into MSS frames with copied headers
      const std::uint32_t len = std::min(mss, payload - i * mss);
      f.len = header + len;
      f.meta.seq = m0.seq + i * mss;
      f.meta.end_seq = f.meta.seq + len;
      if (i + 1 < segs) {
        f.meta.flags &= static_cast<std::uint8_t>(~kFlagPsh);  // PSH on the last frame only
      }
      f.meta.trace_seg = m0.trace_seg + i;
      f.traced = net.traced_segment() != 0 && f.meta.trace_seg == net.traced_segment();
    }
    const Time wire = static_cast<Time>(static_cast<double>(wire_bytes(f.len)) * 8.0 * 1e6 /
                                        p_.rate_mbps);  // ps
    t += wire;
    ++frames_sent_;
    if (remote_ != nullptr) {
      const Time arrive = t + static_cast<Time>(p_.delay_us * static_cast<double>(kPsPerUs));
      e.at(arrive, [this, &net, f] { remote_->receive(net, f); });
    }
  }
  wire_free_at_ = t;
  e.at(t, [this, &net, skb] {
    tx_done_.push_back(*skb);  // descriptor done: freed by the next poll
    schedule_irq(net);
  });
}

void NicDevice::receive(Net& net, const Frame& f) {
  rx_ready_.push_back(f);
  schedule_irq(net);
}

void NicDevice::schedule_irq(Net& net) {
  if (irq_pending_) {
    return;
  }
  irq_pending_ = true;
  const Time at = net.engine().now() + static_cast<Time>(p_.irq_delay_us * kPsPerUs);
  net.engine().at(at, [this, &net] { irq(net); });
}

void NicDevice::irq(Net& net) {
  irq_pending_ = false;
  if (irq_ctx_ == nullptr) {
    irq_ctx_ = &net.add_context(*ns->host, "irq/" + name(), p_.irq_cpu, Level::kHardIrq);
  }
  ExecCtx& ictx = *irq_ctx_;
  ictx.cpu().submit({&ictx, [this, &net, &ictx] {
                       net.charge(ictx, Sym::kE1000Intr);
                       // netif_rx_schedule: the NAPI poll runs in this CPU's NET_RX softirq.
                       Softnet& sn = ns->host->softnet.at(ictx.cpu().index());
                       ExecCtx& sctx = *sn.ctx;
                       net.engine().after_task([this, &net, &sctx] {
                         sctx.cpu().submit({&sctx, [this, &net, &sctx] { poll(net, sctx); }});
                       });
                     }});
}

void NicDevice::poll(Net& net, ExecCtx& ctx) {
  OpCtx o = net.op(ctx);
  Softnet& sn = ns->host->softnet.at(ctx.cpu().index());
  net.net_rx_begin(sn);
  if (!tx_done_.empty()) {
    net.charge(ctx, Sym::kE1000CleanTxIrq);
    while (!tx_done_.empty()) {
      Skb& s = tx_done_.front();
      tx_done_.pop_front();
      --ring_used_;
      net.hop(ctx, s, "tx done ", name());
      net.free_skb(ctx, s);  // dev_kfree_skb_any (2.6.20 kfree_skb; 6.x consume)
    }
    if (queue_stopped) {
      queue_stopped = false;  // netif_wake_queue: qdisc_run from NET_TX
      net.qdisc_run(ctx, *this);
    }
  }
  if (rx_ready_.empty()) {
    return;
  }
  net.charge(ctx, Sym::kE1000CleanRxIrq);
  const bool rxcsum = (features & feat::kRxCsum) != 0;
  Skb* gro = nullptr;  // 6.x: the skb GRO is building
  auto flush = [&] {
    if (gro != nullptr) {
      net.netif_receive_skb(ctx, *this, *gro);
      gro = nullptr;
    }
  };
  while (!rx_ready_.empty()) {
    const Frame f = rx_ready_.front();
    rx_ready_.pop_front();
    const std::uint32_t payload = f.meta.end_seq - f.meta.seq;
    if (p_.modern && (features & feat::kGro) != 0) {
      net.charge(ctx, Sym::kNapiGroReceive);
      net.charge(ctx, Sym::kDevGroReceive);
      if (gro != nullptr && meta(*gro).end_seq == f.meta.seq && payload > 0 &&
          gro->shinfo().nr_frags < net.kernel().max_skb_frags &&
          gro->len() + payload <= 65535 - 20) {
        // skb_gro_receive: the frame's page becomes a frag of the held skb; no payload copy.
        if (f.traced) {
          gro->set_traced(true);  // the traced segment now travels inside the merged skb
        }
        net.charge(ctx, gro, {.sym = Sym::kTcpGroReceive});
        Page* pg = ops::alloc_page(o);
        ops::add_rx_frag(o, *gro, gro->shinfo().nr_frags, *pg, 0, payload, net.kernel().page_bytes);
        meta(*gro).end_seq = f.meta.end_seq;
        const std::uint32_t segs = std::max(1U, gro->shinfo().gso_segs) + 1;
        ops::set_gso(*gro, gro->shinfo().gso_size != 0 ? gro->shinfo().gso_size : payload, segs,
                     1);
        // tcp_gro_receive: the merged skb takes the frame's PSH, and a PSH ends it (flush).
        if ((f.meta.flags & kFlagPsh) != 0) {
          meta(*gro).flags |= kFlagPsh;
          flush();
        }
        continue;
      }
      flush();
    }
    Skb* skb = nullptr;
    if (f.len < p_.copybreak) {
      // e1000 copybreak: a small frame is copied into a fresh small skb, the buffer reused.
      skb = ops::netdev_alloc_skb(o, f.len + kNetIpAlign);
      if (skb == nullptr) {
        continue;
      }
      ops::reserve(o, *skb, kNetIpAlign);
      ops::put(o, *skb, f.len);
      net.charge(ctx, skb, {.sym = Sym::kMemcpy, .copied = f.len});
    } else {
      // The frame's ring buffer goes up the stack; a replacement buffer is allocated for the ring.
      skb = ops::netdev_alloc_skb(o, p_.rx_buffer + kNetIpAlign);
      if (skb == nullptr) {
        continue;
      }
      ops::reserve(o, *skb, kNetIpAlign);
      ops::put(o, *skb, f.len);
    }
    skb->set_traced(f.traced);
    meta(*skb) = f.meta;
    skb->protocol = 0x0800;
    // e1000_rx_checksum: a good TCP checksum reported by the hardware makes it UNNECESSARY.
    skb->ip_summed = rxcsum ? IpSummed::kUnnecessary : IpSummed::kNone;
    net.charge(ctx, skb, {.sym = Sym::kEthTypeTrans});
    (void)ops::pull(o, *skb, kEthHeader);
    net.hop(ctx, *skb, "rx ", name());
    // A frame with PSH that starts a flow is not held (tcp_gro_receive's flush: normal path).
    if (p_.modern && (features & feat::kGro) != 0 && payload > 0 &&
        (f.meta.flags & kFlagPsh) == 0) {
      gro = skb;
      continue;
    }
    net.netif_receive_skb(ctx, *this, *skb);
  }
  flush();
  // and once more at its end, after the rest of each frame's way up that tcp_v4_rcv queued next
  if (!sn.defer_list.empty()) {
    ctx.cpu().submit_next({&ctx, [&net, &sn] { net.skb_defer_free_flush(sn); }});
  }
}

Features default_features(DevKind kind, KernelVersion v, bool modern_nic) {
  const bool old = v == KernelVersion::k2_6_20;
  switch (kind) {
    case DevKind::kNic:
      // e1000 (mac >= 82544): SG | HW_CSUM | TSO | HIGHDMA | LLTX (+VLAN), rx_csum on.
      // A modern NIC: SG | IP_CSUM | IPV6_CSUM | TSO | HIGHDMA, RXCSUM, GRO.
      if (old || !modern_nic) {
        return feat::kSg | feat::kHwCsum | feat::kTso | feat::kHighDma | feat::kLltx |
               feat::kRxCsum;
      }
      return feat::kSg | feat::kIpCsum | feat::kIpv6Csum | feat::kTso | feat::kHighDma |
             feat::kRxCsum | feat::kGro;
    case DevKind::kEtun:
      // Assumed (its source was never merged): FRAGLIST | HIGHDMA | LLTX, no SG, no checksum.
      return feat::kFraglist | feat::kHighDma | feat::kLltx;
    case DevKind::kVeth:
      // 6.x VETH_FEATURES: SG | FRAGLIST | HW_CSUM | RXCSUM | HIGHDMA | GSO_SOFTWARE | ...
      return feat::kSg | feat::kFraglist | feat::kHwCsum | feat::kRxCsum | feat::kHighDma |
             feat::kTso | feat::kLltx;
    case DevKind::kVenet:
      // OpenVZ venet without Kirill's experimental patch: LLTX only (assumed).
      return feat::kLltx;
    case DevKind::kLoopback:
      return old ? (feat::kSg | feat::kFraglist | feat::kNoCsum | feat::kHighDma | feat::kLltx)
                 : (feat::kSg | feat::kFraglist | feat::kHwCsum | feat::kHighDma | feat::kLltx |
                    feat::kTso | feat::kRxCsum);
    case DevKind::kBridge:
      return feat::kSg | feat::kHwCsum | feat::kHighDma | feat::kLltx | feat::kTso;
  }
  return 0;
}

}  // namespace skbsim::sim
