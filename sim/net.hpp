#pragma once
// net.hpp — the simulated network: hosts with CPUs, namespaces with devices, routes and
// ip_forward, and the kernel paths packets take between them, for one kernel version.
//
// Net owns everything of one run (engine, skb pool, hosts, devices, sockets) and implements the
// stack paths (stack.cpp: IP output and input, dev_queue_xmit with its software fix-ups, the qdisc,
// netif_rx and the NET_RX softirq, ip_forward; tcp.cpp: the TCP sender and receiver). Devices
// (dev_*.cpp) implement only their transmit behaviour. Every kernel step is charged through
// skbsim::ops or Net::charge() into the ledger of the context it runs in; no other counter exists.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/features.hpp"
#include "skbsim/skb_ops.hpp"
#include "skbsim/skb_pool.hpp"
#include "skbsim/skb_queue.hpp"

namespace skbsim::sim {

class Net;
class Device;
struct Namespace;
struct Host;
struct TcpSock;
struct UdpSock;

// What a packet carries besides sizes: lives in skb->cb (48 bytes, like the kernel's).
struct PacketMeta {
  std::uint32_t saddr = 0;
  std::uint32_t daddr = 0;
  std::uint32_t seq = 0;      // first payload byte
  std::uint32_t end_seq = 0;  // one past the last payload byte
  std::uint32_t ack = 0;
  std::uint32_t wnd = 0;        // advertised receive window (ACKs)
  std::uint32_t trace_seg = 0;  // data segment number, for --trace
  std::uint32_t tsval = 0;      // the TCP timestamp option's value: the sender's clock, in ms
  std::uint16_t sport = 0;
  std::uint16_t dport = 0;
  std::uint8_t proto = 0;  // 6 TCP, 17 UDP
  std::uint8_t ttl = 64;
  std::uint8_t flags = 0;  // kFlagAck | kFlagData | kFlagPsh
  std::uint8_t hops = 0;   // ip_forward hops, for loop detection
  Device* in_dev = nullptr;  // the device the skb last arrived on
};
static_assert(sizeof(PacketMeta) <= sizeof(Skb::cb));
inline constexpr std::uint8_t kFlagAck = 1;
inline constexpr std::uint8_t kFlagData = 2;
// TCP's PSH: tcp_push marks the last skb of a send() call (tcp_mark_push, both versions); GSO,
// TSO and skb_segment leave it on the last segment only, and GRO carries it to the merged skb.
inline constexpr std::uint8_t kFlagPsh = 8;

PacketMeta& meta(Skb& skb) noexcept;
const PacketMeta& meta(const Skb& skb) noexcept;

enum class DevKind : std::uint8_t { kNic, kEtun, kVeth, kVenet, kLoopback, kBridge };
std::string_view dev_kind_name(DevKind k) noexcept;

enum class DropReason : std::uint8_t {
  kBacklogFull,    // netif_rx: input_pkt_queue above netdev_max_backlog
  kQdiscFull,      // txqueuelen exceeded
  kNoRoute,        // no route in the namespace
  kTtlExceeded,    // ip_forward: TTL <= 1
  kRoutingLoop,    // a loop with no TTL decrement (the skip-cow patch): reported as a hazard
  kForwardingOff,  // a packet to forward in a namespace with ip_forward = 0
  kSkOwned,        // 6.x ip_forward drops skbs that still have skb->sk
  kNoSocket,       // local delivery with no listener
  kSocketRcvbuf,   // sock_queue_rcv_skb: the receive buffer is full (UDP)
  kBridgeMtu,      // br_dev_queue_push_xmit: longer than the port's MTU and not GSO
  kCount
};
std::string_view drop_reason_name(DropReason r) noexcept;

struct Hazard {
  std::string kind;
  std::string message;
  std::string where;
};

struct Route {
  std::uint32_t prefix = 0;
  std::uint8_t prefix_len = 0;
  Device* dev = nullptr;
};

struct Namespace {
  std::string name;
  Host* host = nullptr;
  bool ip_forward = false;
  bool tcp_backlog_ack_defer = true;  // net.ipv4.tcp_backlog_ack_defer (6.x, per namespace)
  std::vector<Device*> devices;
  std::vector<Route> routes;
  std::vector<std::uint32_t> addresses;
  std::vector<TcpSock*> sockets;
  std::vector<UdpSock*> udp_sockets;

