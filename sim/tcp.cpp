// tcp.cpp — TCP sender and receiver (see tcp.hpp for what is and is not modelled).

#include "sim/tcp.hpp"

#include <algorithm>
#include <bit>
#include <utility>

#include "skbsim/bug.hpp"

namespace skbsim::sim {
namespace {

constexpr std::uint32_t kTcpHeader = 32;       // 20 + 12 bytes of timestamps
constexpr std::uint32_t kChecksumBreak = 76;   // CHECKSUM_BREAK: short skbs are verified at once
constexpr Time kDelackMin = 40 * 1000 * kPsPerUs;  // TCP_DELACK_MIN (HZ/25)
// One jiffy: CONFIG_HZ=250, 2.6.20's default and the measured 6.18 guests' (/proc/config.gz).
constexpr Time kJiffy = kPsPerSec / 250;
// The retransmission timeout with a sub-millisecond RTT, in jiffies: srtt/8 + rttvar, rttvar at
// least TCP_RTO_MIN (200 ms). 2.6.20 keeps srtt in jiffies (0 here): 50; 6.x in microseconds,
// rounded up to jiffies (__tcp_set_rto: usecs_to_jiffies): 51.
constexpr std::int64_t kRto2620Jiffies = 50;
constexpr std::int64_t kRto6xJiffies = 51;
constexpr std::uint8_t kFlagVerified = 4;      // the receiver's checksum is verified
constexpr std::uint32_t kTcpMssDefault = 536;  // TCP_MSS_DEFAULT (2.6.20: TCP_MIN_RCVMSS)
constexpr std::uint32_t kTcpMinMss = 88;       // TCP_MIN_MSS

// The headroom TCP reserves (KernelModel::max_tcp_header): 2.6.20 i386 SKB_DATA_ALIGN(128 + 32)
// = 192, 6.x with a distribution config L1_CACHE_ALIGN(128 + 176) = 320.
std::uint32_t max_tcp_header(const Net& net) { return net.kernel().max_tcp_header; }

// 2.6.20: the receive window open now, the buffer less what is received and not yet read.
std::uint32_t window_now(const TcpSock& s) {
  return s.rcv_wnd - std::min(s.rcv_wnd, s.rcv_nxt - s.copied_seq);
}

// 6.x's receive window (tcp.h, tcp_output.c __tcp_select_window / tcp_select_window, tcp_input.c
// tcp_grow_window). The model keeps sk_rcvbuf at the flow's rcvbuf (no tcp_rcv_space_adjust) and
// leaves out what only memory pressure changes.

// tp->advmss: the MSS this end announced, without the timestamp option's 12 bytes that the
// model's mss (mss_cache) has taken off.
std::uint32_t advmss(const TcpSock& s) {
  return s.params.mss + kTcpHeader - 20;
}

// tcp_rmem[2], which sizes rcv_wscale (tcp_select_initial_window) and bounds __tcp_grow_window:
// the flow's tcp_rmem_max when it has one; else its rcvbuf when larger (a flow measured before
// 2026-12-06 has its host's tcp_rmem[2] as rcvbuf), else the default tcp_init() sets on any
// machine with memory to spare, 6 MB.
constexpr std::int64_t kTcpRmemMaxDefault = 6 * 1024 * 1024;
// tcp_rmem[1], a socket's buffer before autotuning grows it (the default, 128 KB).
constexpr std::int64_t kTcpRmemDefault = 128 * 1024;
// tcp_full_space() while scaling_ratio is still its default, half: the window a buffer of
// `rcvbuf` bytes holds before any skb has been measured (the handshake's, and the initial window).
std::int64_t initial_full_space(std::int64_t rcvbuf) {
  return rcvbuf >> 1;
}

std::int64_t tcp_rmem_max(const TcpSock& s) {
  if (s.params.tcp_rmem_max != 0) {
    return s.params.tcp_rmem_max;
  }
  return std::max<std::int64_t>(s.params.rcvbuf, kTcpRmemMaxDefault);
}

// tcp_win_from_space(): space * scaling_ratio >> TCP_RMEM_TO_WIN_SCALE (8), negative kept.
std::int64_t win_from_space(const TcpSock& s, std::int64_t space) {
  return (space * s.scaling_ratio) >> 8;
}

// tcp_space(): the window the memory not yet charged to the socket would hold. The backlog's
// skbs count twice while __release_sock runs them: sk_backlog.len keeps their truesize until the
// loop ends, and each is charged to sk_rmem_alloc as it is queued.
std::int64_t tcp_space(const TcpSock& s) {
  return win_from_space(
      s, static_cast<std::int64_t>(s.params.rcvbuf) - s.backlog_len - s.sk.rmem_alloc);
}

// ALIGN(w, 1 << rcv_wscale) and round_down(w, 1 << rcv_wscale).
std::int64_t wscale_align(const TcpSock& s, std::int64_t w) {
  const std::int64_t unit = std::int64_t{1} << s.rcv_wscale;
  return (w + unit - 1) & ~(unit - 1);
}
std::int64_t wscale_round_down(const TcpSock& s, std::int64_t w) {
  return w & ~((std::int64_t{1} << s.rcv_wscale) - 1);
}

// __tcp_select_window() with tcp_shrink_window 0 (the default): the free space, capped by
// rcv_ssthresh and rounded up to the scale unit; when it is under half the full space, quickack
// mode ends and the space is rounded down instead, or is a zero window under rcv_mss or under a
// sixteenth of the buffer's window. Without window scaling (a small buffer locked by SO_RCVBUF)
// the offer moves in whole MSS instead (unscaled_window).
std::uint32_t select_window(TcpSock& s) {
  std::int64_t mss = s.rcv_mss;
  std::int64_t free_space = tcp_space(s);
  const std::int64_t allowed_space = win_from_space(s, s.params.rcvbuf);  // tcp_full_space()
  const std::int64_t full_space = std::min<std::int64_t>(s.window_clamp, allowed_space);
  if (mss > full_space) {
    mss = full_space;
    if (mss <= 0) {
      return 0;
    }
  }
  if (free_space < (full_space >> 1)) {
    s.quickack = false;
    free_space = wscale_round_down(s, free_space);
    if (free_space < (allowed_space >> 4) || free_space < mss) {
      return 0;
    }
  }
  free_space = std::min<std::int64_t>(free_space, s.rcv_ssthresh);
  if (s.rcv_wscale == 0) {
    return unscaled_window(s.last_adv_wnd, free_space, mss, full_space);
  }
  return static_cast<std::uint32_t>(wscale_align(s, free_space));
}

// tcp_receive_window(): what the last advertised window leaves open after what has arrived.
std::uint32_t receive_window(const TcpSock& s) {
  const auto win = static_cast<std::int32_t>(s.rcv_wup + s.last_adv_wnd - s.rcv_nxt);
  return win < 0 ? 0U : static_cast<std::uint32_t>(win);
}

// tcp_select_window(), for the header of each segment sent: the new window, but never one whose
// right edge is left of the last one's (tcp_shrink_window 0), and at most 65535 << rcv_wscale.
std::uint32_t tcp_select_window(TcpSock& s) {
  const std::uint32_t cur_win = receive_window(s);
  std::int64_t new_win = select_window(s);
  if (new_win < cur_win) {
    new_win = wscale_align(s, cur_win);
  }
  new_win = std::min<std::int64_t>(new_win, std::int64_t{65535} << s.rcv_wscale);
  s.last_adv_wnd = static_cast<std::uint32_t>(new_win);
  return s.last_adv_wnd;
}

// tcp_grow_window(sk, skb, adjust), from tcp_event_data_recv for each in-order skb of 128 bytes
// or more (adjust) and from tcp_data_queue_ofo (not): while the space left after the skb is
// queued exceeds rcv_ssthresh (and window_clamp), raise rcv_ssthresh by up to twice the skb's
// length, when skbs of its len/truesize would fit the buffer (check #2, __tcp_grow_window), and
// enter quickack mode for one ACK. So rcv_ssthresh ends at the space the queue leaves after the
// emptiest arrival: one skb's window under the clamp when the reader drains the queue between
// arrivals, which makes the first skb after a drain offer exactly the window last advertised and
// be ACKed at once (__tcp_ack_snd_check); above that once a smaller skb (a write's sub-MSS tail)
// has landed on an emptied queue, and then the first skb after a drain waits for the reader's
// tcp_cleanup_rbuf.
// The model has neither slow start (tcp.hpp) nor receive-buffer autotuning: it starts in the
// steady state, after tcp_rcv_space_adjust has stopped raising sk_rcvbuf (within the stream's
// first seconds; tcp_rcvbuf_grow raises the space, and the next skb rcv_ssthresh with it). So the
// first skb queued sets rcv_ssthresh to where the growth stops, the space left after it, and so
// does the first after the warm-up (tcp_warmed_up): the model's own start, whose reader is still
// awake and may empty the queue before a write's sub-MSS tail lands (in the steady state it wakes
// after a whole write has arrived), must not leave rcv_ssthresh above that for the rest of the
// run. In the kernel that steady state is a race: on kvm-2core-v1147 one tail in five to fifteen
// found the queue emptied, which lifted rcv_ssthresh until the buffer next grew and left one ACK
// per write where the model sends two; the committed sets' runs range from one to two
// (scripts/rcv-window.sh; docs/measure.md, "One ACK per write, or two").
void tcp_grow_window(const Net& net, TcpSock& s, const Skb& skb, bool adjust) {
  const std::int64_t space = std::min<std::int64_t>(s.window_clamp, tcp_space(s));
  if (!s.ssthresh_grown) {
    // Never below where the kernel's starts, which only memory pressure (tcp_clamp_window,
    // tcp_adjust_rcv_ssthresh; not modelled) lowers: the initial window, the buffer's full space
    // at the handshake in whole segments under the clamp (tcp_select_initial_window, no longer
    // capped at 64 KB in the 6.x kernels modelled), the buffer being tcp_rmem[1] (128 KB) until
    // autotuning grows it, or the locked SO_RCVBUF. A buffer smaller than an skb's window would
    // otherwise leave the window under one MSS: zero.
    const std::int64_t buffer = s.params.rcvbuf_locked ? s.params.rcvbuf : kTcpRmemDefault;
    const std::int64_t mss = advmss(s);
    const std::int64_t initial =
        std::min<std::int64_t>(s.window_clamp, initial_full_space(buffer) / mss * mss);
    s.ssthresh_grown = true;
    s.rcv_ssthresh = static_cast<std::uint32_t>(std::max(space, initial));
    return;
  }
  const std::int64_t room = space - s.rcv_ssthresh;
  if (room <= 0) {
    return;
  }
  const std::int64_t len = skb.len();
  std::int64_t truesize = skb.truesize();
  if (adjust && skb.headlen() == 0) {  // truesize_adjust(): a head with no payload is not counted
    truesize -= net.kernel().skb_truesize(skb.end_offset());
    if (truesize < len) {
      truesize = skb.truesize();
    }
  }
  std::int64_t incr = 0;
  if (win_from_space(s, truesize) <= len) {
    incr = 2 * static_cast<std::int64_t>(advmss(s));
  } else {
    // __tcp_grow_window(): halve both until the skb's window fits its length
    std::int64_t t = win_from_space(s, truesize) >> 1;
    std::int64_t window = win_from_space(s, tcp_rmem_max(s)) >> 1;
    while (s.rcv_ssthresh <= window) {
      if (t <= len) {
        incr = 2 * static_cast<std::int64_t>(s.rcv_mss);
        break;
      }
      t >>= 1;
      window >>= 1;
    }
  }
  if (incr != 0) {
    incr = std::max(incr, 2 * len);
    s.rcv_ssthresh += static_cast<std::uint32_t>(std::min(room, incr));
    s.quickack = true;
  }
}

void submit(ExecCtx& ctx, std::function<void()> fn) { ctx.cpu().submit({&ctx, std::move(fn)}); }

// --timeline: records `kind` for `s`, run in `ctx`, at the running task's clock. One branch when
// the timeline is off.
void note(Net& net, const ExecCtx& ctx, TcpSock& s, SockEventKind kind, std::uint64_t bytes = 0,
          AckPath path = AckPath::kDataSoftirq) {
  if (s.timeline == nullptr) [[likely]] {
    return;
  }
  s.timeline->push_back({.time = net.engine().task_clock(),
                         .ctx = &ctx,
                         .kind = kind,
                         .ack_path = static_cast<std::uint8_t>(path),
                         .bytes = static_cast<std::uint32_t>(bytes),
                         .unread = s.rcv_nxt - s.copied_seq});
}

// Once the current task is done, `fn` as the process's next task, ahead of what is queued.
template <class F>
void next_task(Net& net, TcpSock& s, F fn) {
  net.engine().after_task(
      [&s, fn = std::move(fn)]() mutable { s.proc->cpu().submit_next({s.proc, std::move(fn)}); });
}

// Charges `sym` to the process for work that does not hold the socket (in_syscall until the
// current task is done): what arrives meanwhile is the softirq's to process, not the backlog's.
void charge_unlocked(Net& net, TcpSock& s, Sym sym) {
  s.in_syscall = true;
  net.charge(*s.proc, sym);
  net.engine().after_task([&s] { s.in_syscall = false; });
}

// The reader's copying call that has not returned yet returns now (ReadTiming).
void close_read(Net& net, TcpSock& s) {
  if (s.open_read_bytes == 0) {
    return;
  }
  const std::int64_t d = net.engine().task_clock() - s.call_start_ps;
  s.stats.reader.timed.add(static_cast<double>(s.open_read_bytes), static_cast<double>(d) / 1e6);
  s.open_read_bytes = 0;
}

// A copying call of `bytes` (at least one) ends its copying; it returns once its release_sock
// has run: at the process's next call, or, when the reader goes to sleep, once no release is
// pending. Its start stays in call_start_ps until then: only the next call moves it.
void open_read(TcpSock& s, std::uint64_t bytes) noexcept {
  s.open_read_bytes = bytes;
}

// The start of one of the application's calls, after its system call's entry: the one before
// it has returned (where syscall() charges the exit and the entry, before them).
void begin_call(Net& net, TcpSock& s) {
  close_read(net, s);
  s.call_start_ps = net.engine().task_clock();
  s.call_timed = false;  // a send() times itself (sendmsg_call); no other call's transmits count
}

// A system call made by the application: its entry and exit (cpu.syscall_us: under
// virtualisation a microsecond, more than most calls' own work), then `call`, the work between
// them. The entry and exit are charged in a task of their own, which holds no socket, as the
// kernel's entry_SYSCALL_64 and the application's user-space loop do not. The model charges the
// exit of one call and the entry of the next together, before the next. Without the preset key,
// `call` runs at once, its syscall symbols' cycles standing for the entry (the 2007 presets).
void syscall(Net& net, TcpSock& s, void (*call)(Net&, TcpSock&)) {
  if (net.cost_model().syscall_ps == 0) {
    begin_call(net, s);
    call(net, s);
    return;
  }
  next_task(net, s, [&net, &s, call] {
    close_read(net, s);  // the call before returned ahead of its exit's charge
    charge_unlocked(net, s, Sym::kSyscall);
    next_task(net, s, [&net, &s, call] {
      begin_call(net, s);
      call(net, s);
    });
  });
}

void tcp_write_xmit(Net& net, ExecCtx& ctx, TcpSock& s);
void sendmsg_task(Net& net, TcpSock& s);
void run_backlog(Net& net, TcpSock& s);
void tcp_release_cb(Net& net, ExecCtx& ctx, TcpSock& s);
void release_sock(Net& net, TcpSock& s);
void release_pass_done(Net& net, TcpSock& s);
void release_cb_task(Net& net, TcpSock& s);
void end_call(Net& net, TcpSock& s);

// The addresses, ports and flags of a segment this socket sends.
PacketMeta segment_meta(const TcpSock& s, std::uint8_t flags) {
  PacketMeta m;
  m.saddr = s.saddr;
  m.daddr = s.daddr;
  m.sport = s.sport;
  m.dport = s.dport;
  m.proto = 6;
  m.flags = flags;
  return m;
}

// skb_entail(): a new segment skb on the write queue, header released.
Skb* new_segment(Net& net, ExecCtx& ctx, TcpSock& s) {
  OpCtx o = net.op(ctx);
  const std::uint32_t h = max_tcp_header(net);
  Skb* skb = ops::alloc_skb_fclone(o, (s.linear ? s.params.mss : 0U) + h);
  if (skb == nullptr) {
    return nullptr;
  }
  ops::reserve(o, *skb, h);
  const bool csum = !net.v2620() || (s.route_caps & feat::kAllCsum) != 0;
  skb->ip_summed = csum ? IpSummed::kPartial : IpSummed::kNone;
  skb->protocol = 0x0800;
  PacketMeta& m = meta(*skb);
  m = segment_meta(s, kFlagData | kFlagAck);
  m.seq = m.end_seq = s.write_seq;
  // Data segments are numbered from 1 in sequence order; the traced one marks its skb.
  m.trace_seg = s.write_seq / s.params.mss + 1;
  const std::uint32_t traced = net.traced_segment();
  skb->set_traced(traced != 0 && traced >= m.trace_seg &&
                  traced < m.trace_seg + std::max(1U, s.size_goal / s.params.mss));
  ops::header_release(o, *skb);
  s.write_queue.push_back(*skb);
  s.wmem_queued += skb->truesize();
  if (s.send_head == nullptr) {
    s.send_head = skb;
  }
  return skb;
}

bool can_append(const TcpSock& s, const Skb* tail, const KernelModel& k) {
  if (tail == nullptr || s.send_head == nullptr || tail->len() >= s.size_goal) {
    return false;
  }
  if (s.linear) {
    return tail->tailroom() > 0;
  }
  const SharedInfo& si = tail->shinfo();
  const bool coalesce = si.nr_frags > 0 && si.frags[si.nr_frags - 1].page == s.page &&
                        s.page != nullptr && s.page_off < s.page_bytes &&
                        si.frags[si.nr_frags - 1].off + si.frags[si.nr_frags - 1].size == s.page_off;
  return coalesce || si.nr_frags < k.max_skb_frags;
}

// The copy loop of tcp_sendmsg: returns with `left` == 0, or blocked on the send buffer (false),
// or (true) after pushing a full skb whose transmit raised NET_RX on this CPU, which runs inside
// the push (local_bh_enable()) before the copy goes on.
bool sendmsg_copy(Net& net, ExecCtx& ctx, TcpSock& s, std::uint32_t& left) {
  OpCtx o = net.op(ctx);
  while (left > 0) {
    Skb* tail = s.write_queue.empty() ? nullptr : &s.write_queue.back();
    if (!can_append(s, tail, net.kernel())) {
      if (s.wmem_queued >= s.params.sndbuf) {
        return false;  // sk_stream_wait_memory
      }
      // 6.x tcp_sendmsg_locked: after 16 new skbs in one call, sk_flush_backlog runs what the
      // backlog holds (the ACKs of what the call sent), the socket still owned, before the next
      // is allocated ("if (unlikely(process_backlog >= 16))"). 2.6.20's tcp_sendmsg has no such
      // step. What the ACKs transmit raised NET_RX, which runs before the copy goes on.
      if (!net.v2620() && s.call_new_skbs >= 16) {
        s.call_new_skbs = 0;
        run_backlog(net, s);
        tcp_release_cb(net, ctx, s);
        if (net.softnet(ctx).raised) {
          return true;
        }
        continue;
      }
      tail = new_segment(net, ctx, s);
      ++s.call_new_skbs;
      if (tail == nullptr) {
        return false;
      }
    }
    std::uint32_t copy = std::min(left, s.size_goal - tail->len());
    const bool fused = tail->ip_summed == IpSummed::kNone;
    if (s.linear) {
      copy = std::min(copy, tail->tailroom());
      ops::add_data(o, *tail, copy);  // csum_and_copy_from_user or copy_from_user
    } else {
      if (s.page == nullptr || s.page_off >= s.page_bytes) {
        if (s.page != nullptr) {
          ops::put_page(o, *s.page);  // the socket's own reference
        }
        s.page = ops::alloc_page(o);
        s.page_off = 0;
      }
      copy = std::min(copy, s.page_bytes - s.page_off);
      const SharedInfo& si = tail->shinfo();
      const bool coalesce = si.nr_frags > 0 && si.frags[si.nr_frags - 1].page == s.page &&
                            si.frags[si.nr_frags - 1].off + si.frags[si.nr_frags - 1].size ==
                                s.page_off;
      net.charge(ctx, tail,
                 fused ? Work{.sym = Sym::kCsumPartialCopyGeneric, .fused = copy}
                       : Work{.sym = Sym::kCopyFromUser, .copied = copy});
      if (coalesce) {
        ops::frag_grow(o, *tail, copy, copy);
      } else {
        ops::get_page(o, *s.page);
        ops::add_rx_frag(o, *tail, si.nr_frags, *s.page, s.page_off, copy, copy);
      }
      s.page_off += copy;
      s.wmem_queued += copy;
    }
    meta(*tail).end_seq += copy;
    s.write_seq += copy;
    left -= copy;
    s.stats.bytes_sent += copy;
    // A full skb goes out at once (tcp_push_one, or __tcp_push_pending_frames on a forced push;
    // both versions), before the next is filled; the last one, with the call's tcp_push.
    if (left > 0 && tail->len() >= s.size_goal) {
      tcp_write_xmit(net, ctx, s);
      if (net.softnet(ctx).raised) {
        return true;
      }
    }
  }
  return false;
}

// A data skb the current send() transmitted in its own context at `t` (WriterStats). As the
// kernel's probe, a resumed task's first transmit counts as resumed only after the call's first.
void time_call_transmit(TcpSock& s, std::uint32_t payload, Time t) {
  WriterStats& w = s.stats.writer;
  ++s.call_xmits;
  if (s.call_xmits == 1) {
    w.call_first.add(t - s.call_start_ps);
  } else if (s.call_xmits == 2) {
    w.first_second.add(t - s.call_last_xmit);
  } else if (s.call_xmits == 3) {
    w.second_third.add(t - s.call_last_xmit);
  }
  if (s.call_resumed >= 0 && s.call_xmits >= 2) {
    (payload >= s.params.mss ? w.resume_full : w.resume_tail).add(t - s.call_resumed);
  }
  s.call_last_xmit = t;
  s.call_resumed = -1;
}

void tcp_transmit_skb(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool clone_it) {
  net.charge(ctx, &skb, {.sym = Sym::kTcpTransmitSkb});
  OpCtx o = net.op(ctx);
  Skb* c = &skb;
  if (clone_it) {
    c = skb.cloned() ? ops::pskb_copy(o, skb) : ops::clone(o, skb);
    if (c == nullptr) {
      return;
    }
  }
  // The header: every segment acknowledges what this socket has received and offers its window
  // (tcp_transmit_skb); sending it cancels a pending delayed ACK (tcp_event_ack_sent).
  PacketMeta& m = meta(*c);
  m.ack = s.rcv_nxt;
  m.tsval = static_cast<std::uint32_t>(net.engine().now() / (kPsPerSec / 1000));  // tcp_clock_ms
  if (net.v2620()) {
    m.wnd = window_now(s);
    s.last_adv_wnd = m.wnd;
  } else {
    m.wnd = tcp_select_window(s);
    // tcp_event_ack_sent -> tcp_dec_quickack_mode: an ACK sent while one is scheduled uses up
    // the one quick ACK
    if (s.ack_sched) {
      s.quickack = false;
    }
  }
  s.ack_sched = false;
  s.rcv_wup = s.rcv_nxt;
  s.ack_pushed = s.ack_pushed2 = false;
  s.delack_armed = false;
  ops::push(o, *c, kTcpHeader);
  ops::set_transport_header(*c, 0);
  ops::set_owner_w(o, *c, s.sk);
  net.charge(ctx, c, {.sym = Sym::kTcpV4SendCheck});
  if (c->ip_summed == IpSummed::kPartial) {
    c->csum_start = c->transport_header;  // pseudo-header only
    c->csum_offset = 16;
  } else {
    ops::csum_partial(o, kTcpHeader);  // the header, folded with the payload's sum
  }
  const bool data = (m.flags & kFlagData) != 0;
  // Timed where the kernel's probe fires, at the device's start_xmit (WriterStats).
  const bool timed = data && s.call_timed && &ctx == s.proc;
  const std::uint32_t payload = m.end_seq - m.seq;
  if (data) {
    s.stats.segs_out += std::max(1U, c->shinfo().gso_segs);
    // tcp_minshall_update(): remember the end of a segment shorter than its MSS multiple.
    if (m.end_seq - m.seq < std::max(1U, c->shinfo().gso_segs) * s.params.mss) {
      s.snd_sml = m.end_seq;
    }
  }
  net.hop(ctx, *c, "tcp_transmit_skb ", s.ns->name);
  if (data) {
    note(net, ctx, s, SockEventKind::kXmit, payload);
  }
  if (timed) {
    net.arm_xmit_stamp();
  }
  net.ip_queue_xmit(ctx, *s.ns, *c);
  if (timed) {
    if (const Time t = net.xmit_stamp(); t >= 0) {
      time_call_transmit(s, payload, t);
    }
  }
}

// tcp_tso_should_defer's full-sized TSO skb: 2.6.20 compares the window with 65536 bytes, 6.x
// with max_segs * mss_cache (gso_max_segs 65535: in effect gso_max_size, 65536 on veth and most
// NICs without BIG TCP).
constexpr std::uint32_t kTsoDeferFull = 65536;

// tso_fragment (6.x; 2.6.20's for a paged skb, tcp_fragment for a linear one, both splitting it
// the same way here): the write-queue skb keeps its first `len` bytes, a new skb after it in the
// queue takes the rest (skb_split), with the truesize of that data and the PSH flag. False when
// the new skb cannot be allocated (the skb waits).
bool tso_fragment(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, std::uint32_t len) {
  net.charge(ctx, &skb, {.sym = Sym::kTsoFragment});
  OpCtx o = net.op(ctx);
  const std::uint32_t h = max_tcp_header(net);
  const std::uint32_t nlen = skb.len() - len;
  // 6.x tcp_stream_alloc_skb(sk, gfp, true): a header-only skb; 2.6.20's tcp_fragment of a
  // linear skb makes room for the linear tail it copies.
  Skb* buff = ops::alloc_skb_fclone(o, h + (skb.headlen() > len ? skb.headlen() - len : 0U));
  if (buff == nullptr) {
    return false;
  }
  ops::reserve(o, *buff, h);
  buff->ip_summed = skb.ip_summed;
  buff->protocol = skb.protocol;
  s.wmem_queued += buff->truesize();  // sk_wmem_queued_add
  ops::move_truesize(skb, *buff, nlen);
  PacketMeta& m = meta(skb);
  PacketMeta& b = meta(*buff);
  b = m;
  b.seq = m.seq + len;
  b.trace_seg = b.seq / s.params.mss + 1;
  m.end_seq = b.seq;
  m.flags = static_cast<std::uint8_t>(m.flags & ~kFlagPsh);  // PSH (and FIN) stay on the last
  ops::split(o, skb, *buff, len);
  buff->set_traced(skb.traced());
  // tcp_set_skb_tso_segs on both: the model sets gso_size and gso_segs when it sends an skb
  // (tcp_write_xmit, below), so the cut one's are cleared here (the new one has none); the rest
  // may still grow meanwhile, as the kernel's tcp_sendmsg resets an skb's count when it appends
  // (tcp_skb_pcount_set(skb, 0)). (2.6.20's tcp_fragment of a linear skb moves less truesize;
  // the model's 2.6.20 skbs that outgrow an MSS are paged.)
  ops::set_gso(skb, 0, 0, 0);
  ops::header_release(o, *buff);
  s.write_queue.insert(std::next(SkbQueue::s_iterator_to(skb)), *buff);
  return true;
}

std::int64_t jiffies(Net& net) {
  return net.engine().now() / kJiffy;
}

// sk_reset_timer -> mod_timer, `delay` (at least one) jiffies from now: the timer is queued on
// the wheel again (__mod_timer, charged) unless it is pending there with that expiry already
// ("a common optimization triggered by the networking code": 2.6.20 mod_timer returns before
// calling __mod_timer, 6.x __mod_timer at its start; the compare is not charged). An expiry
// still ahead is a pending timer's, so equal expiries are all it takes. 6.x also skips the
// queueing for another expiry in the same bucket, which below 64 jiffies out only that expiry
// has. `wheel` is the timer's expiry on the wheel, `starts` counts the queueings.
void mod_timer(Net& net, ExecCtx& ctx, std::int64_t& wheel, std::int64_t delay,
               std::uint64_t& starts) {
  const std::int64_t expires = jiffies(net) + delay;
  if (wheel == expires) {
    return;
  }
  wheel = expires;
  ++starts;
  net.charge(ctx, Sym::kModTimer);
}

// Segments sent and not yet acknowledged (tp->packets_out).
std::uint32_t packets_out(const TcpSock& s) {
  return (s.snd_nxt - s.snd_una + s.params.mss - 1) / s.params.mss;
}

// inet_csk_reset_xmit_timer(ICSK_TIME_RETRANS): the retransmission timeout from now (6.x
// tcp_rearm_rto counts it from the oldest skb's send while a loss probe is pending, which the
// model takes as now: the expiry is at most this, and never the loss probe's).
void arm_rto(Net& net, ExecCtx& ctx, TcpSock& s) {
  s.loss_probe_pending = false;
  mod_timer(net, ctx, s.xmit_timer_expires, net.v2620() ? kRto2620Jiffies : kRto6xJiffies,
            s.stats.xmit_timer_starts);
}

// 6.x tcp_schedule_loss_probe (tcp_early_retrans 3, SACK, the congestion state open: the model's
// streams): the tail loss probe, on the same timer, two smoothed RTTs (srtt_us >> 2) plus
// TCP_TIMEOUT_MIN_US (2 ms), or plus TCP_RTO_MIN with one segment in flight, in microseconds
// rounded up to jiffies (since 6.6, "tcp: fix excessive TLP and RACK timeouts from HZ
// rounding"), and never after the RTO: with a sub-millisecond RTT one jiffy, or the RTO's 51.
// `out`: the segments in flight, at least one.
void schedule_loss_probe(Net& net, ExecCtx& ctx, TcpSock& s, std::uint32_t out) {
  s.loss_probe_pending = true;
  mod_timer(net, ctx, s.xmit_timer_expires, out == 1 ? kRto6xJiffies : 1,
            s.stats.xmit_timer_starts);
}

// tcp_event_new_data_sent, for a data skb just sent, `prior`: with data in flight before it. The
// first skb in flight arms the retransmission timer (2.6.20 tcp_packets_out_inc), and 6.x re-arms
// it while the loss probe is pending ("if (!prior_packets || icsk->icsk_pending ==
// ICSK_TIME_LOSS_PROBE) tcp_rearm_rto(sk)").
void event_new_data_sent(Net& net, ExecCtx& ctx, TcpSock& s, bool prior) {
  if (!prior || s.loss_probe_pending) {
    arm_rto(net, ctx, s);
  }
}

// An ACK that acknowledged data: 6.x tcp_set_xmit_timer (the loss probe, else tcp_rearm_rto),
// 2.6.20 tcp_ack_packets_out (the RTO from now). With nothing left in flight the timer is
// cleared: icsk_pending only, the timer stays queued.
void ack_xmit_timer(Net& net, ExecCtx& ctx, TcpSock& s) {
  const std::uint32_t out = packets_out(s);
  if (out == 0) {
    s.loss_probe_pending = false;
  } else if (net.v2620()) {
    arm_rto(net, ctx, s);
  } else {
    schedule_loss_probe(net, ctx, s, out);
  }
}

void tcp_write_xmit(Net& net, ExecCtx& ctx, TcpSock& s) {
  net.charge(ctx, Sym::kTcpWriteXmit);
  OpCtx o = net.op(ctx);
  bool sent = false;
  while (s.send_head != nullptr) {
    Skb& skb = *s.send_head;
    const PacketMeta& m = meta(skb);
    std::uint32_t len = m.end_seq - m.seq;
    const bool is_last = &skb == &s.write_queue.back();
    const bool in_flight = s.snd_nxt != s.snd_una;
    // tcp_minshall_check(): an earlier sub-MSS segment is still unacknowledged.
    const bool small_unacked = static_cast<std::int32_t>(s.snd_sml - s.snd_una) > 0 &&
                               static_cast<std::int32_t>(s.snd_sml - s.snd_nxt) <= 0;
    // The window left for this skb (the model has no congestion window: the steady state's is
    // the receiver's window).
    const auto room = static_cast<std::int32_t>(s.snd_una + s.snd_wnd - m.seq);
    const std::uint32_t limit = room < 0 ? 0U : static_cast<std::uint32_t>(room);
    if (is_last && in_flight &&
        ((len < s.params.mss && small_unacked) ||
         (len > s.params.mss && len < s.size_goal && s.to_send != 0 && limit < kTsoDeferFull))) {
      // Nagle (Minshall's variant) holds a sub-MSS tail while an earlier small segment is in
      // flight (tcp_nagle_test, for a one-segment skb). A GSO skb still short of its size goal
      // waits for the writer to fill it only when the window would not take a full-sized one
      // (tcp_tso_should_defer: "If a full-sized TSO skb can be sent, do it", both versions).
      break;
    }
    // tcp_snd_wnd_test: the skb's first MSS must fit in the receiver's window.
    if (std::min(len, s.params.mss) > limit) {
      break;
    }
    if (len > limit) {
      // tcp_tso_should_defer: with data in flight and less than a third of the window open
      // (tcp_tso_win_divisor 3, both versions), wait for the ACK that opens more.
      if (in_flight && limit < s.snd_wnd / 3) {
        break;
      }
      // tcp_mss_split_point: as much as the window takes, in whole segments while a sub-MSS
      // remainder would wait under Nagle (tcp_nagle_check: an earlier small one unacknowledged);
      // tso_fragment cuts the skb there and the rest waits for the window. (The kernel also trims
      // a sub-MSS end off a tail skb that fits, under the same Nagle check, and defers less: not
      // while the oldest unacknowledged skb is younger than half an RTT. The model has neither.)
      const std::uint32_t partial = limit % s.params.mss;
      const std::uint32_t cut =
          partial != 0 && in_flight && small_unacked ? limit - partial : limit;
      if (!tso_fragment(net, ctx, s, skb, cut)) {
        break;
      }
      len = cut;
    }
    if (len > s.params.mss && skb.shinfo().gso_size == 0) {
      // tcp_set_skb_tso_segs(): gso_size/gso_segs on the write-queue skb, before the clone.
      ops::set_gso(skb, s.params.mss, (len + s.params.mss - 1) / s.params.mss, 1 /* TCPV4 */);
    }
    // The traced segment's skb is known for sure once its length is final.
    const std::uint32_t traced = net.traced_segment();
    const std::uint32_t first = m.seq / s.params.mss + 1;
    const std::uint32_t count = (len + s.params.mss - 1) / s.params.mss;
    skb.set_traced(traced != 0 && traced >= first && traced < first + count);
    tcp_transmit_skb(net, ctx, s, skb, true);
    s.snd_nxt = m.end_seq;
    event_new_data_sent(net, ctx, s, in_flight);
    sent = true;
    auto it = SkbQueue::s_iterator_to(skb);
    ++it;
    s.send_head = it == s.write_queue.end() ? nullptr : &*it;
  }
  // 6.x, having sent something: "Send one loss probe per tail loss episode."
  if (sent && !net.v2620()) {
    schedule_loss_probe(net, ctx, s, packets_out(s));
  }
  (void)o;
}

// Wakes the socket's process to run `fn`: try_to_wake_up from `ctx`, unless the process is the
// one running release_sock, which found the condition it waited for met and goes on without
// having slept (__sk_flush_backlog).
void wake_owner(Net& net, ExecCtx& ctx, TcpSock& s, std::function<void()> fn) {
  if (s.in_release) {
    net.engine().after_task([&s, fn = std::move(fn)]() mutable { submit(*s.proc, std::move(fn)); });
    return;
  }
  net.wake_process(ctx, *s.proc, std::move(fn));
}

// The application's next send() once one has returned. Unpaced (netperf), at once. Paced (iperf3
// -b), iperf_check_throttle first: the average rate since the start, bytes written * 8 / elapsed,
// must be below the target, else the sender sleeps in select() until its pacing timer's next tick
// (every --pacing-timer from the start) and checks again. The timer's wake-up (hrtimer interrupt,
// try_to_wake_up of the sleeping sender on its own CPU) is charged to the sender.
void throttle_check(Net& net, TcpSock& s) {
  const Time now = net.engine().now();
  const Time elapsed = now - s.app_start;
  const double bits = static_cast<double>(s.stats.bytes_sent) * 8.0;
  if (elapsed > 0 &&
      bits * static_cast<double>(kPsPerSec) < static_cast<double>(s.params.rate_bps) *
                                                  static_cast<double>(elapsed)) {
    submit(*s.proc, [&net, &s] { sendmsg_task(net, s); });
    return;
  }
  const Time tick = static_cast<Time>(s.params.pacing_timer_us) * kPsPerUs;
  const Time next = s.app_start + (elapsed / tick + 1) * tick;
  ++s.pacing_sleeps;
  net.engine().at(next, [&net, &s] {
    submit(*s.proc, [&net, &s] {
      net.charge(*s.proc, Sym::kScheduleWakeup);  // the pacing timer wakes the sender
      net.charge(*s.proc, Sym::kSchedule);        // which had switched out to sleep
      net.charge(*s.proc, Sym::kSchedule);        // and switches in
      throttle_check(net, s);
    });
  });
}

void next_send(Net& net, TcpSock& s) {
  if (s.params.rate_bps == 0) {
    net.engine().after_task([&net, &s] { submit(*s.proc, [&net, &s] { sendmsg_task(net, s); }); });
    return;
  }
  net.engine().after_task([&net, &s] { throttle_check(net, s); });
}

// The rest of a send() call from `left` bytes on: the copy loop, tcp_push, and the call's return
// (or its wait for buffer space). A push whose NET_RX must run first suspends it: it goes on as
// a process task of its own, which its CPU takes after the softirq.
void sendmsg_body(Net& net, TcpSock& s, std::uint32_t left) {
  ExecCtx& ctx = *s.proc;
  if (sendmsg_copy(net, ctx, s, left)) {
    s.in_bh = true;
    s.in_send = true;
    s.pending = left;
    submit(ctx, [&net, &s] {
      s.in_bh = false;
      s.call_resumed = net.engine().now();
      sendmsg_body(net, s, std::exchange(s.pending, 0));
    });
    return;
  }
  // tcp_push: tcp_mark_push sets PSH on the write queue's last skb, if it is not yet sent.
  if (s.send_head != nullptr) {
    meta(s.write_queue.back()).flags |= kFlagPsh;
  }
  net.charge(ctx, Sym::kTcpPushPendingFrames);
  tcp_write_xmit(net, ctx, s);
  // Timed on through the release_sock below, as the kernel's probe counts every transmit until
  // write() returns; not once the call has waited for buffer space (the probe leaves out a
  // write whose task switched out), whatever it sends after.
  s.call_timed = s.call_timed && left == 0;
  // tcp_sendmsg's release_sock (before sk_stream_wait_memory sleeps, too): what reached the
  // backlog while the call's tasks ran is processed now, after its last push, not between them.
  s.in_send = false;
  s.call_new_skbs = 0;
  if (std::exchange(s.release_owed, false)) {
    s.in_bh = true;
    submit(ctx, [&net, &s] { release_sock(net, s); });
  }
  end_call(net, s);
  if (left > 0) {
    s.writer_blocked = true;  // the rest of this send() waits for ACKs to free the buffer
    s.pending = left;
    note(net, ctx, s, SockEventKind::kWait, left);
    return;
  }
  next_send(net, s);
}

void sendmsg_call(Net& net, TcpSock& s);

void sendmsg_task(Net& net, TcpSock& s) {
  if (s.app_start < 0) {
    s.app_start = net.engine().now();
  }
  if (s.to_send == 0) {
    return;
  }
  syscall(net, s, sendmsg_call);
}

// send(): tcp_sendmsg and what it transmits.
void sendmsg_call(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  const std::uint32_t left =
      static_cast<std::uint32_t>(std::min<std::uint64_t>(s.params.send_size, s.to_send));
  note(net, ctx, s, SockEventKind::kSend, left);
  net.charge(ctx, Sym::kSysSendto);
  net.charge(ctx, Sym::kTcpSendmsg);
  ++s.stats.sendmsg_calls;
  s.call_timed = true;
  s.call_xmits = 0;
  s.call_resumed = -1;
  if (s.to_send != std::numeric_limits<std::uint64_t>::max()) {
    s.to_send -= left;  // committed to this send() call
  }
  sendmsg_body(net, s, left);
}

// The writer woke in sk_stream_wait_memory: the call goes on where it stopped.
void resume_sendmsg(Net& net, TcpSock& s) { sendmsg_body(net, s, std::exchange(s.pending, 0)); }

void tcp_send_ack(Net& net, ExecCtx& ctx, TcpSock& s, AckPath path) {
  net.charge(ctx, Sym::kTcpSendAck);
  ++s.stats.acks_by_path[static_cast<std::size_t>(path)];
  note(net, ctx, s, SockEventKind::kAck, 0, path);
  OpCtx o = net.op(ctx);
  const std::uint32_t h = max_tcp_header(net);
  Skb* skb = ops::alloc_skb(o, h);
  if (skb == nullptr) {
    return;
  }
  ops::reserve(o, *skb, h);
  // 2.6.20 ACKs carry a software checksum; 6.x __tcp_v4_send_check makes every skb PARTIAL.
  skb->ip_summed = net.v2620() ? IpSummed::kNone : IpSummed::kPartial;
  skb->protocol = 0x0800;
  meta(*skb) = segment_meta(s, kFlagAck);
  tcp_transmit_skb(net, ctx, s, *skb, false);  // fills in the ACK and the window
}

void tcp_ack(Net& net, ExecCtx& ctx, TcpSock& s, const PacketMeta& m) {
  net.charge(ctx, Sym::kTcpAck);
  if (static_cast<std::int32_t>(m.ack - s.snd_una) > 0) {
    s.snd_una = m.ack;
    while (!s.write_queue.empty() && &s.write_queue.front() != s.send_head &&
           static_cast<std::int32_t>(meta(s.write_queue.front()).end_seq - s.snd_una) <= 0) {
      Skb& done = s.write_queue.front();
      s.write_queue.pop_front();
      s.wmem_queued -= done.truesize();
      // The original, kept until ACKed: 2.6.20 sk_stream_free_skb, 6.x tcp_wmem_free_skb, both
      // __kfree_skb.
      net.kfree_skb_now(ctx, done);
    }
    ack_xmit_timer(net, ctx, s);  // tcp_clean_rtx_queue: FLAG_ACKED
  }
  s.snd_wnd = m.wnd;
  tcp_write_xmit(net, ctx, s);
  const std::int64_t space = static_cast<std::int64_t>(s.params.sndbuf) - s.wmem_queued;
  if (s.writer_blocked && space >= s.wmem_queued / 2) {  // sk_stream_write_space
    s.writer_blocked = false;
    note(net, ctx, s, SockEventKind::kSpace, static_cast<std::uint64_t>(space));
    wake_owner(net, ctx, s, [&net, &s] { resume_sendmsg(net, s); });
  }
}

void tcp_recvmsg_task(Net& net, TcpSock& s);
void tcp_rcv(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool verified);
void tcp_v4_rcv_owner(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool verified);

// TCP_RR: `payload` more bytes read; each whole message read is answered (the client counts a
// transaction and, unless stopped, sends the next request).
void rr_read(TcpSock& s, std::uint32_t payload) {
  if (s.rr.in_size == 0) {
    return;
  }
  s.rr.got += payload;
  while (s.rr.got >= s.rr.in_size) {
    s.rr.got -= s.rr.in_size;
    if (s.rr.client) {
      ++s.stats.transactions;
    }
    if (!s.rr.stopped) {
      s.to_send += s.rr.out_size;
    }
  }
}

// tcp_send_delayed_ack: the delayed-ACK timer, armed kDelackMin out. Armed already, it keeps its
// older expiry, so the kernel's sk_reset_timer finds that expiry and returns early: the model
// skips the call. An ACK sent clears the flag and leaves the timer queued: re-armed within the
// same jiffy, it is not queued again either.
void arm_delack(Net& net, ExecCtx& ctx, TcpSock& s) {
  if (s.delack_armed) {
    return;
  }
  mod_timer(net, ctx, s.delack_expires, kDelackMin / kJiffy, s.stats.delack_timer_starts);
  s.delack_armed = true;
  const std::uint64_t gen = ++s.delack_gen;
  ExecCtx* timer_ctx = &ctx;
  net.engine().at(net.engine().now() + kDelackMin, [&net, &s, gen, timer_ctx] {
    if (!s.delack_armed || s.delack_gen != gen) {
      return;
    }
    submit(*timer_ctx, [&net, &s, gen, timer_ctx] {
      if (s.delack_armed && s.delack_gen == gen) {
        tcp_send_ack(net, *timer_ctx, s, AckPath::kDelackTimer);
      }
    });
  });
}

// 6.x tcp_try_coalesce: `skb`, in sequence after the receive queue's tail, merged into that tail
// (skb_try_coalesce) so that one skb carries both and the reader copies and frees one. Whether it
// can depends on the skbs: frags appended while the tail is not cloned and both fit in
// MAX_SKB_FRAGS (veth with SG: skb_segment's segments, a forwarded TSO skb); never a linear
// segment (offloads off: its kmalloc'd head cannot be stolen) nor a clone the sender still
// holds the original of (direct veth with TSO). The merged skb's truesize is charged to the
// socket (sk_rmem_alloc += delta); the caller frees `skb` (kfree_skb_partial). 2.6.20 queues
// every skb.
bool tcp_try_coalesce(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb) {
  if (net.v2620() || s.receive_queue.empty()) {
    return false;
  }
  Skb& tail = s.receive_queue.back();
  PacketMeta& t = meta(tail);
  const PacketMeta& m = meta(skb);
  if (m.seq != t.end_seq || (m.flags & kFlagVerified) != (t.flags & kFlagVerified)) {
    return false;
  }
  OpCtx o = net.op(ctx);
  std::uint32_t delta = 0;
  if (!ops::try_coalesce(o, tail, skb, &delta)) {
    return false;
  }
  s.sk.rmem_alloc += static_cast<std::int64_t>(delta);
  ++s.stats.coalesced.receive_queue;
  t.end_seq = m.end_seq;
  t.ack = m.ack;
  t.flags |= m.flags;
  net.hop(ctx, skb, "tcp_try_coalesce: into skb ", std::to_string(tail.id()));
  return true;
}

// tcp_queue_rcv (6.x) / __skb_queue_tail (2.6.20): the in-sequence skb onto the receive queue,
// or into its tail. True when it was merged and is the caller's to free.
bool tcp_queue_rcv(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb) {
  if (tcp_try_coalesce(net, ctx, s, skb)) {
    return true;
  }
  s.receive_queue.push_back(skb);
  return false;
}

// tcp_measure_rcv_mss (from tcp_event_data_recv, for in-order data), both versions: a segment at
// least rcv_mss long (a GRO or GSO skb counts its gso_size) sets rcv_mss; 6.x (since 6.5,
// "tcp: fix delayed ACKs for MSS boundary condition") also flags it ICSK_ACK_PUSHED when it
// carries PSH. A shorter one flags PUSHED (PUSHED2 when PUSHED is still set) unless it is the
// second in a row of one size, which then becomes rcv_mss (a peer whose MSS is smaller). Segments
// under TCP_MSS_DEFAULT (536, 2.6.20's TCP_MIN_RCVMSS) with PSH always flag.
void measure_rcv_mss(const Net& net, TcpSock& s, const Skb& skb) {
  constexpr std::uint32_t kTcpHdrMin = 20;  // sizeof(struct tcphdr)
  const PacketMeta& m = meta(skb);
  const bool psh = (m.flags & kFlagPsh) != 0;
  const std::uint32_t lss = s.last_seg_size;
  s.last_seg_size = 0;
  const std::uint32_t len =
      skb.shinfo().gso_size != 0 ? skb.shinfo().gso_size : m.end_seq - m.seq;
  if (len >= s.rcv_mss) {
    if (!net.v2620() && len != s.rcv_mss) {
      // 6.x: scaling_ratio = len << TCP_RMEM_TO_WIN_SCALE / truesize, and window_clamp follows.
      const std::uint32_t ratio =
          static_cast<std::uint32_t>((std::uint64_t{skb.len()} << 8) / skb.truesize());
      const std::uint32_t old_ratio = s.scaling_ratio;
      s.scaling_ratio = std::max(1U, ratio);
      if (s.scaling_ratio != old_ratio) {
        s.window_clamp = static_cast<std::uint32_t>(win_from_space(s, s.params.rcvbuf));
      }
    }
    s.rcv_mss = std::min(len, s.params.mss);
    if (psh && !net.v2620()) {
      s.ack_pushed = true;
    }
    return;
  }
  const std::uint32_t with_header = len + kTcpHeader;  // "len += skb->data - th"
  if (with_header >= kTcpMssDefault + kTcpHdrMin ||
      (with_header >= kTcpMinMss + kTcpHdrMin && !psh)) {
    s.last_seg_size = len;
    if (len == lss) {
      s.rcv_mss = len;
      return;
    }
  }
  s.ack_pushed2 = s.ack_pushed2 || s.ack_pushed;
  s.ack_pushed = true;
}

// "More than one full frame" unacknowledged, as __tcp_ack_snd_check and tcp_cleanup_rbuf count
// it: the bytes received since the last ACK (rcv_wup) against the receiver's guess of the MSS.
bool over_one_mss_unacked(const TcpSock& s) noexcept { return s.rcv_nxt - s.rcv_wup > s.rcv_mss; }

// An ACK tcp_data sends: from the backlog when the socket's owner runs it (__release_sock), else
// in the softirq that brought the skb.
AckPath data_ack_path(const TcpSock& s) noexcept {
  return s.in_release ? AckPath::kDataBacklog : AckPath::kDataSoftirq;
}

void tcp_data(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool verified) {
  OpCtx o = net.op(ctx);
  PacketMeta& m = meta(skb);
  (void)ops::pull(o, skb, kTcpHeader);
  if (verified) {
    m.flags |= kFlagVerified;
  }
  if (m.seq != s.rcv_nxt) {
    // tcp_data_queue_ofo: tcp_grow_window (SACK on) before skb_set_owner_r charges the skb
    if (!net.v2620()) {
      tcp_grow_window(net, s, skb, false);
    }
    ops::set_owner_r(o, skb, s.sk);
    s.ack_sched = true;
    // tcp_data_queue_ofo: an skb that overtook an earlier one (sent from another CPU, whose
    // backlog ran first) waits in sequence order for the hole to fill, and the receiver ACKs at
    // once (__tcp_ack_snd_check: out-of-order data). Loss, SACK and retransmission are not
    // modelled: the duplicate ACK only costs its sending.
    net.charge(ctx, &skb, {.sym = Sym::kTcpDataQueueOfo});
    auto it = s.ofo_queue.begin();
    while (it != s.ofo_queue.end() && static_cast<std::int32_t>(meta(*it).seq - m.seq) < 0) {
      ++it;
    }
    s.ofo_queue.insert(it, skb);
    note(net, ctx, s, SockEventKind::kOfo, m.end_seq - m.seq);
    tcp_send_ack(net, ctx, s, data_ack_path(s));
    return;
  }
  s.rcv_nxt = m.end_seq;
  s.ack_sched = true;  // tcp_event_data_recv: inet_csk_schedule_ack
  measure_rcv_mss(net, s, skb);
  const bool merged = tcp_queue_rcv(net, ctx, s, skb);
  note(net, ctx, s, SockEventKind::kQueue, m.end_seq - m.seq);
  if (!merged) {
    ops::set_owner_r(o, skb, s.sk);
  }
  if (!net.v2620() && skb.len() >= 128) {
    tcp_grow_window(net, s, skb, true);  // tcp_event_data_recv, after tcp_queue_rcv
  }
  if (merged) {
    net.kfree_skb_now(ctx, skb);  // kfree_skb_partial: no head was stolen
  }
  // tcp_ofo_queue: what waited for this one moves to the receive queue, or into its tail
  while (!s.ofo_queue.empty() && meta(s.ofo_queue.front()).seq == s.rcv_nxt) {
    Skb& next = s.ofo_queue.front();
    s.ofo_queue.pop_front();
    s.rcv_nxt = meta(next).end_seq;
    const bool next_merged = tcp_queue_rcv(net, ctx, s, next);
    note(net, ctx, s, SockEventKind::kQueue, meta(next).end_seq - meta(next).seq);
    if (next_merged) {
      net.kfree_skb_now(ctx, next);  // its sock_rfree gives back what the tail now holds
    }
  }
  if (s.reader_blocked) {
    s.reader_blocked = false;
    s.stats.reader.sleeps += s.in_release ? 0 : 1;  // see read_again_or_sleep
    note(net, ctx, s, SockEventKind::kWake);
    wake_owner(net, ctx, s, [&net, &s] { tcp_recvmsg_task(net, s); });
  }
  // __tcp_ack_snd_check(): ACK now when more than one full frame is unacknowledged
  // ("tp->rcv_nxt - tp->rcv_wup > inet_csk(sk)->icsk_ack.rcv_mss") and the window to advertise
  // has not shrunk since the last ACK (__tcp_select_window() >= rcv_wnd, both versions). Data
  // still unread shrinks it, so a receiver whose reader lags leaves the ACK to the reader's
  // tcp_cleanup_rbuf(). 6.x also ACKs at once in quickack mode (tcp_in_quickack_mode: a quick
  // ACK left and the connection not interactive).
  const bool ack_now = net.v2620()
                           ? over_one_mss_unacked(s) && window_now(s) >= s.last_adv_wnd
                           : (over_one_mss_unacked(s) && select_window(s) >= s.last_adv_wnd) ||
                                 (s.quickack && s.rr.in_size == 0);
  if (!ack_now) {
    arm_delack(net, ctx, s);
  } else if (!net.v2620() && s.in_release && s.ns->tcp_backlog_ack_defer) {
    // 6.x, the socket's owner running its backlog: the ACK waits for tcp_release_cb, one for the
    // whole backlog ("if (sock_owned_by_user_nocheck(sk) && sysctl_tcp_backlog_ack_defer)
    // set_bit(TCP_ACK_DEFERRED)", the sysctl on by default since 6.8), and no delayed ACK is
    // armed.
    s.ack_deferred = true;
  } else {
    tcp_send_ack(net, ctx, s, data_ack_path(s));
  }
}

// tcp_cleanup_rbuf()'s window update, for a call that copied something and is not ACKing
// anyway: when the read freed lots of space. 2.6.20 as the model had it: the window now open is
// at least twice the one last advertised. 6.x: the window the last ACK left open is at most half
// window_clamp and __tcp_select_window() offers at least twice it.
bool window_update(const Net& net, TcpSock& s) {
  if (net.v2620()) {
    const std::uint32_t now_wnd = window_now(s);
    return now_wnd >= 2 * s.last_adv_wnd && now_wnd >= 2 * s.params.mss;
  }
  const std::uint32_t rcv_window_now = receive_window(s);
  if (2 * std::uint64_t{rcv_window_now} > s.window_clamp) {
    return false;
  }
  const std::uint32_t new_window = select_window(s);
  return new_window != 0 && new_window >= 2 * std::uint64_t{rcv_window_now};
}

// tcp_cleanup_rbuf(), both versions. With an ACK scheduled (the model's delayed ACK is armed):
// the ACK __tcp_ack_snd_check deferred, when more than one MSS is unacknowledged; or, when the
// call copied something and emptied the receive buffer (sk_rmem_alloc 0: nothing queued, in
// order or not), the ACK of a pushed segment (ICSK_ACK_PUSHED, unless the connection is
// interactive, "pingpong": a request/response flow's steady state; ICSK_ACK_PUSHED2 either way).
// Otherwise, when the call copied something, a window update when the window now open is at
// least twice the one last advertised. A non-blocking read() that found nothing (EAGAIN) calls
// it too, with `copied` negative.
void cleanup_rbuf(Net& net, ExecCtx& ctx, TcpSock& s, bool copied) {
  const bool pingpong = s.rr.in_size != 0;
  const bool drained = s.receive_queue.empty() && s.ofo_queue.empty();
  const bool time_to_ack =
      s.delack_armed &&
      (over_one_mss_unacked(s) ||
       (copied && (s.ack_pushed2 || (s.ack_pushed && !pingpong)) && drained));
  if (time_to_ack || (copied && window_update(net, s))) {
    tcp_send_ack(net, ctx, s, AckPath::kCleanupRbuf);
  }
}

void recvmsg_copy(Net& net, TcpSock& s);
void read_nonblocking(Net& net, TcpSock& s);

// The reader after a call: with something queued it calls again at once (netperf loops on
// recv(), iperf3 reads until EAGAIN and its select() returns at once); with nothing it sleeps
// until tcp_data wakes it. What reaches the backlog while the call still holds the socket wakes
// it from release_sock (tcp_data, in_release: no wake-up cost): the kernel's call returns only
// after release_sock, so that reader finds the data queued and never sleeps. tcp_data counts a
// sleep only when another context wakes the reader.
void read_again_or_sleep(Net& net, TcpSock& s) {
  if (s.receive_queue.empty()) {
    s.reader_blocked = true;
    if (!s.release_pending) {
      close_read(net, s);
    }
    note(net, *s.proc, s, SockEventKind::kBlock);
    return;
  }
  net.engine().after_task(
      [&net, &s] { submit(*s.proc, [&net, &s] { tcp_recvmsg_task(net, s); }); });
}

// What one recv() (netperf) or Nread() (iperf3) asks for: recv_size, or (0) all that is queued.
std::uint64_t call_size(const TcpSock& s) noexcept {
  return s.params.recv_size == 0 ? std::numeric_limits<std::uint64_t>::max() : s.params.recv_size;
}

// A call that copied `copied` bytes, one MSS or fewer of them, is a short read.
void count_short_read(TcpSock& s, std::uint64_t copied) noexcept {
  if (copied != 0 && copied <= s.params.mss) {
    ++s.stats.reader.reads_short;
  }
}

// The end of a recv() call: tcp_cleanup_rbuf, then release_sock.
void recvmsg_end(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  s.in_recv = false;
  ++s.stats.reader.reads_copying;  // a blocking call returns once it has copied something
  count_short_read(s, call_size(s) - s.recv_left);
  note(net, ctx, s, SockEventKind::kRead, call_size(s) - s.recv_left);
  open_read(s, call_size(s) - s.recv_left);
  cleanup_rbuf(net, ctx, s, true);
  if (s.to_send != 0 && s.rr.in_size != 0) {
    sendmsg_task(net, s);  // netperf/netserver answer in the same process: send() after recv()
  } else {
    end_call(net, s);
  }
  read_again_or_sleep(net, s);
}

// __release_sock: the backlog's skbs, in the owner's context (sk_backlog_rcv = tcp_v4_do_rcv);
// in_release tells wake_owner that the owner is the one running.
void run_backlog(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  s.in_release = true;
  while (!s.backlog.empty()) {
    Skb& skb = s.backlog.front();
    s.backlog.pop_front();
    net.charge(ctx, &skb, {.sym = Sym::kTcpV4DoRcv});
    tcp_rcv(net, ctx, s, skb, (meta(skb).flags & kFlagVerified) != 0);
  }
  s.in_release = false;
  // The loop is done: sk_backlog.len goes back to 0, not per skb. (The kernel's loop also takes
  // what arrives while it runs; the model's release_sock takes that in a pass of its own, which
  // starts from 0.)
  s.backlog_len = 0;
}

// tcp_release_cb, once __release_sock's loop has found the backlog empty (release_sock) and after
// 6.x __sk_flush_backlog: the ACK the loop deferred, when one is still scheduled ("if ((flags &
// TCPF_ACK_DEFERRED) && inet_csk_ack_scheduled(sk)) tcp_send_ack(sk)").
void tcp_release_cb(Net& net, ExecCtx& ctx, TcpSock& s) {
  if (std::exchange(s.ack_deferred, false) && s.ack_sched) {
    tcp_send_ack(net, ctx, s, AckPath::kDataBacklog);
  }
}

// The same recv() once the task that copied has run: what arrived meanwhile waits on the backlog
// (or a release_sock queued by tcp_v4_rcv has moved it to the receive queue already). With
// something there the call goes on: 6.x __sk_flush_backlog, 2.6.20 release_sock + lock_sock
// after a cleanup_rbuf; then it copies again. With nothing, it ends.
void recvmsg_more(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  if (s.backlog.empty() && s.receive_queue.empty()) {
    recvmsg_end(net, s);
    return;
  }
  if (net.v2620()) {
    cleanup_rbuf(net, ctx, s, true);
  }
  // The reader is in its call (reader_blocked is false), so tcp_data wakes no one.
  run_backlog(net, s);
  tcp_release_cb(net, ctx, s);
  recvmsg_copy(net, s);
}

// One recv() of at most recv_size bytes (0: whatever is queued): tcp_recvmsg copies from the head
// of the receive queue, a partly read skb staying at the head, and ends with tcp_cleanup_rbuf.
// A stream's call with room left goes on while more arrives (recvmsg_more). A reader that finds
// more queued when the call ends reads again at once (iperf3 reads until EAGAIN, netperf loops on
// recv()); one that emptied the queue sleeps until tcp_data wakes it.
void tcp_recvmsg_task(Net& net, TcpSock& s) {
  if (s.params.nonblocking) {
    read_nonblocking(net, s);
    return;
  }
  syscall(net, s, [](Net& n, TcpSock& k) {
    n.charge(*k.proc, Sym::kSysRecvfrom);
    n.charge(*k.proc, Sym::kTcpRecvmsg);
    k.recv_left = call_size(k);
    recvmsg_copy(n, k);
  });
}

// tcp_recvmsg_locked's copy loop: what the receive queue holds, up to recv_left bytes.
void copy_queued(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  while (!s.receive_queue.empty() && s.recv_left > 0) {
    Skb& skb = s.receive_queue.front();
    const PacketMeta& m = meta(skb);
    const bool first_touch = static_cast<std::int32_t>(s.copied_seq - m.seq) <= 0;
    const std::uint32_t from = first_touch ? m.seq : s.copied_seq;
    const std::uint32_t take =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(m.end_seq - from, s.recv_left));
    if ((m.flags & kFlagVerified) != 0) {
      net.charge(ctx, &skb, {.sym = Sym::kSkbCopyDatagramIovec, .copied = take});
    } else {
      // 2.6.20 tcp_copy_to_iovec into a waiting reader: skb_copy_and_csum_datagram_iovec sums
      // the header and copies-and-sums the payload in one pass.
      net.charge(ctx, &skb, {.sym = Sym::kSkbCopyAndCsumDatagramIovec, .fused = take});
      if (first_touch) {
        OpCtx o = net.op(ctx);
        ops::csum_partial(o, kTcpHeader);
      }
    }
    s.copied_seq = from + take;
    s.stats.bytes_received += take;
    s.recv_left -= take;
    if (s.copied_seq == m.end_seq) {
      s.receive_queue.pop_front();
      // 2.6.20 sk_eat_skb: __kfree_skb; 6.x tcp_eat_recv_skb: skb_attempt_defer_free.
      net.skb_attempt_defer_free(ctx, skb);
    }
    rr_read(s, take);
  }
}

void recvmsg_copy(Net& net, TcpSock& s) {
  copy_queued(net, s);
  // tcp_recvmsg_locked: "if (copied >= target && !sk->sk_backlog.tail) break;" -- whether the
  // backlog filled while this task copied is known once its time has passed, so the call decides
  // in a task of its own, owning the socket meanwhile. Streams with a bounded read only: a
  // request/response reader stops at its message, and a read of "whatever is queued" has no room
  // to bound the call.
  // (Something is copied when, for a bounded read, less than recv_size is left.)
  if (s.rr.in_size == 0 && s.params.recv_size != 0 && s.recv_left < s.params.recv_size &&
      s.recv_left > 0) {
    s.in_recv = true;
    net.engine().after_task(
        [&net, &s] { submit(*s.proc, [&net, &s] { recvmsg_more(net, s); }); });
    return;
  }
  recvmsg_end(net, s);
}

// One read() of iperf3 3.x's reader, whose socket is O_NONBLOCK: what the receive queue holds, up
// to what the current Nread() still wants. tcp_recvmsg_locked ends a non-blocking call as soon as
// the queue is empty ("if (copied) { if (!timeo || ...) break; }"), whether or not the backlog
// filled meanwhile, and with nothing copied returns EAGAIN; tcp_cleanup_rbuf runs either way, then
// release_sock moves the backlog to the queue (and wakes this reader, see below). Nread() reads
// again until it has recv_size bytes or gets EAGAIN; iperf3 then select()s, which returns at once
// while data is queued and otherwise sleeps until tcp_data wakes it.
void read_call(Net& net, TcpSock& s);

void read_nonblocking(Net& net, TcpSock& s) {
  if (s.nread_left != 0) {
    syscall(net, s, read_call);
    return;
  }
  // A new Nread(), after the select() that found the socket readable.
  s.nread_left = call_size(s);
  syscall(net, s, [](Net& n, TcpSock& k) {
    // select() polls the socket (tcp_poll) without lock_sock.
    charge_unlocked(n, k, Sym::kDoSelect);
    ++k.stats.reader.selects;
    note(n, *k.proc, k, SockEventKind::kSelect);
    syscall(n, k, read_call);
  });
}

// One read() of the Nread().
void read_call(Net& net, TcpSock& s) {
  ExecCtx& ctx = *s.proc;
  net.charge(ctx, Sym::kSysRecvfrom);
  net.charge(ctx, Sym::kTcpRecvmsg);
  s.recv_left = s.nread_left;
  copy_queued(net, s);
  const bool copied = s.recv_left != s.nread_left;
  ++(copied ? s.stats.reader.reads_copying : s.stats.reader.reads_empty);
  count_short_read(s, s.nread_left - s.recv_left);
  note(net, ctx, s, SockEventKind::kRead, s.nread_left - s.recv_left);
  if (copied) {
    open_read(s, s.nread_left - s.recv_left);
  }
  s.nread_left = s.recv_left;
  cleanup_rbuf(net, ctx, s, copied);
  end_call(net, s);
  if (copied && s.nread_left != 0) {  // Nread() reads again
    net.engine().after_task(
        [&net, &s] { submit(*s.proc, [&net, &s] { read_nonblocking(net, s); }); });
    return;
  }
  s.nread_left = 0;  // Nread() returns: all it wanted, or EAGAIN; then select()
  read_again_or_sleep(net, s);
}

}  // namespace

