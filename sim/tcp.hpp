#pragma once
// tcp.hpp — the TCP sender and receiver at the detail that decides copies, checksums and
// per-packet work (net/ipv4/tcp.c, tcp_output.c, tcp_input.c, tcp_ipv4.c), per kernel version.
//
// Sender: tcp_sendmsg copies user data into skbs — linear MSS skbs when the route device has no SG
// (plus GSO), page frags otherwise (6.x: always) — with a fused copy-and-checksum when the route
// device has no checksum offload (2.6.20 CHECKSUM_NONE) and a plain copy otherwise; skb_entail
// releases the header (skb_header_release); a full skb is pushed at once (tcp_push_one), and the
// NET_RX its transmit raises on this CPU runs before the copy goes on (local_bh_enable() at the
// end of dev_queue_xmit), the socket still held; tcp_transmit_skb sends a clone (pskb_copy while
// an earlier clone is still in flight) and keeps the original on the write queue until ACKed.
// Receiver: checksum verification where the version does it, copy to user (2.6.20: fused
// copy-and-checksum into a waiting reader when the checksum is unverified), delayed ACKs (one per
// two full segments, else a 40 ms timer), and the window each ACK offers (2.6.20: bytes unread;
// 6.x: memory, scaled by len/truesize and capped by rcv_ssthresh, see tcp.cpp).
//
// Not modelled: loss and retransmission (scenarios keep queues within their limits; a drop of data
// is counted and reported), slow start (the window is the steady state: the smaller of the
// receiver's window and the send buffer), 6.x receive-buffer autotuning (sk_rcvbuf is rcvbuf),
// SACK, timestamps' content (their 12 bytes are in the 32-byte header). Nagle is Minshall's variant
// (tcp_nagle_check, both versions): a sub-MSS tail waits only while an earlier sub-MSS segment is
// unacknowledged.
//
// Every socket is full duplex: data segments carry the ACK of what the socket has received
// (tcp_transmit_skb fills th->ack_seq; tcp_event_ack_sent cancels a pending delayed ACK), so
// netperf TCP_RR's request and response piggyback each other's ACKs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "sim/net.hpp"

namespace skbsim::sim {

struct TcpParams {
  std::uint32_t mss = 1448;
  std::uint32_t sndbuf = 131072;  // sk_sndbuf (netperf -s)
  std::uint32_t rcvbuf = 131072;  // sk_rcvbuf (netperf -S)
  std::uint32_t send_size = 16384;  // netperf -m
  std::uint64_t rate_bps = 0;       // iperf3 -b; 0: send as fast as the socket takes it
  std::uint32_t pacing_timer_us = 1000;  // iperf3 --pacing-timer
  std::uint32_t recv_size = 0;      // bytes per recv() (netperf -M, iperf3 -l); 0: all queued
  // The reader's socket is O_NONBLOCK (iperf3 3.x: Nread() calls read() until it has recv_size
  // bytes or gets EAGAIN, then waits in select()). Each read() then ends as soon as the receive
  // queue is empty, the backlog left to its release_sock; a blocking recv() (netperf) flushes
  // the backlog and goes on (tcp_recvmsg_locked).
  bool nonblocking = false;
  // The receiver set SO_RCVBUF (netperf -S; SOCK_RCVBUF_LOCK): 6.x then sizes the window scale
  // and clamp from rcvbuf's own window (tcp_full_space) rather than from tcp_rmem[2].
  bool rcvbuf_locked = false;
  // tcp_rmem[2] of the receiver's namespace: what sizes the window scale of an unlocked buffer
  // (tcp_select_initial_window) and bounds __tcp_grow_window. 0: the larger of rcvbuf and the
  // 6 MB tcp_init() sets on a machine with memory to spare, for a flow whose rcvbuf is that
  // maximum (as sets measured before 2026-12-06 have it); set apart from rcvbuf, rcvbuf is the
  // buffer autotuning left the socket with (tcp_rcv_space_adjust, not modelled), as skbsim
  // measure now writes it.
  std::uint32_t tcp_rmem_max = 0;
};

// Which path sent an ACK, as scripts/ack-source.sh splits the kernel's by call stack:
// __tcp_ack_snd_check after data in the NET_RX softirq or from the socket's backlog,
// tcp_cleanup_rbuf at the end of a recvmsg (a deferred ACK or a window update), the delayed-ACK
// timer.
enum class AckPath : std::uint8_t { kDataSoftirq, kDataBacklog, kCleanupRbuf, kDelackTimer };
inline constexpr std::size_t kAckPathCount = 4;
inline constexpr std::array<const char*, kAckPathCount> kAckPathNames = {
    "data_softirq", "data_backlog", "cleanup_rbuf", "delack_timer"};
static_assert(kAckPathCount == static_cast<std::size_t>(AckPath::kDelackTimer) + 1);

// The receiving application's copying calls timed as scripts/sleep-cycle.sh times the kernel's
// read(): from the call's start (after its system call's entry) to its return, which comes after
// the release_sock that ends it (its backlog, and what reaches the backlog while that runs); a
// least-squares line of the time over the bytes each call returned gives what a call costs per
// byte and what it costs whatever it copies.
struct ReadTiming {
  std::uint64_t n = 0;
  double bytes = 0;
  double us = 0;
  double bytes_sq = 0;
  double bytes_us = 0;