  const Route* lookup(std::uint32_t daddr) const noexcept;  // longest prefix
  bool is_local(std::uint32_t addr) const noexcept;
};

// Per-CPU state of the NET_RX softirq: the backlog and whether the softirq is raised.
// net.core.skb_defer_max's default (net/core/hotdata.c, 6.x).
inline constexpr std::uint32_t kSkbDeferMaxDefault = 64;

struct Softnet {
  SkbQueue backlog;  // input_pkt_queue
  bool raised = false;
  bool run_started = false;     // this NET_RX run has paid do_softirq / net_rx_action
  std::uint32_t run_left = 0;   // packets this run may still take (netdev_budget)
  std::unique_ptr<ExecCtx> ctx;  // "softirq/N"
  // 6.x: skbs other CPUs freed for this one (skb_attempt_defer_free), freed by its next NET_RX
  // run (skb_defer_free_flush); the count of attempts since the last flush, and whether a kick
  // IPI is on its way (defer_ipi_scheduled).
  SkbQueue defer_list;
  std::uint64_t defer_count = 0;  // atomic_long_t
  bool defer_ipi_scheduled = false;
  // skbs a reader on this CPU has consumed whose turn to join another CPU's list has not come
  // (the reader's time has not reached them), oldest first.
  SkbQueue defer_pending;
};

struct Host {
  std::string name;
  std::uint32_t cpus_counted = 1;  // CPUs netperf counts (hyper-threads included)
  std::uint32_t skb_defer_max = kSkbDeferMaxDefault;  // net.core.skb_defer_max
  std::vector<std::unique_ptr<Cpu>> cpus;
  std::vector<Softnet> softnet;
  std::vector<std::unique_ptr<ExecCtx>> other_ctxs;  // processes, interrupts
  // Per CPU: a woken process's way back onto it (the IPI, __schedule), before its own code runs.
  std::vector<std::unique_ptr<ExecCtx>> sched;

  // Every execution context of the host, whose ledgers together hold all its charged time.
  template <class F>
  void for_each_context(F&& f) const {
    for (const Softnet& sn : softnet) {
      f(*sn.ctx);
    }
    for (const auto* group : {&sched, &other_ctxs}) {
      for (const auto& c : *group) {
        f(*c);
      }
    }
  }
  std::vector<std::unique_ptr<Namespace>> namespaces;
  Sock* placeholder = nullptr;
};

// A device: features, MTU, its qdisc, and a transmit behaviour that follows its driver.
// What crossed a device, counted where the kernel's tracepoints count it: net_dev_start_xmit as
// the driver is handed an skb (after validate_xmit_skb: segmentation, software checksum), and
// netif_rx_entry as a pair device's peer delivers one to it. ip_summed by its value (NONE 0 ...
// PARTIAL 3). Compared with skbsim measure's per-device counts (reference.per_segment.devices).
struct DevCounters {
  struct Side {
    std::uint64_t skbs = 0;
    std::uint64_t segments = 0;  // xmit: gso_segs, 1 for a non-GSO skb
    std::uint64_t gso_skbs = 0;
    std::uint64_t len = 0;
    std::uint64_t data_len = 0;
    std::array<std::uint64_t, 4> ip_summed{};
    void count(const Skb& skb) noexcept;
    Side since(const Side& earlier) const noexcept;  // what was counted after `earlier`
  };
  Side xmit;
  Side rx;
};

class Device {
 public:
  Device(std::string name, DevKind kind) : name_(std::move(name)), kind_(kind) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const noexcept { return name_; }
  DevKind kind() const noexcept { return kind_; }

  // hard_start_xmit: takes the skb (the device now owns it). Returns false when the device is
  // busy (ring full) and the skb must stay on the qdisc.
  virtual bool xmit(Net& net, ExecCtx& ctx, Skb& skb) = 0;
  // The kernel symbol of the driver's transmit function (for the profile).
  virtual Sym xmit_symbol() const noexcept = 0;
  // The rx_handler of a master device (the bridge's br_handle_frame) for a frame that arrived on
  // its port `in`: returns true when it consumed the skb, false to pass it up as usual.
  virtual bool handle_frame(Net& /*net*/, ExecCtx& /*ctx*/, Device& /*in*/, Skb& /*skb*/) {
    return false;
  }