InitialWindow tcp_initial_window(std::int64_t rcvbuf, bool locked, std::uint32_t advmss,
                                 std::int64_t tcp_rmem_max) {
  constexpr std::int64_t kMaxClamp = std::int64_t{65535} << 14;  // U16_MAX << TCP_MAX_WSCALE
  const std::int64_t full_space = initial_full_space(rcvbuf);
  // tcp_openreq_init_rwin: a locked buffer clamps the window to its own full space; otherwise
  // there is no clamp yet and tcp_select_initial_window takes the largest scaled window.
  const std::int64_t clamp = locked ? full_space : kMaxClamp;
  // tcp_select_initial_window: the scale for the largest window the socket may offer, that is
  // max(space, tcp_rmem[2], rmem_max) under the clamp (the space, full_space, is never above the
  // clamp; rmem_max, 212992 by default, never the largest here).
  const std::int64_t space =
      std::min(clamp, std::max({full_space, tcp_rmem_max, std::int64_t{212992}}));
  const int ilog2 =
      std::bit_width(static_cast<std::uint64_t>(std::max<std::int64_t>(space, 1))) - 1;
  InitialWindow w;
  w.rcv_wscale = static_cast<std::uint32_t>(std::clamp(ilog2 - 15, 0, 14));
  std::int64_t window_clamp = std::min(std::int64_t{65535} << w.rcv_wscale, clamp);
  // tcp_init_buffer_space: at most the full space (tcp_app_win 31 takes nothing off), less the
  // one segment it reserves.
  window_clamp = std::min(window_clamp, full_space);
  const std::int64_t adv = advmss;
  if (window_clamp > 2 * adv && window_clamp + adv > full_space) {
    window_clamp = std::max(2 * adv, full_space - adv);
  }
  w.window_clamp = static_cast<std::uint32_t>(window_clamp);
  return w;
}