  void add(double b, double t) noexcept {
    ++n;
    bytes += b;
    us += t;
    bytes_sq += b * b;
    bytes_us += b * t;
  }
  ReadTiming& operator+=(const ReadTiming& o) noexcept {
    n += o.n;
    bytes += o.bytes;
    us += o.us;
    bytes_sq += o.bytes_sq;
    bytes_us += o.bytes_us;
    return *this;
  }
  ReadTiming operator-(const ReadTiming& o) const noexcept {
    return {n - o.n, bytes - o.bytes, us - o.us, bytes_sq - o.bytes_sq, bytes_us - o.bytes_us};
  }
  // The line's slope in microseconds per byte; nullopt without two calls of different sizes.
  std::optional<double> us_per_byte() const noexcept {
    const double nd = static_cast<double>(n);
    const double den = nd * bytes_sq - bytes * bytes;
    if (n < 2 || den <= 1e-9 * nd * bytes_sq) {
      return std::nullopt;
    }
    return (nd * bytes_us - bytes * us) / den;
  }
  // The line's time at zero bytes, in microseconds, for the slope `us_per_byte` gave.
  double intercept_us(double slope) const noexcept {
    return (us - slope * bytes) / static_cast<double>(n);
  }
};

// The receiving application's calls, as scripts/rcv-cadence.sh counts the kernel's: read() or
// recv() calls that copied something, and of those the short ones (at most one MSS: with iperf3's
// 128 KB writes, a write's sub-MSS tail read on its own), those that found nothing (a
// non-blocking reader's EAGAIN), select() calls, and the times the reader slept with nothing
// queued until another context woke it (sched_switch out asleep, as rcv-cadence.sh counts); and
// the copying calls' times (ReadTiming).
struct ReaderStats {
  std::uint64_t reads_copying = 0;
  std::uint64_t reads_short = 0;
  std::uint64_t reads_empty = 0;
  std::uint64_t selects = 0;
  std::uint64_t sleeps = 0;
  ReadTiming timed;