  Features features = 0;
  std::uint32_t mtu = 1500;
  std::uint32_t hard_header_len = 14;  // 0 for venet (point-to-point, no Ethernet header)
  std::uint32_t tx_queue_len = 1000;   // 0 = noqueue (dev_hard_start_xmit directly)
  Namespace* ns = nullptr;
  Device* peer = nullptr;  // the other end of a pair device
  Device* master = nullptr;  // the bridge this device is a port of (br_port_exists)
  SkbQueue qdisc;          // pfifo_fast, one band
  bool queue_stopped = false;
  std::uint32_t index = 0;
  DevCounters counters;

 private:
  std::string name_;
  DevKind kind_;
};

// The patches and hazards switches a scenario turns on.
struct Patches {
  // The OpenVZ ip_forward change: skip skb_cow and the TTL decrement for packets that entered
  // from a device of one of these kinds.
  std::vector<DevKind> skip_cow_from;
  bool netfilter = false;  // charge the NF_IP_FORWARD / LOCAL_IN / LOCAL_OUT hooks
};

// Per-skb trace record (--trace): what one data segment went through, hop by hop.
struct TraceEntry {
  Time time = 0;
  std::string host;
  std::string ctx;
  std::string what;  // a kernel symbol, or "hop: <device>"
  std::uint64_t skb_id = 0;
  std::uint32_t bytes = 0;
  std::int64_t cost_ps = 0;
};

// LL_RESERVED_SPACE(dev): (hard_header_len & ~(HH_DATA_MOD - 1)) + HH_DATA_MOD, HH_DATA_MOD = 16.
inline std::uint32_t ll_reserved_space(const Device& dev) noexcept {
  return (dev.hard_header_len & ~15U) + 16U;
}

class Net {
 public:
  Net(const KernelModel& kernel, const CostModel& model);
  ~Net();
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  const KernelModel& kernel() const noexcept { return kernel_; }
  bool v2620() const noexcept { return kernel_.version == KernelVersion::k2_6_20; }
  Engine& engine() noexcept { return engine_; }
  SkbPool& pool() noexcept { return pool_; }
  const CostModel& cost_model() const noexcept { return model_; }
  // Waking `cpu`, idle: the latency, still polling, without an IPI (CostModel::
  // idle_poll_wake_ps), or halted, by an IPI (idle_wake_ps, idle_wake_blocked_ps, adapting the
  // host's polling window), spread by idle_wake_spread (a blocked one by idle_wake_blocked_spread
  // where the preset has it); and whether the host had blocked the vCPU (its halt outlasted the
  // window).
  struct IdleWake {
    Time latency = 0;
    bool host_blocked = false;
  };
  IdleWake idle_wake(Cpu& cpu, bool polling);
  // The IPI that wakes `to`: smp_send_reschedule's price on `from`, and the exit's
  // (kSendIpiBlocked, CostModel::ipi_send_blocked_ps) when the host blocked `to`.
  void charge_ipi(ExecCtx& from, const IdleWake& wake);
  // Runs `fn` `latency` after `since`, a moment of the running task (its task_clock) where the
  // wake-up began, and not before the time that task has charged so far has passed. The preset's
  // latencies are measured from the waker's sched_waking, so what the waker spends after it
  // (try_to_wake_up, the IPI and, to a blocked vCPU, the host's kick) passes within them.
  void after_latency(Time since, Time latency, std::function<void()> fn);
  // Restarts idle_wake_spread's draws at `seed`'s sequence (run_scenario: the scenario's seed,
  // before the engine runs): each seed its own splitmix64 sequence. Seed 1's is the one a Net
  // never seeded draws, the one every run drew before seeds picked it.
  void seed_wake_draws(std::uint64_t seed) noexcept;
  Patches& patches() noexcept { return patches_; }

  // ---- building -------------------------------------------------------------------------------
  Host& add_host(const std::string& name, std::uint32_t cpus, std::uint32_t cpus_counted);
  Namespace& add_namespace(Host& host, const std::string& name);
  template <typename D, typename... Args>
  D& add_device(Namespace& ns, Args&&... args) {
    auto d = std::make_unique<D>(std::forward<Args>(args)...);
    D& ref = *d;
    attach(ns, std::move(d));
    return ref;
  }
  ExecCtx& add_context(Host& host, const std::string& name, std::uint32_t cpu, Level level);
  std::vector<Host*> hosts() const;
  Host* host(const std::string& name) const;
  const std::vector<std::unique_ptr<Device>>& devices() const noexcept { return devices_; }

