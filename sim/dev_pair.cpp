// dev_pair.cpp — etun (2007, 2.6.20-lxc; never merged, behaviour assumed as the OpenVZ veth port
// of the time) and veth (6.x drivers/net/veth.c): transmit hands the skb to the peer's netif_rx.

#include "sim/devices.hpp"

namespace skbsim::sim {

bool PairDevice::xmit(Net& net, ExecCtx& ctx, Skb& skb) {
  net.charge(ctx, &skb, {.sym = xmit_symbol()});
  net.hop(ctx, skb, "xmit ", name(), " -> ", peer->name());
  OpCtx o = net.op(ctx);
  if (net.v2620()) {
    // 2007 veth/etun xmit: skb_orphan (the sender's socket is uncharged now), PACKET_HOST,
    // eth_type_trans, the checksum rule, dst/conntrack dropped, netif_rx on the peer.
    ops::orphan(o, skb);
    if ((features & feat::kNoCsum) != 0) {
      skb.ip_summed =
          (peer->features & feat::kRxCsum) != 0 ? IpSummed::kUnnecessary : IpSummed::kNone;
    }
  } else {
    // 6.x veth_xmit -> __dev_forward_skb: skb_scrub_packet (no orphan in 6.x), eth_type_trans,
    // ip_summed unchanged, __netif_rx on the peer.
    net.charge(ctx, &skb, {.sym = Sym::kDevForwardSkb});
    net.charge(ctx, &skb, {.sym = Sym::kSkbScrubPacket});
  }
  net.charge(ctx, &skb, {.sym = Sym::kEthTypeTrans});
  (void)ops::pull(o, skb, 14);
  net.netif_rx(ctx, *peer, skb);
  return true;
}

bool VenetDevice::xmit(Net& net, ExecCtx& ctx, Skb& skb) {
  net.charge(ctx, &skb, {.sym = Sym::kVenetXmit});
  net.hop(ctx, skb, "xmit ", name(), " -> ", peer->name());
  OpCtx o = net.op(ctx);
  // OpenVZ venet_xmit: no hard header to strip; the sender is uncharged (orphan), and the
  // checksum rule is that of the 2007 virtual devices.
  ops::orphan(o, skb);
  if ((features & feat::kNoCsum) != 0) {
    skb.ip_summed = IpSummed::kUnnecessary;
  }
  net.netif_rx(ctx, *peer, skb);
  return true;
}

bool LoopbackDevice::xmit(Net& net, ExecCtx& ctx, Skb& skb) {
  net.charge(ctx, &skb, {.sym = Sym::kLoopbackXmit});
  net.hop(ctx, skb, "xmit ", name());
  OpCtx o = net.op(ctx);
  ops::orphan(o, skb);
  if (net.v2620()) {
    skb.ip_summed = IpSummed::kUnnecessary;  // 2.6.20 loopback_xmit (no LOOPBACK_MUST_CHECKSUM)
  }
  net.charge(ctx, &skb, {.sym = Sym::kEthTypeTrans});
  (void)ops::pull(o, skb, 14);
  net.netif_rx(ctx, *this, skb);
  return true;
}

}  // namespace skbsim::sim
