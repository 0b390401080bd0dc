#pragma once
// udp.hpp — the UDP sender and receiver of netperf UDP_STREAM (net/ipv4/udp.c, ip_output.c
// ip_append_data / ip_push_pending_frames; 6.x ip_make_skb / udp_send_skb), per kernel version.
//
// Sender: one send() per datagram of `send_size` bytes; sock_alloc_send_skb blocks while the
// socket's sk_wmem_alloc is at sk_sndbuf and sock_wfree wakes it once half is free
// (sock_def_write_space). ip_append_data builds one linear skb (no SG path without UDP GSO, both
// versions); the payload is copied with a fused copy-and-checksum unless the route device
// offloads checksums and the datagram fits the MTU, when it is a plain copy and the skb is
// CHECKSUM_PARTIAL (csummode in ip_append_data).
// Receiver: udp_rcv (checksum initialised, not verified, for CHECKSUM_NONE), sock_queue_rcv_skb
// (dropped when the receive buffer is full: UDP has no flow control), and one recvfrom() per
// datagram: skb_copy_datagram_iovec when the checksum is known good, else
// skb_copy_and_csum_datagram_iovec verifies while copying.
//
// Not modelled: IP fragmentation (a datagram must fit the route device's MTU; the scenario reader
// refuses one that does not), UDP GSO, corking, MSG_MORE.

#include <cstdint>
#include <limits>

#include "sim/net.hpp"

namespace skbsim::sim {

struct UdpStats {
  std::uint64_t bytes_sent = 0;  // payload handed to udp_sendmsg and sent
  std::uint64_t bytes_received = 0;
  std::uint64_t datagrams_out = 0;
  std::uint64_t datagrams_in = 0;  // read by the application
};

struct UdpSock {
  Net* net = nullptr;
  Namespace* ns = nullptr;
  ExecCtx* proc = nullptr;
  Sock sk;
  std::uint32_t saddr = 0;
  std::uint32_t daddr = 0;
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  std::uint32_t send_size = 1472;  // netperf -m
  std::uint32_t sndbuf = 131072;   // sk_sndbuf
  std::uint32_t rcvbuf = 131072;   // sk_rcvbuf
  UdpStats stats;
  bool writer_blocked = false;
  std::uint64_t to_send = std::numeric_limits<std::uint64_t>::max();
  SkbQueue receive_queue;
  bool reader_blocked = true;

  bool matches(const PacketMeta& m) const noexcept {
    return m.proto == 17 && m.daddr == saddr && m.dport == sport && m.saddr == daddr &&
           m.sport == dport;
  }
};

// Connects the sender (its route must exist) and hooks its write-space wake-up.
void udp_connect(Net& net, UdpSock& sender);
void udp_start_sender(Net& net, UdpSock& sender);
// udp_rcv: a datagram delivered to the socket.
void udp_rcv(Net& net, ExecCtx& ctx, UdpSock& sock, Skb& skb);
// Frees everything the socket still holds (end of run).
void udp_close(Net& net, ExecCtx& ctx, UdpSock& sock);

}  // namespace skbsim::sim