  // ---- kernel paths (stack.cpp) ---------------------------------------------------------------
  OpCtx op(ExecCtx& ctx) noexcept {
    OpCtx o(kernel_, pool_, ctx.ledger());
    o.cpu = static_cast<std::uint16_t>(ctx.cpu().index());
    return o;
  }
  void charge(ExecCtx& ctx, const Skb* skb, const Work& w);
  void charge(ExecCtx& ctx, Sym s) { charge(ctx, nullptr, Work{.sym = s}); }
  // A hop in a traced skb's life ("<what> <a> <b> ..."); the text is built only when the skb is
  // traced, so untraced packets pay one branch.
  template <typename... Parts>
  void hop(ExecCtx& ctx, const Skb& skb, const Parts&... parts) {
    if (skb.traced()) {
      std::string what;
      ((what += parts), ...);
      record_hop(ctx, skb, what);
    }
  }
  void record_hop(ExecCtx& ctx, const Skb& skb, const std::string& what);

  // ip_queue_xmit + ip_output + ip_finish_output2 for a locally generated skb; `entry` is the
  // function that builds the IP header (ip_push_pending_frames for UDP).
  void ip_queue_xmit(ExecCtx& ctx, Namespace& ns, Skb& skb, Sym entry = Sym::kIpQueueXmit);
  // ip_finish_output2: neighbour output (hard header) then dev_queue_xmit.
  void ip_finish_output2(ExecCtx& ctx, Device& dev, Skb& skb);
  void dev_queue_xmit(ExecCtx& ctx, Device& dev, Skb& skb);
  // Restarts a stopped queue (the NIC's TX completion): qdisc_run in NET_TX softirq.
  void qdisc_run(ExecCtx& ctx, Device& dev);
  // netif_rx(): onto the backlog of ctx's CPU, raising NET_RX there.
  void netif_rx(ExecCtx& ctx, Device& dev, Skb& skb);
  // netif_receive_skb(): from a NAPI poll or the backlog.
  void netif_receive_skb(ExecCtx& ctx, Device& dev, Skb& skb);
  void ip_rcv(ExecCtx& ctx, Device& dev, Skb& skb);
  void ip_forward(ExecCtx& ctx, Namespace& ns, Device& in, Skb& skb);
  void drop(ExecCtx& ctx, Skb& skb, DropReason why);
  void free_skb(ExecCtx& ctx, Skb& skb);  // kfree_skb (2.6.20) / consume_skb (6.x): a normal free
  void kfree_skb_now(ExecCtx& ctx, Skb& skb);  // __kfree_skb: what TCP owns alone, untraced
  // 6.x skb_attempt_defer_free: an skb a reader has consumed goes back to the CPU that
  // allocated it, to be freed (and traced as consume_skb) by that CPU's next NET_RX run; freed
  // here, untraced, when this is that CPU or its list is full. 2.6.20: __kfree_skb.
  void skb_attempt_defer_free(ExecCtx& ctx, Skb& skb);
  // Raises NET_RX on every CPU that still holds deferred frees: the next run a real CPU would
  // make sooner or later, given at the end of a simulation so that nothing stays allocated.
  void run_deferred_frees();
  // The start of a NET_RX run on sn's CPU (do_softirq, net_rx_action, and 6.x's
  // skb_defer_free_flush before the first poll), for the backlog's and a NIC's NAPI poll alike.
  void net_rx_begin(Softnet& sn);
  // 6.x skb_defer_free_flush: what net_rx_action does before each NAPI poll and at its end.
  void skb_defer_free_flush(Softnet& sn);
  void hazard(const std::string& kind, const std::string& message, const std::string& where);
  // The receive-side checksum state a transport protocol's rcv function (`fn`, e.g. "udp_rcv")
  // finds: true when the checksum is known good (CHECKSUM_UNNECESSARY, COMPLETE, or a local
  // PARTIAL skb, which 6.x skb_csum_unnecessary() accepts and 2.6.20 would drop as corrupt:
  // reported as a hazard), false for CHECKSUM_NONE (the protocol decides when to verify).
  bool rx_csum_known_good(const Skb& skb, std::string_view fn, const std::string& where);
  // try_to_wake_up of a sleeping process context `to` from the running context `from`, then
  // `fn` in `to` once `from`'s task is done. A process that slept costs two context switches
  // (__schedule: out when it slept, in now, as /proc/stat's ctxt counts them); a wake-up of a
  // task on another CPU that is idle also costs the IPI (the waker sends it; the woken CPU takes
  // the interrupt and leaves its idle loop). Idle is judged when the waker runs.
  void wake_process(ExecCtx& from, ExecCtx& to, std::function<void()> fn);
  Softnet& softnet(ExecCtx& ctx);
  Host& host_of(const ExecCtx& ctx) const;