  ReaderStats& operator+=(const ReaderStats& o) noexcept {
    reads_copying += o.reads_copying;
    reads_short += o.reads_short;
    reads_empty += o.reads_empty;
    selects += o.selects;
    sleeps += o.sleeps;
    timed += o.timed;
    return *this;
  }
  ReaderStats operator-(const ReaderStats& o) const noexcept {
    return {reads_copying - o.reads_copying,
            reads_short - o.reads_short,
            reads_empty - o.reads_empty,
            selects - o.selects,
            sleeps - o.sleeps,
            timed - o.timed};
  }
};

// Skbs merged into another instead of queued, as the kernel's TcpExt counts them (nstat in
// skbsim measure's untraced runs): into the receive queue's tail (tcp_try_coalesce, in
// tcp_queue_rcv: TCPRcvCoalesce), and into the socket backlog's tail while the application held
// the socket (tcp_add_backlog: TCPBacklogCoalesce), split by what was merged: data, or pure ACKs.
// In a stream the data skbs are the receiver's and the pure ACKs the sender's, which is how the
// kernel's counters split by namespace. Not modelled: 6.x also merges within the out-of-order
// queue (tcp_ooo_try_coalesce, counted as TCPRcvCoalesce too); the model's ofo queue keeps every
// skb, and reordering is rare on these paths (TcpExt TCPOFOQueue at most 0.0021 a segment in
// the measured sets).
struct CoalesceStats {
  std::uint64_t receive_queue = 0;
  std::uint64_t backlog_data = 0;
  std::uint64_t backlog_acks = 0;

  CoalesceStats& operator+=(const CoalesceStats& o) noexcept {
    receive_queue += o.receive_queue;
    backlog_data += o.backlog_data;
    backlog_acks += o.backlog_acks;
    return *this;
  }
  CoalesceStats operator-(const CoalesceStats& o) const noexcept {
    return {receive_queue - o.receive_queue, backlog_data - o.backlog_data,
            backlog_acks - o.backlog_acks};
  }
};

// A sum of intervals and how many: a mean's parts.
struct TimedSum {
  std::int64_t ps = 0;
  std::uint64_t n = 0;

  void add(std::int64_t d) noexcept {
    ps += d;
    ++n;
  }
  TimedSum& operator+=(const TimedSum& o) noexcept {
    ps += o.ps;
    n += o.n;
    return *this;
  }
  TimedSum operator-(const TimedSum& o) const noexcept { return {ps - o.ps, n - o.n}; }
};

// The sending application's writes as scripts/write-gaps.sh and scripts/write-copy.sh time the
// kernel's, each transmit stamped at its device's start_xmit (net_dev_start_xmit): within one
// send() call, the data skbs it transmits in its own context (6.x's sk_flush_backlog in the
// call may send some on an ACK; the kernel's probe counts those too), from the first to the
// second and the second to the third; and from the start of the call's task that resumed after
// the NET_RX softirq of a push (the kernel: the softirq's exit) to the next transmit after the
// call's first, for a full skb (at least one MSS) and for a shorter one (a write's tail); and
// from the call's start (after its system call's entry: the kernel's sys_enter_write) to its
// first transmit. The transmits of the call's release_sock count; a call that waited for buffer
// space is not timed from then on.
struct WriterStats {
  TimedSum first_second;
  TimedSum second_third;
  TimedSum resume_full;
  TimedSum resume_tail;
  TimedSum call_first;