std::uint32_t unscaled_window(std::uint32_t rcv_wnd, std::int64_t free_space, std::int64_t mss,
                              std::int64_t full_space) {
  const std::int64_t window = rcv_wnd;
  if (window <= free_space - mss || window > free_space) {
    return static_cast<std::uint32_t>(free_space / mss * mss);  // rounddown(free_space, mss)
  }
  if (mss == full_space && free_space > window + (full_space >> 1)) {
    return static_cast<std::uint32_t>(free_space);
  }
  return rcv_wnd;
}

void tcp_connect(Net& net, TcpSock& snd, TcpSock& rcv) {
  const Route* r = snd.ns->lookup(snd.daddr);
  if (r == nullptr) {
    throw std::invalid_argument("tcp_connect: no route from " + snd.ns->name);
  }
  const Features dev = r->dev->features;
  Features caps = dev;
  if (net.v2620()) {
    // sk_setup_caps(): GSO adds the GSO types; a GSO-capable route gets SG | HW_CSUM.
    if ((caps & feat::kGso) != 0) {
      caps |= feat::kTso;
    }
    if ((caps & feat::kTso) != 0) {
      caps |= feat::kSg | feat::kHwCsum;
    }
    snd.linear = !((caps & feat::kSg) != 0 && (caps & feat::kTso) != 0);
    snd.page_bytes = 4096;  // TCP_PAGE: single pages
  } else {
    caps |= feat::kTso | feat::kSg | feat::kHwCsum;  // GSO is always on for TCP
    snd.linear = false;
    snd.page_bytes = 32768;  // the socket's 32 KB page fragment (order 3)
  }
  snd.route_caps = caps;
  const std::uint32_t mss = snd.params.mss;
  // Receive windows. 2.6.20: tcp_win_from_space with tcp_adv_win_scale 2. 6.x: rcv_wscale from
  // tcp_rmem[2] (tcp_select_initial_window); tcp_init_buffer_space's window_clamp, the full
  // space less one segment it reserves, with scaling_ratio still at its default (half); the
  // window offered up to rcv_ssthresh, which starts there.
  if (net.v2620()) {
    rcv.rcv_wnd = rcv.params.rcvbuf - rcv.params.rcvbuf / 4;
  } else {
    const InitialWindow w = tcp_initial_window(rcv.params.rcvbuf, rcv.params.rcvbuf_locked,
                                               advmss(rcv), tcp_rmem_max(rcv));
    rcv.rcv_wscale = w.rcv_wscale;
    rcv.window_clamp = w.window_clamp;
    rcv.rcv_ssthresh = rcv.window_clamp;
    rcv.rcv_wnd = static_cast<std::uint32_t>(wscale_align(rcv, rcv.rcv_ssthresh));
    rcv.last_adv_wnd = rcv.rcv_wnd;
  }
  snd.snd_wnd = rcv.rcv_wnd;
  // tcp_initialize_rcv_mss: min(advmss, mss, rcv_wnd / 2, TCP_MSS_DEFAULT), at least TCP_MIN_MSS
  rcv.rcv_mss = std::max(kTcpMinMss, std::min({kTcpMssDefault, rcv.params.mss, rcv.rcv_wnd / 2}));
  snd.size_goal = (caps & feat::kTso) != 0 ? std::max(mss, std::min(65160U, snd.snd_wnd / 2) / mss * mss)
                                           : mss;
}

