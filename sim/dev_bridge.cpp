// dev_bridge.cpp — the Linux bridge (net/bridge/br_input.c, br_forward.c, br_device.c), 2.6.20
// and 6.x: forwarding between ports by the forwarding database, without touching the packet's
// data (the Ethernet header eth_type_trans pulled is pushed back, skb_push(skb, ETH_HLEN)).

#include "sim/devices.hpp"

namespace skbsim::sim {
namespace {
constexpr std::uint32_t kEthHeader = 14;
}  // namespace

void BridgeDevice::add_port(Device& port) {
  port.master = this;
  ports_.push_back(&port);
}

void BridgeDevice::learn(std::uint32_t addr, Device& port) {
  for (auto& [a, p] : fdb_) {
    if (a == addr) {
      p = &port;
      return;
    }
  }
  fdb_.emplace_back(addr, &port);
}

Device* BridgeDevice::fdb_get(Net& net, ExecCtx& ctx, const Skb& skb, std::uint32_t addr) const {
  net.charge(ctx, &skb, {.sym = Sym::kBrFdbGet});
  for (const auto& [a, p] : fdb_) {
    if (a == addr) {
      return p;
    }
  }
  return nullptr;
}

void BridgeDevice::forward(Net& net, ExecCtx& ctx, Device& to, Skb& skb, bool from_port) {
  if (from_port) {
    // __br_forward(): 2.6.20 sets CHECKSUM_NONE unconditionally; 6.x skb_forward_csum() turns
    // only CHECKSUM_COMPLETE into NONE.
    net.charge(ctx, &skb, {.sym = Sym::kBrForward});
    if (net.v2620()) {
      if (skb.ip_summed == IpSummed::kPartial) {
        net.hazard("partial_checksum_forwarded",
                   "2.6.20 __br_forward sets CHECKSUM_NONE on a CHECKSUM_PARTIAL skb: its checksum "
                   "field holds only the pseudo-header sum and leaves the host wrong on the wire",
                   name());
      }
      skb.ip_summed = IpSummed::kNone;
    } else if (skb.ip_summed == IpSummed::kComplete) {
      skb.ip_summed = IpSummed::kNone;
    }
    if (net.patches().netfilter) {
      net.charge(ctx, &skb, {.sym = Sym::kNfHookSlow});  // NF_BR_FORWARD
    }
  }
  net.charge(ctx, &skb, {.sym = Sym::kBrForwardFinish});
  net.charge(ctx, &skb, {.sym = Sym::kBrDevQueuePushXmit});
  net.hop(ctx, skb, "br_forward ", name(), " -> ", to.name());
  if (skb.len() > to.mtu && skb.shinfo().gso_size == 0) {
    net.drop(ctx, skb, DropReason::kBridgeMtu);
    return;
  }
  OpCtx o = net.op(ctx);
  ops::push(o, skb, kEthHeader);
  net.dev_queue_xmit(ctx, to, skb);
}

void BridgeDevice::flood(Net& net, ExecCtx& ctx, const Device* except, Skb& skb, bool from_port) {
  // br_flood(): a clone for every port but the last, which takes the skb itself.
  Device* prev = nullptr;
  OpCtx o = net.op(ctx);
  for (Device* p : ports_) {
    if (p == except) {
      continue;
    }
    if (prev != nullptr) {
      Skb* c = ops::clone(o, skb);
      if (c != nullptr) {
        forward(net, ctx, *prev, *c, from_port);
      }
    }
    prev = p;
  }
  if (prev == nullptr) {
    net.free_skb(ctx, skb);
    return;
  }
  forward(net, ctx, *prev, skb, from_port);
}

bool BridgeDevice::handle_frame(Net& net, ExecCtx& ctx, Device& in, Skb& skb) {
  net.charge(ctx, &skb, {.sym = Sym::kBrHandleFrame});
  if (net.patches().netfilter) {
    net.charge(ctx, &skb, {.sym = Sym::kNfHookSlow});  // NF_BR_PRE_ROUTING
  }
  net.charge(ctx, &skb, {.sym = Sym::kBrHandleFrameFinish});
  const PacketMeta& m = meta(skb);
  learn(m.saddr, in);  // br_fdb_update
  Device* to = ns->is_local(m.daddr) ? nullptr : fdb_get(net, ctx, skb, m.daddr);
  if (to == nullptr && (ns->is_local(m.daddr) || ns->ip_forward)) {
    // br_pass_frame_up(): the frame is for the bridge's own address (its host, or its host as
    // the router of the segment).
    net.charge(ctx, &skb, {.sym = Sym::kBrPassFrameUp});
    net.netif_receive_skb(ctx, *this, skb);
    return true;
  }
  if (to == &in) {
    net.free_skb(ctx, skb);  // should_deliver(): never back out of the port it came in on
    return true;
  }
  if (to == nullptr) {
    flood(net, ctx, &in, skb, true);
  } else {
    forward(net, ctx, *to, skb, true);
  }
  return true;
}

bool BridgeDevice::xmit(Net& net, ExecCtx& ctx, Skb& skb) {
  // br_dev_xmit(): the hard header ip_finish_output2 wrote is pulled again, the port looked up.
  net.charge(ctx, &skb, {.sym = Sym::kBrDevXmit});
  OpCtx o = net.op(ctx);
  (void)ops::pull(o, skb, kEthHeader);
  Device* to = fdb_get(net, ctx, skb, meta(skb).daddr);
  if (to == nullptr) {
    flood(net, ctx, nullptr, skb, false);
  } else {
    forward(net, ctx, *to, skb, false);
  }
  return true;
}

}  // namespace skbsim::sim