  WriterStats& operator+=(const WriterStats& o) noexcept {
    first_second += o.first_second;
    second_third += o.second_third;
    resume_full += o.resume_full;
    resume_tail += o.resume_tail;
    call_first += o.call_first;
    return *this;
  }
  WriterStats operator-(const WriterStats& o) const noexcept {
    return {first_second - o.first_second, second_third - o.second_third,
            resume_full - o.resume_full, resume_tail - o.resume_tail, call_first - o.call_first};
  }
};

struct TcpStats {
  std::uint64_t bytes_sent = 0;       // payload handed to tcp_sendmsg and queued
  std::uint64_t bytes_received = 0;   // payload copied to the reader
  std::uint64_t segs_out = 0;         // data segments on the wire (TcpOutSegs-style, MSS units)
  std::array<std::uint64_t, kAckPathCount> acks_by_path{};  // tcp_send_ack's, by AckPath
  ReaderStats reader;
  WriterStats writer;
  CoalesceStats coalesced;
  // Timers queued on the timer wheel (the kernel's timer:timer_start): the retransmission timer
  // (6.x: and loss probe), the delayed-ACK timer. scripts/tcp-timers.sh counts the kernel's.
  std::uint64_t xmit_timer_starts = 0;
  std::uint64_t delack_timer_starts = 0;
  std::uint64_t sendmsg_calls = 0;
  std::uint64_t transactions = 0;     // TCP_RR: responses the client has read whole
};

// skbsim run --timeline: what a TCP socket's application and protocol did, one record each,
// stamped where a kernel tracepoint would fire (the running task's clock, Engine::task_clock).
// The sender's send() calls, its waits for send-buffer space (sk_stream_wait_memory) and the
// ACKs' freeing of space that ends them (sk_stream_write_space), and its data transmits; the
// receiver's data skbs onto the socket's backlog (the application held it), into the out-of-order
// queue or into the receive queue, its reader's wake-up, select(), read() calls (0 bytes: EAGAIN)
// and the moments it blocked with nothing queued; either side's ACKs sent, by AckPath.
enum class SockEventKind : std::uint8_t {
  kSend,
  kWait,
  kXmit,
  kBacklog,
  kOfo,
  kQueue,
  kWake,
  kSelect,
  kRead,
  kBlock,
  kAck,
  kSpace
};
inline constexpr std::array<const char*, 12> kSockEventNames = {"send", "wait",  "xmit", "backlog",
                                                                "ofo",  "queue", "wake", "select",
                                                                "read", "block", "ack",  "space"};
static_assert(kSockEventNames.size() == static_cast<std::size_t>(SockEventKind::kSpace) + 1);

struct SockEvent {
  Time time = 0;
  const ExecCtx* ctx = nullptr;  // the context the event ran in
  SockEventKind kind = SockEventKind::kSend;
  std::uint8_t ack_path = 0;  // kAck: an AckPath
  std::uint32_t bytes = 0;    // docs/results.md: payload sent, transmitted, arrived or copied
  // This socket's bytes in sequence not yet copied (rcv_nxt - copied_seq).
  std::uint32_t unread = 0;
};

// netperf TCP_RR: the application answers each `in_size` bytes it reads with `out_size` bytes.
// The client (netperf) sends the first request; the server (netserver) only answers.
struct RrApp {
  std::uint32_t in_size = 0;  // 0: not request/response (TCP_STREAM / TCP_MAERTS)
  std::uint32_t out_size = 0;
  bool client = false;
  bool stopped = false;   // the run is over: answer what arrives, start nothing new
  std::uint64_t got = 0;  // bytes read towards the current message
};

struct TcpSock {
  Net* net = nullptr;
  Namespace* ns = nullptr;
  Host* host = nullptr;
  ExecCtx* proc = nullptr;  // the application's process context
  Sock sk;
  std::uint32_t saddr = 0;
  std::uint32_t daddr = 0;
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  std::uint32_t flow = 0;
  TcpParams params;
  TcpStats stats;
  std::vector<SockEvent>* timeline = nullptr;  // --timeline: where to record, else off