void tcp_warmed_up(TcpSock& s) {
  s.ssthresh_grown = false;
}

void tcp_start_sender(Net& net, TcpSock& s) {
  submit(*s.proc, [&net, &s] { sendmsg_task(net, s); });
}

void tcp_start_rr(Net& net, TcpSock& client) {
  client.to_send = client.rr.out_size;
  submit(*client.proc, [&net, &client] { sendmsg_task(net, client); });
}

namespace {

// tcp_rcv_established and what follows it, in the softirq or, from the backlog, in the process.
void tcp_rcv(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool verified) {
  const PacketMeta m = meta(skb);
  const bool data = (m.flags & kFlagData) != 0;
  net.charge(ctx, &skb, {.sym = Sym::kTcpRcvEstablished});
  // The fast path calls tcp_ack for a pure ACK, and for data only when its ack_seq moves
  // snd_una (a stream's receiver never does; a TCP_RR answer does).
  if (!data || static_cast<std::int32_t>(m.ack - s.snd_una) > 0) {
    tcp_ack(net, ctx, s, m);
  }
  if (data) {
    tcp_data(net, ctx, s, skb, verified);
    return;
  }
  net.kfree_skb_now(ctx, skb);  // tcp_rcv_established: a pure ACK is __kfree_skb'd (both versions)
}

// release_sock -> __release_sock: the backlog, in the owner's context (sk_backlog_rcv =
// tcp_v4_do_rcv), after the call that owned the socket. __release_sock loops "while ((skb =
// sk->sk_backlog.head) != NULL)", the socket still owned: what reaches the backlog while it
// runs is processed before the call returns, ahead of the caller's next call. The model learns
// what arrived once this task's time has passed, so the loop goes on in a task of its own, first
// in the CPU's queue; release_pending stays set meanwhile, so tcp_v4_rcv queues no other. Once
// a pass finds nothing more, tcp_release_cb sends the ACK the passes deferred, one for them all,
// in a task of its own first in the queue.
void release_sock(Net& net, TcpSock& s) {
  if (s.in_send) {
    s.release_owed = true;  // the send() call releases the socket when it returns
    return;
  }
  s.in_bh = false;
  run_backlog(net, s);
  net.engine().after_task([&net, &s] { release_pass_done(net, s); });
}

void release_pass_done(Net& net, TcpSock& s) {
  if (!s.backlog.empty()) {
    s.proc->cpu().submit_next({s.proc, [&net, &s] { release_sock(net, s); }});
    return;
  }
  if (s.ack_deferred) {
    s.proc->cpu().submit_next({s.proc, [&net, &s] { release_cb_task(net, s); }});
    return;
  }
  s.release_pending = false;
  if (s.reader_blocked) {
    close_read(net, s);  // the call the reader slept after has returned
  }
  end_call(net, s);  // what the backlog sent (ACK-clocked data) raised NET_RX in turn
}

// release_sock's tcp_release_cb, in its own task; what reached the backlog meanwhile goes first
// (the kernel's loop would have taken it).
void release_cb_task(Net& net, TcpSock& s) {
  if (!s.backlog.empty()) {
    release_sock(net, s);
    return;
  }
  tcp_release_cb(net, *s.proc, s);
  net.engine().after_task([&net, &s] { release_pass_done(net, s); });
}

// release_sock as the process's next work, queued once: release_pending stays set until it has
// run (or, within a send() call, until the call releases the socket).
void queue_release(Net& net, TcpSock& s) {
  if (!s.release_pending) {
    s.release_pending = true;
    submit(*s.proc, [&net, &s] { release_sock(net, s); });
  }
}

// The end of a socket call's task. Its transmits went through dev_queue_xmit, whose
// rcu_read_unlock_bh() -> local_bh_enable() runs the NET_RX softirq they raised on this CPU
// before the call goes on (both versions; kernel/softirq.c). The model runs that softirq as its
// own tasks, which this CPU takes before any process work; the call holds the socket meanwhile,
// so what they deliver to it (the ACKs of the data just sent, when sender and receiver share the
// CPU or the path loops back) waits in the backlog, and release_sock, queued now behind them,
// runs it when the call returns. Without this the socket would be free between the call's task
// and its softirq, and ACKs handled on another CPU would send from there, overtaking the data
// still in this CPU's backlog.
void end_call(Net& net, TcpSock& s) {
  if (!net.softnet(*s.proc).raised) {
    return;
  }
  s.in_bh = true;
  queue_release(net, s);
}

bool pure_ack(const PacketMeta& m) noexcept {
  return (m.flags & kFlagAck) != 0 && (m.flags & kFlagData) == 0;
}

// 6.x tcp_add_backlog: an skb that continues the one at the backlog's tail, both carrying ACK,
// with the same TCP options (the timestamp: sent in the same millisecond), is merged into it
// (TcpExt TCPBacklogCoalesce), so release_sock processes one skb for both.
// - A pure ACK behind another: the later ACK and window replace the earlier (skb_try_coalesce
//   copies its zero bytes into the tail's room), and the skb is freed.
// - Data: with its TCP header pulled, skb_try_coalesce appends its frags to the tail's
//   (ops::try_coalesce: never into a clone the sender still holds the original of, so not on
//   direct veth with TSO; a linear segment only by copy into the tail's spare room, which
//   veth's segments with offloads off never fit, their kmalloc'd heads never taken;
//   skb_segment's segments at a veth without TSO, and skbs ip_forward's skb_cow gave a head of
//   their own, merge). The tail takes the later ack_seq and window, the flags of both, the
//   larger gso_size and the sum of gso_segs; its truesize grows by what the merged skb's data
//   held (sk_backlog.len too), and the skb is freed (kfree_skb_partial). skbsim validate holds
//   the merges (CoalesceStats) against a measured set's TcpExt (docs/measure.md, "Merged skbs:
//   the untraced runs' TcpExt").
// Both kinds compare the timestamp's value, not its echo (TSecr): the model does not carry it,
// and within a millisecond it rarely differs.
bool backlog_coalesce(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb) {
  if (s.backlog.empty()) {
    return false;
  }
  Skb& tail = s.backlog.back();
  PacketMeta& t = meta(tail);
  const PacketMeta& m = meta(skb);
  if (t.end_seq != m.seq || (t.flags & m.flags & kFlagAck) == 0 || t.tsval != m.tsval) {
    return false;
  }
  if (pure_ack(t) && pure_ack(m)) {
    net.charge(ctx, &skb, {.sym = Sym::kSkbTryCoalesce});
    ++s.stats.coalesced.backlog_acks;
  } else {
    OpCtx o = net.op(ctx);
    const std::uint32_t tail_gso_size =
        tail.shinfo().gso_size != 0 ? tail.shinfo().gso_size : tail.len() - kTcpHeader;
    const std::uint32_t tail_gso_segs = std::max<std::uint32_t>(tail.shinfo().gso_segs, 1);
    (void)ops::pull(o, skb, kTcpHeader);  // __skb_pull(skb, hdrlen)
    const std::uint32_t gso_size = skb.shinfo().gso_size != 0 ? skb.shinfo().gso_size : skb.len();
    const std::uint32_t gso_segs = std::max<std::uint32_t>(skb.shinfo().gso_segs, 1);
    std::uint32_t delta = 0;
    if (!ops::try_coalesce(o, tail, skb, &delta)) {
      ops::unpull(o, skb, kTcpHeader);  // __skb_push(skb, hdrlen)
      return false;
    }
    t.end_seq = m.end_seq;
    ++s.stats.coalesced.backlog_data;
    net.hop(ctx, skb, "tcp_add_backlog: into skb ", std::to_string(tail.id()));
    ops::set_gso(tail, std::max(gso_size, tail_gso_size),
                 std::min<std::uint32_t>(gso_segs + tail_gso_segs, 0xFFFF), tail.shinfo().gso_type);
    s.backlog_len += delta;
  }
  t.flags |= m.flags;
  if (static_cast<std::int32_t>(m.ack - t.ack) >= 0) {
    t.ack = m.ack;
    t.wnd = m.wnd;
  }
  net.kfree_skb_now(ctx, skb);  // kfree_skb_partial: __kfree_skb when no head was stolen
  return true;
}

}  // namespace

