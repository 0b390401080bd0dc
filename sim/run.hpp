#pragma once
// run.hpp — one simulation run: a plain ScenarioSpec in (built by the C++ API or read from a
// scenario file), a RunResult out. Deterministic: the same spec gives bit-identical results.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/net.hpp"
#include "sim/tcp.hpp"
#include "skbsim/ledger.hpp"

namespace skbsim::sim {

struct HostSpec {
  std::string name;
  std::uint32_t cpus = 2;
  std::uint32_t cpus_counted = 2;  // what netperf divides by (hyper-threads included)
  std::uint32_t skb_defer_max = kSkbDeferMaxDefault;  // net.core.skb_defer_max (6.x)
  // Each CPU's deferred-free count as the run starts (6.x; missing CPUs: 0): what a kernel
  // whose count was left at or above skb_defer_max takes no deferred skb with.
  std::vector<std::uint64_t> defer_count;
};

struct RouteSpec {
  std::uint32_t prefix = 0;
  std::uint8_t prefix_len = 0;
  std::string dev;
};

struct NamespaceSpec {
  std::string name;
  std::string host;
  bool ip_forward = false;
  std::vector<std::uint32_t> addresses;
  std::vector<RouteSpec> routes;
  bool tcp_backlog_ack_defer = true;  // net.ipv4.tcp_backlog_ack_defer (6.x)
};

struct DeviceSpec {
  std::string name;
  DevKind kind = DevKind::kNic;
  std::string ns;
  std::optional<Features> features;  // default: the kind's, for the kernel version
  std::uint32_t mtu = 1500;
  std::optional<std::uint32_t> tx_queue_len;
  std::string peer;  // pair devices and linked NICs: the other end's name
  std::vector<std::string> ports;  // a bridge: its ports (devices of its namespace)
  // NIC
  double rate_mbps = 1000;
  double delay_us = 5;
  double irq_delay_us = 20;
  std::uint32_t irq_cpu = 0;
  bool modern = false;
};

// netperf's test types. `from` is always netperf's side (local), `to` netserver's (remote).
enum class TrafficType : std::uint8_t {
  kTcpStream,  // data from -> to
  kTcpMaerts,  // data to -> from (netperf receives)
  kUdpStream,  // datagrams from -> to, no flow control
  kTcpRr,      // request from -> to, response to -> from, one transaction at a time
};
std::string_view traffic_type_name(TrafficType t) noexcept;

struct FlowSpec {
  TrafficType type = TrafficType::kTcpStream;
  std::string from_ns;
  std::uint32_t from_addr = 0;
  std::string to_ns;
  std::uint32_t to_addr = 0;
  std::uint32_t send_size = 16384;  // -m
  std::uint32_t sndbuf = 131072;    // -s (both sides, as netperf -s -S set them)
  std::uint32_t rcvbuf = 131072;    // -S
  std::uint32_t mss = 1448;
  std::uint32_t request_size = 1;   // -r req,rsp (TCP_RR)
  std::uint32_t response_size = 1;
  std::uint32_t sender_cpu = 0;    // netperf's CPU
  std::uint32_t receiver_cpu = 0;  // netserver's CPU
  // iperf3 -b: the sender's target rate in bit/s (0: unlimited, netperf's behaviour) and its
  // pacing timer (iperf3 --pacing-timer), TCP_STREAM and TCP_MAERTS only.
  std::uint64_t rate_bps = 0;
  std::uint32_t pacing_timer_us = 1000;
  std::uint32_t recv_size = 0;  // bytes per recv() (netperf -M, iperf3 -l); 0: all that is queued
  bool nonblocking_reader = false;  // "reader": "nonblocking" (iperf3), TcpParams::nonblocking
  bool rcvbuf_locked = false;       // "rcvbuf_locked": SO_RCVBUF set, TcpParams::rcvbuf_locked
  std::uint32_t tcp_rmem_max = 0;   // "tcp_rmem_max": TcpParams::tcp_rmem_max; 0 the default
};

struct ScenarioSpec {
  KernelVersion kernel = KernelVersion::k2_6_20;
  std::optional<std::uint32_t> max_header;  // kernel_config.max_header: MAX_HEADER of the build
  CostModel cost;
  std::vector<HostSpec> hosts;
  std::vector<NamespaceSpec> namespaces;
  std::vector<DeviceSpec> devices;
  std::vector<FlowSpec> flows;
  Patches patches;
  double duration_s = 0.2;  // measured time, netperf -l
  double warmup_s = 0.05;   // discarded first
  std::uint32_t trace_segment = 0;  // 0 = no trace
  bool timeline = false;            // record the TCP sockets' events (RunResult::timeline)
  std::uint64_t seed = 1;           // the wake-up latency draws' sequence (Net::seed_wake_draws)
};

// One execution context's share of the window: which CPU, at which level (a process, or a
// CPU's softirq or scheduler work), and how much of that CPU's time its charged work took.
struct ContextShare {
  std::string name;  // the context's name: "softirq/0", "sched/1", the process ("netperf")
  std::uint32_t cpu = 0;
  Level level = Level::kProcess;
  // % of the window on its CPU: the cost charged in the window (a task across the window's edge
  // counts wholly where it was charged, so the shares of a CPU add up to its busy share within
  // a task or two).
  double busy_pct = 0;
};

struct HostResult {
  std::string name;
  std::uint32_t cpus_counted = 0;
  double cpu_util_pct = 0;           // busy / (CPUs counted x elapsed)
  double service_demand_us_per_kb = 0;  // busy us per KB (1024 B) of goodput
  double service_demand_us_per_tr = 0;  // TCP_RR: busy us per transaction
  Time busy_ps = 0;
  std::vector<double> cpu_busy_pct;  // each CPU's busy share of the window, % (where work ran)
  std::vector<ContextShare> contexts;  // that busy time by context, in the host's context order
  // What crossed each of the host's devices in the window, by device name ("M/c0").
  std::vector<std::pair<std::string, DevCounters>> devices;
  std::array<LedgerCell, kSymCount> cells{};  // measured window, all contexts of the host
  LedgerCell total;
};

// skbsim run --timeline: one TCP socket's event (SockEvent) in the measured window.
struct TimelineEvent {
  double time_us = 0;  // from the window's start
  std::string ctx;     // the context it ran in ("softirq/0", "netserver")
  std::uint32_t cpu = 0;
  std::uint32_t flow = 0;  // the flow's place in the scenario's "traffic", from 0
  std::string socket;      // the socket's application ("netperf", "netserver")
  SockEventKind kind = SockEventKind::kSend;
  AckPath ack_path = AckPath::kDataSoftirq;  // kAck only
  std::uint32_t bytes = 0;
  std::uint32_t unread = 0;
};

struct RunResult {
  double elapsed_s = 0;
  TrafficType type = TrafficType::kTcpStream;
  double throughput_mbps = 0;  // goodput of all data flows, 10^6 bit/s (RR: both directions)
  double sent_mbps = 0;        // payload handed to the sending sockets (UDP: before drops)
  double transactions_per_s = 0;  // TCP_RR
  std::uint64_t transactions = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t segments = 0;  // data segments on the wire (MSS units; UDP: datagrams) in the window
  std::array<std::uint64_t, kAckPathCount> acks_by_path{};  // TCP's ACKs in the window, by path
  ReaderStats reader;  // TCP: the receiving applications' calls in the window
  WriterStats writer;  // TCP: the sending applications' transmits, timed, in the window
  CoalesceStats coalesced;                // TCP: skbs merged into a queue's tail in the window
  std::uint64_t xmit_timer_starts = 0;    // TCP: retransmission timers queued in the window
  std::uint64_t delack_timer_starts = 0;  // TCP: delayed-ACK timers queued in the window
  std::vector<HostResult> hosts;
  std::vector<Hazard> hazards;
  std::map<std::string, std::uint64_t> drops;
  std::vector<TraceEntry> trace;
  std::vector<TimelineEvent> timeline;  // spec.timeline: in time order
  // Conservation over the whole run (warm-up and drain included).
  std::uint64_t total_bytes_sent = 0;
  std::uint64_t total_bytes_received = 0;
  std::uint64_t total_bytes_dropped = 0;
  bool pool_empty_at_end = false;
  std::string leak_report;
  Time total_busy_ps = 0;
  std::int64_t total_ledger_ps = 0;
  std::uint64_t hops = 0;
  std::uint64_t events = 0;
};

// A bridge's converged forwarding database (every address learned; the flooding of the first
// frames is not modelled): for each of its ports, the addresses reached through it — those of the
// namespace at the port's other end and, where that namespace forwards, of every namespace
// beyond it, not back through the bridge. Address -> port name, in port order.
std::vector<std::pair<std::uint32_t, std::string>> bridge_fdb(const ScenarioSpec& spec,
                                                              const DeviceSpec& bridge);

// Builds the network of `spec`, runs warm-up + duration, drains, frees, and reports.
// Throws std::invalid_argument for a spec that does not hold together (a route to an unknown
// device, a flow between unknown namespaces).
RunResult run_scenario(const ScenarioSpec& spec);

}  // namespace skbsim::sim