  // sender
  Features route_caps = 0;  // sk_route_caps (sk_setup_caps)
  std::uint32_t size_goal = 0;
  bool linear = true;  // select_size: MSS-sized linear skbs
  std::int64_t wmem_queued = 0;
  SkbQueue write_queue;
  Skb* send_head = nullptr;
  std::uint32_t write_seq = 0;
  std::uint32_t snd_nxt = 0;
  std::uint32_t snd_una = 0;
  std::uint32_t snd_wnd = 0;
  Page* page = nullptr;  // sk_sndmsg_page
  std::uint32_t page_off = 0;
  std::uint32_t page_bytes = 4096;
  std::uint32_t snd_sml = 0;  // end of the last sub-MSS segment sent (tcp_minshall_update)
  // icsk_pending == ICSK_TIME_LOSS_PROBE: 6.x's retransmission timer is armed for the tail loss
  // probe (one timer for both; 2.6.20 has no loss probe). The expiries, in jiffies, are the
  // timers' on the wheel: clearing one leaves it queued there (inet_csk_clear_xmit_timer
  // without INET_CSK_CLEAR_TIMERS), and __mod_timer returns early when a pending timer is set to
  // the expiry it has.
  bool loss_probe_pending = false;
  std::int64_t xmit_timer_expires = -1;
  std::int64_t delack_expires = -1;
  bool writer_blocked = false;
  std::uint32_t pending = 0;  // bytes of the current send() not yet copied
  // Timing the current send() (WriterStats): whether it is timed, its transmits so far, when
  // the last went out and when its task resumed after a push's softirq (-1: not since).
  bool call_timed = false;
  std::uint32_t call_xmits = 0;
  Time call_last_xmit = 0;
  Time call_resumed = -1;
  std::uint64_t to_send = std::numeric_limits<std::uint64_t>::max();
  Time app_start = -1;  // a paced sender's start (iperf3's start_time)
  std::uint64_t pacing_sleeps = 0;  // times the paced sender waited for its timer

  // receiver
  std::uint32_t rcv_nxt = 0;
  std::uint32_t copied_seq = 0;
  std::uint32_t rcv_wnd = 0;       // 2.6.20: the window the buffer holds (tcp_win_from_space)
  std::uint32_t last_adv_wnd = 0;  // the window the last ACK advertised (6.x: tp->rcv_wnd)
  std::uint32_t rcv_wup = 0;       // rcv_nxt when the last ACK went out (tcp_select_window)
  // 6.x: what __tcp_select_window offers. Free space counts memory, not bytes: tcp_space() is
  // tcp_win_from_space(sk_rcvbuf - sk_backlog.len - sk_rmem_alloc), i.e. scaled by scaling_ratio
  // (len/truesize of the first full-sized skb tcp_measure_rcv_mss sees, in 256ths; 128 until
  // then). The offer is capped by rcv_ssthresh, which tcp_grow_window raises while an arriving
  // skb leaves more space than it, and rounded up to 1 << rcv_wscale (with scale 0, to whole
  // segments instead).
  std::uint32_t scaling_ratio = 128;  // TCP_DEFAULT_SCALING_RATIO
  std::uint32_t window_clamp = 0;
  std::uint32_t rcv_ssthresh = 0;
  std::uint32_t rcv_wscale = 0;
  bool ssthresh_grown = false;  // false: the next skb queued sets rcv_ssthresh (tcp_grow_window)
  bool quickack = false;        // icsk_ack.quick (tcp_grow_window sets it to 1)
  bool ack_sched = false;       // inet_csk_ack_scheduled: data arrived since the last ACK
  bool ack_deferred = false;    // 6.x TCP_ACK_DEFERRED: an ACK due in the backlog, for release_cb
  // icsk_ack: the peer's MSS as the receiver guesses it (tcp_initialize_rcv_mss, then
  // tcp_measure_rcv_mss), the size of the last short segment, and the PUSHED flags a short or
  // pushed segment sets until the next ACK (tcp_event_ack_sent clears icsk_ack.pending).
  std::uint32_t rcv_mss = 536;
  std::uint32_t last_seg_size = 0;
  bool ack_pushed = false;
  bool ack_pushed2 = false;
  bool delack_armed = false;
  std::uint64_t delack_gen = 0;
  SkbQueue receive_queue;
  SkbQueue ofo_queue;  // out_of_order_queue, in sequence order
  bool reader_blocked = true;
  // A stream's recv() that copied something and has room left goes on while the backlog fills
  // (tcp_recvmsg_locked: "Do not sleep, just process backlog"): between its tasks it still owns
  // the socket (`in_recv`), with `recv_left` bytes of room.
  bool in_recv = false;
  std::uint64_t recv_left = 0;
  std::uint64_t nread_left = 0;  // a non-blocking reader: what its current Nread() still wants
  RrApp rr;