void tcp_v4_rcv(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb) {
  net.charge(ctx, &skb, {.sym = Sym::kTcpV4Rcv});
  OpCtx o = net.op(ctx);
  bool verified = net.rx_csum_known_good(skb, "tcp_v4_rcv", s.ns->name);
  if (!verified && (!net.v2620() || skb.len() <= kChecksumBreak)) {
    // tcp_v4_checksum_init -> __skb_checksum_complete now: 2.6.20 for short skbs (ACKs), 6.x
    // for everything not already verified.
    net.charge(ctx, &skb, {.sym = Sym::kSkbChecksumComplete});
    ops::csum_partial(o, skb.len());
    verified = true;
  }
  // bh_lock_sock and sock_owned_by_user come after the work this task has charged so far (the
  // lookup and checksum just charged; before them, the packet's way up from netif_receive_skb
  // and, first in a NET_RX run, the deferred frees). The model's state changes happen when a
  // task starts, so the rest, from the owner check on, goes on in a task queued next on this CPU
  // (after those of earlier frames of a NIC's poll): the reader on the other CPU sees the skb,
  // and the softirq sees the reader's hold on the socket, once that time has passed. With the
  // socket's process on this CPU the check comes out the same either way (nothing of the process
  // runs meanwhile), so the split, a task per packet, is left out; the rest is then still done
  // early for observers on another CPU (ACKs from there for the same socket, clocks read for
  // timers and timestamps), and on the committed sets the validate tables and the 2007
  // container's result came out the same with and without the split there.
  if (&s.proc->cpu() != &ctx.cpu() && net.engine().task_clock() > net.engine().now()) {
    ctx.cpu().submit_next(
        {&ctx, [&net, &ctx, &s, &skb, verified] { tcp_v4_rcv_owner(net, ctx, s, skb, verified); }});
    return;
  }
  tcp_v4_rcv_owner(net, ctx, s, skb, verified);
}