  // ---- results --------------------------------------------------------------------------------
  const std::vector<Hazard>& hazards() const noexcept { return hazards_; }
  const std::array<std::uint64_t, static_cast<std::size_t>(DropReason::kCount)>& drops()
      const noexcept {
    return drops_;
  }
  std::uint64_t dropped_payload_bytes() const noexcept { return dropped_payload_; }
  // Tracing: data segment number `seg` is traced from its creation on.
  void trace_segment(std::uint32_t seg) noexcept { trace_seg_ = seg; }
  std::uint32_t traced_segment() const noexcept { return trace_seg_; }
  const std::vector<TraceEntry>& trace() const noexcept { return trace_; }
  void record_trace(TraceEntry e) { trace_.push_back(std::move(e)); }
  std::uint64_t hops() const noexcept { return hops_; }
  void count_hop() noexcept { ++hops_; }
  // A device is about to transmit `skb` (dev_hard_start_xmit: the kernel's net_dev_start_xmit
  // tracepoint). Counts it, and stamps the task clock for a caller that asked (arm_xmit_stamp).
  void start_xmit(Device& dev, const Skb& skb);
  // The next start_xmit's task clock, for a caller timing its transmit (WriterStats): armed
  // before the transmit, read after it; -1 when no device transmitted meanwhile.
  void arm_xmit_stamp() noexcept {
    xmit_stamp_ = -1;
    xmit_stamp_armed_ = true;
  }
  Time xmit_stamp() noexcept {
    xmit_stamp_armed_ = false;
    return xmit_stamp_;
  }

 private:
  static constexpr std::uint64_t kWakeDrawState = 0x5eed'0000'0001ULL;  // seed 1's
  void attach(Namespace& ns, std::unique_ptr<Device> dev);
  void attach_sink(ExecCtx& ctx, Host& host);
  // The NET_RX tasks capture two pointers, which std::function keeps in place: no allocation
  // per packet.
  void raise_net_rx(Cpu& cpu, Softnet& sn);
  void net_rx_action(Softnet& sn);
  // After a packet of a NET_RX run: the next packet, or the run's end (the last deferred-free
  // flush; a run raised again if packets came).
  void net_rx_next(Softnet& sn);
  void defer_free(ExecCtx& ctx);
  void local_deliver(ExecCtx& ctx, Namespace& ns, Skb& skb);
  bool transmit_one(ExecCtx& ctx, Device& dev, Skb& skb);
  // `mean`, or with a spread `s` above 0 a log-normal draw of that mean whose logarithm has that
  // standard deviation.
  Time spread_latency(Time mean, double s);
  // Whether `cpu` went idle so recently that it still polls (CostModel::idle_poll_ps): what is
  // aimed at it needs no IPI.
  bool still_polling(const Cpu& cpu) const;

  KernelModel kernel_;  // the version's model with the scenario's kernel_config
  CostModel model_;
  Engine engine_;
  SkbPool pool_;
  Patches patches_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<Hazard> hazards_;
  std::array<std::uint64_t, static_cast<std::size_t>(DropReason::kCount)> drops_{};
  std::uint64_t dropped_payload_ = 0;
  std::uint64_t wake_rng_ = kWakeDrawState;  // splitmix64 state (seed_wake_draws)
  std::uint32_t trace_seg_ = 0;  // 0 = none
  std::vector<TraceEntry> trace_;
  std::uint64_t hops_ = 0;
  bool xmit_stamp_armed_ = false;
  Time xmit_stamp_ = -1;
  std::vector<std::unique_ptr<TraceSink>> sinks_;
};

}  // namespace skbsim::sim