  // lock_sock: while the application's task runs (a send or recv call), softirq deliveries from
  // other CPUs wait on the socket's backlog (tcp_add_backlog) for release_sock, which runs them
  // in the process's context once its task is done. A call whose transmits raised NET_RX on its
  // CPU still holds the socket while that softirq runs (dev_queue_xmit's local_bh_enable() runs
  // it inside the call): `in_bh`, until release_sock.
  SkbQueue backlog;
  std::int64_t backlog_len = 0;  // sk_backlog.len: truesize added since __release_sock last ended
  bool release_pending = false;
  // Timing the reader's calls (ReadTiming): the current call's start, and the bytes of the
  // copying call that has not returned yet (0: none; it started at call_start_ps).
  std::int64_t call_start_ps = 0;
  std::uint64_t open_read_bytes = 0;
  bool in_release = false;
  bool in_bh = false;
  // A send() call that suspended between its tasks (a push raised NET_RX, which runs first) still
  // holds the socket: tcp_sendmsg calls release_sock once, when it returns. A release_sock task
  // that comes up meanwhile leaves the backlog to that one (`release_owed`).
  bool in_send = false;
  bool release_owed = false;
  std::uint32_t call_new_skbs = 0;  // 6.x tcp_sendmsg_locked's process_backlog count
  // The application's task runs but does not hold the socket: a system call's entry and exit
  // (cpu.syscall_us), or select(); deliveries meanwhile are the softirq's to process.
  bool in_syscall = false;

  bool matches(const PacketMeta& m) const noexcept {
    return m.daddr == saddr && m.dport == sport && m.saddr == daddr && m.sport == dport;
  }
};

// 6.x: the receive window's scale and clamp a connection starts with, for a receive buffer of
// `rcvbuf` bytes (sk_rcvbuf), locked by SO_RCVBUF or not, an advertised MSS of `advmss` and
// tcp_rmem[2] of `tcp_rmem_max` (tcp_openreq_init_rwin, tcp_select_initial_window,
// tcp_init_buffer_space; scaling_ratio still at its default, half).
struct InitialWindow {
  std::uint32_t rcv_wscale = 0;
  std::uint32_t window_clamp = 0;
};
InitialWindow tcp_initial_window(std::int64_t rcvbuf, bool locked, std::uint32_t advmss,
                                 std::int64_t tcp_rmem_max);
// 6.x __tcp_select_window without window scaling (rcv_wscale 0): the window last offered
// (tp->rcv_wnd) is kept while it is within one MSS under the free space, else the free space
// rounded down to a multiple of the MSS; with an MSS as large as the full space, the whole free
// space once it exceeds the offer by half the full space.
std::uint32_t unscaled_window(std::uint32_t rcv_wnd, std::int64_t free_space, std::int64_t mss,
                              std::int64_t full_space);

// Sets up one direction of a connection: the sender's route caps from its route device
// (sk_setup_caps), size goal, and the window the receiver offers. Both sockets must be registered
// in their namespaces; a request/response pair is connected both ways.
void tcp_connect(Net& net, TcpSock& sender, TcpSock& receiver);
// The netperf sender loop: send(send_size) until blocked or to_send is exhausted.
void tcp_start_sender(Net& net, TcpSock& sock);
// The warm-up is over: 6.x rcv_ssthresh starts anew from the next skb queued (see
// tcp_grow_window in tcp.cpp: the model's start is not the kernel's).
void tcp_warmed_up(TcpSock& sock);
// TCP_RR: the client's first request (each later one follows the previous response).
void tcp_start_rr(Net& net, TcpSock& client);
// tcp_v4_rcv: an skb delivered to the socket (data for the receiver, ACKs for the sender).
void tcp_v4_rcv(Net& net, ExecCtx& ctx, TcpSock& sock, Skb& skb);
// Frees everything a socket still holds (end of run).
void tcp_close(Net& net, ExecCtx& ctx, TcpSock& sock);

}  // namespace skbsim::sim