namespace {

void tcp_v4_rcv_owner(Net& net, ExecCtx& ctx, TcpSock& s, Skb& skb, bool verified) {
  // sock_owned_by_user: the application's call holds the socket: its task runs (on another CPU:
  // this CPU runs one task at a time), or the softirq it raised runs inside it (end_call), or
  // its release_sock, queued for what reached the backlog meanwhile, has not run yet (the
  // call's tasks may be apart, another context's between them). (The model may queue the
  // process's next call ahead of that release_sock, which the kernel's call never returns
  // before; the socket then counts as owned in that call's first task too.)
  if (s.in_bh || s.in_recv || s.release_pending ||
      (s.proc->cpu().running_ctx() == s.proc && &ctx.cpu() != &s.proc->cpu() && !s.in_syscall &&
       !s.proc->cpu().leaving_idle())) {
    net.charge(ctx, &skb, {.sym = Sym::kSkAddBacklog});
    if (const std::uint32_t payload = meta(skb).end_seq - meta(skb).seq; payload != 0) {
      note(net, ctx, s, SockEventKind::kBacklog, payload);
    }
    if (!net.v2620() && backlog_coalesce(net, ctx, s, skb)) {
      return;
    }
    if (verified) {
      meta(skb).flags |= kFlagVerified;
    }
    s.backlog.push_back(skb);
    s.backlog_len += skb.truesize();  // sk_add_backlog
    queue_release(net, s);
    return;
  }
  tcp_rcv(net, ctx, s, skb, verified);
}

}  // namespace

void tcp_close(Net& net, ExecCtx& ctx, TcpSock& s) {
  OpCtx o = net.op(ctx);
  while (!s.write_queue.empty()) {
    Skb& skb = s.write_queue.front();
    s.write_queue.pop_front();
    s.wmem_queued -= skb.truesize();
    net.free_skb(ctx, skb);
  }
  s.send_head = nullptr;
  for (SkbQueue* q : {&s.receive_queue, &s.ofo_queue, &s.backlog}) {
    while (!q->empty()) {
      Skb& skb = q->front();
      q->pop_front();
      net.free_skb(ctx, skb);
    }
  }
  if (s.page != nullptr) {
    ops::put_page(o, *s.page);
    s.page = nullptr;
  }
}

}  // namespace skbsim::sim
