// udp.cpp — UDP sender and receiver (see udp.hpp for what is and is not modelled).

#include "sim/udp.hpp"

#include <algorithm>
#include <stdexcept>

namespace skbsim::sim {
namespace {

constexpr std::uint32_t kUdpHeader = 8;
constexpr std::uint32_t kIpHeader = 20;
constexpr std::uint8_t kFlagVerified = 4;  // the datagram's checksum is known good

void submit(ExecCtx& ctx, std::function<void()> fn) { ctx.cpu().submit({&ctx, std::move(fn)}); }

void sendmsg_task(Net& net, UdpSock& u);

// sock_def_write_space(): wake the writer once sk_wmem_alloc is at most half of sk_sndbuf. Runs
// in whatever context freed or orphaned the skb (the NIC's TX clean, a pair device's xmit).
void write_space(OpCtx& o, Sock& sk) {
  auto& u = *static_cast<UdpSock*>(sk.owner);
  if (!u.writer_blocked || 2 * sk.wmem_alloc > static_cast<std::int64_t>(u.sndbuf)) {
    return;
  }
  u.writer_blocked = false;
  Net& net = *u.net;
  (void)o;  // the freeing context is the engine's running one
  net.wake_process(*net.engine().current_ctx(), *u.proc, [&net, &u] { sendmsg_task(net, u); });
}

// One send() of netperf's UDP_STREAM loop: udp_sendmsg -> ip_append_data -> ip_push_pending_frames.
void sendmsg_task(Net& net, UdpSock& u) {
  ExecCtx& ctx = *u.proc;
  if (u.to_send == 0) {
    return;
  }
  const Route* r = u.ns->lookup(u.daddr);
  if (r == nullptr) {
    throw std::invalid_argument("udp_sendmsg: no route from " + u.ns->name);
  }
  const Device& dev = *r->dev;
  // sock_alloc_send_skb(): the writer sleeps while the send buffer is spent.
  if (u.sk.wmem_alloc >= static_cast<std::int64_t>(u.sndbuf)) {
    u.writer_blocked = true;
    return;
  }
  net.charge(ctx, Sym::kSysSendto);
  net.charge(ctx, Sym::kUdpSendmsg);
  net.charge(ctx, Sym::kIpAppendData);
  net.charge(ctx, Sym::kSockAllocSendSkb);
  OpCtx o = net.op(ctx);
  const std::uint32_t payload = u.send_size;
  const std::uint32_t hh = ll_reserved_space(dev);
  // alloclen + hh_len + 15, the data starting after the link-layer reserve and the IP header.
  Skb* skb = ops::alloc_skb(o, hh + 15 + kIpHeader + kUdpHeader + payload);
  if (skb == nullptr) {
    return;
  }
  ops::reserve(o, *skb, hh + kIpHeader);
  ops::set_owner_w(o, *skb, u.sk);
  // csummode: CHECKSUM_PARTIAL when the route device sums and the datagram is one fragment.
  const bool partial = (dev.features & feat::kAllCsum) != 0 &&
                       payload + kUdpHeader + kIpHeader <= dev.mtu;
  skb->ip_summed = partial ? IpSummed::kPartial : IpSummed::kNone;
  skb->protocol = 0x0800;
  ops::put(o, *skb, kUdpHeader);
  ops::set_transport_header(*skb, 0);
  ops::add_data(o, *skb, payload);  // getfrag: copy_from_user or csum_partial_copy_fromiovecend
  if (partial) {
    skb->csum_start = skb->transport_header;  // udp4_hwcsum_outgoing: pseudo-header only
    skb->csum_offset = 6;
  } else {
    ops::csum_partial(o, kUdpHeader);  // the header folded into the payload's sum
  }
  PacketMeta& m = meta(*skb);
  m = PacketMeta{};
  m.saddr = u.saddr;
  m.daddr = u.daddr;
  m.sport = u.sport;
  m.dport = u.dport;
  m.proto = 17;
  m.flags = kFlagData;
  m.seq = static_cast<std::uint32_t>(u.stats.bytes_sent);
  m.end_seq = m.seq + payload;
  m.trace_seg = static_cast<std::uint32_t>(u.stats.datagrams_out + 1);
  skb->set_traced(net.traced_segment() != 0 && net.traced_segment() == m.trace_seg);
  u.stats.bytes_sent += payload;
  ++u.stats.datagrams_out;
  if (u.to_send != std::numeric_limits<std::uint64_t>::max()) {
    u.to_send -= std::min<std::uint64_t>(u.to_send, payload);
  }
  net.hop(ctx, *skb, "udp_sendmsg ", u.ns->name);
  net.ip_queue_xmit(ctx, *u.ns, *skb, Sym::kIpPushPendingFrames);
  net.engine().after_task([&net, &u] { submit(*u.proc, [&net, &u] { sendmsg_task(net, u); }); });
}

// netserver's loop: one recvfrom() per datagram until the queue is empty.
void recvmsg_task(Net& net, UdpSock& u) {
  ExecCtx& ctx = *u.proc;
  OpCtx o = net.op(ctx);
  while (!u.receive_queue.empty()) {
    Skb& skb = u.receive_queue.front();
    u.receive_queue.pop_front();
    net.charge(ctx, Sym::kSysRecvfrom);
    net.charge(ctx, &skb, {.sym = Sym::kUdpRecvmsg});
    const PacketMeta& m = meta(skb);
    const std::uint32_t payload = m.end_seq - m.seq;
    if ((m.flags & kFlagVerified) != 0) {
      net.charge(ctx, &skb, {.sym = Sym::kSkbCopyDatagramIovec, .copied = payload});
    } else {
      // skb_copy_and_csum_datagram_iovec(skb, sizeof(struct udphdr), ...): the header summed,
      // the payload copied and summed in one pass, the result checked.
      ops::csum_partial(o, kUdpHeader);
      net.charge(ctx, &skb, {.sym = Sym::kSkbCopyAndCsumDatagramIovec, .fused = payload});
    }
    u.stats.bytes_received += payload;
    ++u.stats.datagrams_in;
    // 2.6.20 skb_free_datagram; 6.x skb_consume_udp -> consume_skb. (6.18 hands it back to the
    // allocating CPU through skb_attempt_defer_free, commit 6471658dc66c "udp: use
    // skb_attempt_defer_free()"; the model's 6.x, 6.12 to 6.18, keeps the earlier free.)
    net.free_skb(ctx, skb);
  }
  u.reader_blocked = true;
}

}  // namespace

void udp_connect(Net& net, UdpSock& u) {
  const Route* r = u.ns->lookup(u.daddr);
  if (r == nullptr) {
    throw std::invalid_argument("udp_connect: no route from " + u.ns->name);
  }
  if (u.send_size + kUdpHeader + kIpHeader > r->dev->mtu) {
    throw std::invalid_argument("udp_connect: a " + std::to_string(u.send_size) +
                                "-byte datagram needs IP fragmentation on " + r->dev->name() +
                                " (not modelled)");
  }
  u.net = &net;
  u.sk.write_space = &write_space;
  u.sk.owner = &u;
}

void udp_start_sender(Net& net, UdpSock& u) {
  submit(*u.proc, [&net, &u] { sendmsg_task(net, u); });
}

void udp_rcv(Net& net, ExecCtx& ctx, UdpSock& u, Skb& skb) {
  net.charge(ctx, &skb, {.sym = Sym::kUdpRcv});
  PacketMeta& m = meta(skb);
  // udp4_csum_init: CHECKSUM_NONE gets skb->csum = the pseudo-header sum and is verified while
  // copying to the user.
  if (net.rx_csum_known_good(skb, "udp_rcv", u.ns->name)) {
    m.flags |= kFlagVerified;
  }
  net.charge(ctx, &skb, {.sym = Sym::kUdpQueueRcvSkb});
  net.charge(ctx, &skb, {.sym = Sym::kSockQueueRcvSkb});
  // 2.6.20 sock_queue_rcv_skb: rmem + truesize >= rcvbuf drops; 6.x
  // __udp_enqueue_schedule_skb: rmem > rcvbuf drops.
  const std::int64_t rmem = u.sk.rmem_alloc;
  const bool full = net.v2620()
                        ? rmem + skb.truesize() >= static_cast<std::int64_t>(u.rcvbuf)
                        : rmem > static_cast<std::int64_t>(u.rcvbuf);
  if (full) {
    net.drop(ctx, skb, DropReason::kSocketRcvbuf);
    return;
  }
  OpCtx o = net.op(ctx);
  ops::set_owner_r(o, skb, u.sk);
  u.receive_queue.push_back(skb);
  if (u.reader_blocked) {
    u.reader_blocked = false;
    net.wake_process(ctx, *u.proc, [&net, &u] { recvmsg_task(net, u); });  // sk_data_ready
  }
}

void udp_close(Net& net, ExecCtx& ctx, UdpSock& u) {
  while (!u.receive_queue.empty()) {
    Skb& skb = u.receive_queue.front();
    u.receive_queue.pop_front();
    net.drop(ctx, skb, DropReason::kNoSocket);  // unread when the socket closes
  }
  u.to_send = 0;
}

}  // namespace skbsim::sim
