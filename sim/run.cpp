#include "sim/run.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "sim/devices.hpp"
#include "sim/tcp.hpp"
#include "sim/udp.hpp"
#include "skbsim/skb_check.hpp"

namespace skbsim::sim {
namespace {

struct Built {
  std::map<std::string, Namespace*> ns;
  std::map<std::string, Device*> dev;
};

Namespace& find_ns(Built& b, const std::string& name) {
  auto it = b.ns.find(name);
  if (it == b.ns.end()) {
    throw std::invalid_argument("unknown namespace " + name);
  }
  return *it->second;
}

Device& find_dev(Built& b, const std::string& name) {
  auto it = b.dev.find(name);
  if (it == b.dev.end()) {
    throw std::invalid_argument("unknown device " + name);
  }
  return *it->second;
}

void build(Net& net, const ScenarioSpec& spec, Built& b) {
  for (const HostSpec& h : spec.hosts) {
    Host& host = net.add_host(h.name, h.cpus, h.cpus_counted);
    host.skb_defer_max = h.skb_defer_max;
    for (std::size_t cpu = 0; cpu < h.defer_count.size(); ++cpu) {
      host.softnet[cpu].defer_count = h.defer_count[cpu];
    }
  }
  for (const NamespaceSpec& n : spec.namespaces) {
    Host* h = net.host(n.host);
    if (h == nullptr) {
      throw std::invalid_argument("namespace " + n.name + " on unknown host " + n.host);
    }
    Namespace& ns = net.add_namespace(*h, n.name);
    ns.ip_forward = n.ip_forward;
    ns.tcp_backlog_ack_defer = n.tcp_backlog_ack_defer;
    ns.addresses = n.addresses;
    b.ns[n.name] = &ns;
  }
  for (const DeviceSpec& d : spec.devices) {
    Namespace& ns = find_ns(b, d.ns);
    Device* dev = nullptr;
    switch (d.kind) {
      case DevKind::kNic: {
        NicDevice::Params p;
        p.rate_mbps = d.rate_mbps;
        p.delay_us = d.delay_us;
        p.irq_delay_us = d.irq_delay_us;
        p.irq_cpu = d.irq_cpu;
        p.modern = d.modern;
        // e1000_change_mtu (2.6.20 drivers/net/e1000/e1000_main.c): receive buffers hold a
        // whole frame (MTU + 14 header + 4 FCS); the standard MTU keeps the VLAN-sized 1522,
        // jumbo frames a power of two (16384 for MTU 9000).
        if (d.mtu > 1500) {
          p.rx_buffer = std::bit_ceil(d.mtu + 18U);
        }
        dev = &net.add_device<NicDevice>(ns, d.name, p);
        break;
      }
      case DevKind::kEtun:
      case DevKind::kVeth:
        dev = &net.add_device<PairDevice>(ns, d.name, d.kind);
        dev->tx_queue_len = 0;
        break;
      case DevKind::kVenet:
        dev = &net.add_device<VenetDevice>(ns, d.name);
        dev->tx_queue_len = 0;
        break;
      case DevKind::kLoopback:
        dev = &net.add_device<LoopbackDevice>(ns, d.name);
        break;
      case DevKind::kBridge:
        dev = &net.add_device<BridgeDevice>(ns, d.name);
        break;
    }
    dev->features = fix_features(d.features.value_or(default_features(d.kind, spec.kernel, d.modern)),
                                 spec.kernel);
    dev->mtu = d.mtu;
    if (d.tx_queue_len) {
      dev->tx_queue_len = *d.tx_queue_len;
    }
    b.dev[d.name] = dev;
  }
  for (const DeviceSpec& d : spec.devices) {
    if (d.peer.empty()) {
      continue;
    }
    Device& a = find_dev(b, d.name);
    Device& z = find_dev(b, d.peer);
    a.peer = &z;
    if (d.kind == DevKind::kNic) {
      static_cast<NicDevice&>(a).connect(static_cast<NicDevice&>(z));
    }
  }
  for (const DeviceSpec& d : spec.devices) {
    if (d.kind != DevKind::kBridge) {
      continue;
    }
    auto& br = static_cast<BridgeDevice&>(find_dev(b, d.name));
    for (const std::string& p : d.ports) {
      Device& port = find_dev(b, p);
      if (port.ns != br.ns || port.kind() == DevKind::kBridge || port.master != nullptr) {
        throw std::invalid_argument("bridge " + d.name + ": bad port " + p);
      }
      br.add_port(port);
    }
    for (const auto& [addr, p] : bridge_fdb(spec, d)) {
      br.add_fdb(addr, find_dev(b, p));
    }
    if (!d.features) {
      // br_features_recompute(): the offloads every port has (a bridge sends through any).
      constexpr Features kOffloads =
          feat::kSg | feat::kAllCsum | feat::kTso | feat::kFraglist | feat::kGso;
      for (const Device* port : br.ports()) {
        br.features &= port->features | ~kOffloads;
      }
    }
  }
  for (const NamespaceSpec& n : spec.namespaces) {
    Namespace& ns = find_ns(b, n.name);
    for (const RouteSpec& r : n.routes) {
      ns.routes.push_back({r.prefix, r.prefix_len, &find_dev(b, r.dev)});
    }
  }
  net.patches() = spec.patches;
}

}  // namespace

std::vector<std::pair<std::uint32_t, std::string>> bridge_fdb(const ScenarioSpec& spec,
                                                              const DeviceSpec& bridge) {
  auto dev = [&spec](const std::string& name) -> const DeviceSpec* {
    for (const DeviceSpec& d : spec.devices) {
      if (d.name == name) {
        return &d;
      }
    }
    return nullptr;
  };
  auto ns_of = [&spec](const std::string& name) -> const NamespaceSpec* {
    for (const NamespaceSpec& n : spec.namespaces) {
      if (n.name == name) {
        return &n;
      }
    }
    return nullptr;
  };
  std::vector<std::pair<std::uint32_t, std::string>> fdb;
  for (const std::string& port : bridge.ports) {
    const DeviceSpec* p = dev(port);
    if (p == nullptr || p->peer.empty()) {
      continue;
    }
    // Breadth-first over namespaces from the port's far end; a forwarding namespace passes on
    // through its other devices' peers. The bridge's own namespace is never entered.
    std::vector<std::string> queue;
    std::vector<std::string> seen = {bridge.ns};
    if (const DeviceSpec* far = dev(p->peer)) {
      queue.push_back(far->ns);
    }
    for (std::size_t i = 0; i < queue.size(); ++i) {
      if (std::find(seen.begin(), seen.end(), queue[i]) != seen.end()) {
        continue;
      }
      seen.push_back(queue[i]);
      const NamespaceSpec* n = ns_of(queue[i]);
      if (n == nullptr) {
        continue;
      }
      for (std::uint32_t a : n->addresses) {
        fdb.emplace_back(a, port);
      }
      if (!n->ip_forward) {
        continue;
      }
      for (const DeviceSpec& d : spec.devices) {
        if (d.ns == n->name && !d.peer.empty()) {
          if (const DeviceSpec* far = dev(d.peer)) {
            queue.push_back(far->ns);
          }
        }
      }
    }
  }
  return fdb;
}

std::string_view traffic_type_name(TrafficType t) noexcept {
  switch (t) {
    case TrafficType::kTcpStream:
      return "TCP_STREAM";
    case TrafficType::kTcpMaerts:
      return "TCP_MAERTS";
    case TrafficType::kUdpStream:
      return "UDP_STREAM";
    case TrafficType::kTcpRr:
      return "TCP_RR";
  }
  return "?";
}

RunResult run_scenario(const ScenarioSpec& spec) {
  Net net(spec.max_header ? KernelModel::configured(spec.kernel, *spec.max_header)
                          : KernelModel::get(spec.kernel),
          spec.cost);
  Built b;
  build(net, spec, b);
  net.trace_segment(spec.trace_segment);
  net.seed_wake_draws(spec.seed);

  // One flow: its sockets, the direction(s) data goes. TCP_STREAM/MAERTS/RR use `a` (netperf's
  // side) and `z` (netserver's); UDP_STREAM uses `ua`/`uz`.
  struct FlowRun {
    TrafficType type;
    std::unique_ptr<TcpSock> a;
    std::unique_ptr<TcpSock> z;
    std::unique_ptr<UdpSock> ua;
    std::unique_ptr<UdpSock> uz;
    std::unique_ptr<std::vector<SockEvent>> log_a;  // spec.timeline: a's events, z's
    std::unique_ptr<std::vector<SockEvent>> log_z;
  };
  std::vector<FlowRun> flows;
  std::uint16_t port = 10000;
  for (const FlowSpec& f : spec.flows) {
    Namespace& from = find_ns(b, f.from_ns);
    Namespace& to = find_ns(b, f.to_ns);
    ExecCtx& netperf = net.add_context(*from.host, "netperf", f.sender_cpu, Level::kProcess);
    ExecCtx& netserver = net.add_context(*to.host, "netserver", f.receiver_cpu, Level::kProcess);
    FlowRun run{};
    run.type = f.type;
    if (f.type == TrafficType::kUdpStream) {
      run.ua = std::make_unique<UdpSock>();
      run.uz = std::make_unique<UdpSock>();
      for (UdpSock* u : {run.ua.get(), run.uz.get()}) {
        u->send_size = f.send_size;
        u->sndbuf = f.sndbuf;
        u->rcvbuf = f.rcvbuf;
      }
      run.ua->ns = &from;
      run.ua->proc = &netperf;
      run.ua->saddr = f.from_addr;
      run.ua->daddr = f.to_addr;
      run.ua->sport = port;
      run.ua->dport = 12865;
      run.uz->ns = &to;
      run.uz->proc = &netserver;
      run.uz->saddr = f.to_addr;
      run.uz->daddr = f.from_addr;
      run.uz->sport = 12865;
      run.uz->dport = port;
      run.uz->net = &net;
      from.udp_sockets.push_back(run.ua.get());
      to.udp_sockets.push_back(run.uz.get());
      udp_connect(net, *run.ua);
    } else {
      run.a = std::make_unique<TcpSock>();
      run.z = std::make_unique<TcpSock>();
      for (TcpSock* t : {run.a.get(), run.z.get()}) {
        t->net = &net;
        t->params = TcpParams{f.mss,           f.sndbuf,          f.rcvbuf,    f.send_size,
                              f.rate_bps,      f.pacing_timer_us, f.recv_size, f.nonblocking_reader,
                              f.rcvbuf_locked, f.tcp_rmem_max};
      }
      TcpSock& a = *run.a;
      TcpSock& z = *run.z;
      if (spec.timeline) {
        run.log_a = std::make_unique<std::vector<SockEvent>>();
        run.log_z = std::make_unique<std::vector<SockEvent>>();
        a.timeline = run.log_a.get();
        z.timeline = run.log_z.get();
      }
      a.ns = &from;
      a.host = from.host;
      a.proc = &netperf;
      a.saddr = f.from_addr;
      a.daddr = f.to_addr;
      a.sport = port;
      a.dport = 12865;
      z.ns = &to;
      z.host = to.host;
      z.proc = &netserver;
      z.saddr = f.to_addr;
      z.daddr = f.from_addr;
      z.sport = 12865;
      z.dport = port;
      from.sockets.push_back(&a);
      to.sockets.push_back(&z);
      if (f.type == TrafficType::kTcpStream) {
        tcp_connect(net, a, z);
      } else if (f.type == TrafficType::kTcpMaerts) {
        tcp_connect(net, z, a);
      } else if (f.type == TrafficType::kTcpRr) {
        a.params.send_size = f.request_size;
        z.params.send_size = f.response_size;
        a.rr = RrApp{f.response_size, f.request_size, true, false, 0};
        z.rr = RrApp{f.request_size, f.response_size, false, false, 0};
        a.to_send = 0;
        z.to_send = 0;
        tcp_connect(net, a, z);
        tcp_connect(net, z, a);
      }
    }
    ++port;
    flows.push_back(std::move(run));
  }
  for (FlowRun& f : flows) {
    switch (f.type) {
      case TrafficType::kTcpStream:
        tcp_start_sender(net, *f.a);
        break;
      case TrafficType::kTcpMaerts:
        tcp_start_sender(net, *f.z);
        break;
      case TrafficType::kTcpRr:
        tcp_start_rr(net, *f.a);
        break;
      case TrafficType::kUdpStream:
        udp_start_sender(net, *f.ua);
        break;
    }
  }

  // Warm-up, then the measured window: snapshot ledgers, busy time and bytes at both ends.
  const Time warm = static_cast<Time>(spec.warmup_s * static_cast<double>(kPsPerSec));
  const Time dur = static_cast<Time>(spec.duration_s * static_cast<double>(kPsPerSec));
  auto snapshot = [&net] {
    struct HostSnap {
      Time first = 0;  // busy time of all CPUs
      std::array<LedgerCell, kSymCount> second{};
      std::vector<Time> by_cpu;
      std::vector<std::pair<const ExecCtx*, std::int64_t>> by_ctx;  // each context's cost so far
    };
    std::vector<HostSnap> snap;
    for (Host* h : net.hosts()) {
      Time busy = 0;
      std::vector<Time> by_cpu;
      for (auto& c : h->cpus) {
        busy += c->busy_ps();
        by_cpu.push_back(c->busy_ps());
      }
      std::array<LedgerCell, kSymCount> cells{};
      std::vector<std::pair<const ExecCtx*, std::int64_t>> by_ctx;
      auto add = [&cells, &by_ctx](const ExecCtx& ctx) {
        for (std::size_t i = 0; i < kSymCount; ++i) {
          cells[i].add(ctx.ledger().cells()[i]);
        }
        by_ctx.emplace_back(&ctx, ctx.ledger().total().cost_ps);
      };
      h->for_each_context(add);
      snap.push_back({busy, cells, std::move(by_cpu), std::move(by_ctx)});
    }
    return snap;
  };
  // Payload counters over every flow and direction: sent, received, data segments, transactions.
  struct Counters {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    std::uint64_t segments = 0;
    std::uint64_t transactions = 0;
    std::array<std::uint64_t, kAckPathCount> acks_by_path{};
    ReaderStats reader;
    WriterStats writer;
    CoalesceStats coalesced;
    std::uint64_t xmit_timer_starts = 0;
    std::uint64_t delack_timer_starts = 0;
  };
  auto counters = [&flows] {
    Counters c;
    for (const FlowRun& f : flows) {
      for (const TcpSock* t : {f.a.get(), f.z.get()}) {
        if (t != nullptr) {
          c.sent += t->stats.bytes_sent;
          c.received += t->stats.bytes_received;
          c.segments += t->stats.segs_out;
          c.transactions += t->stats.transactions;
          for (std::size_t k = 0; k < kAckPathCount; ++k) {
            c.acks_by_path[k] += t->stats.acks_by_path[k];
          }
          c.reader += t->stats.reader;
          c.writer += t->stats.writer;
          c.coalesced += t->stats.coalesced;
          c.xmit_timer_starts += t->stats.xmit_timer_starts;
          c.delack_timer_starts += t->stats.delack_timer_starts;
        }
      }
      for (const UdpSock* u : {f.ua.get(), f.uz.get()}) {
        if (u != nullptr) {
          c.sent += u->stats.bytes_sent;
          c.received += u->stats.bytes_received;
          c.segments += u->stats.datagrams_out;
        }
      }
    }
    return c;
  };
  auto device_snapshot = [&net] {
    std::vector<DevCounters> c;
    for (const auto& d : net.devices()) {
      c.push_back(d->counters);
    }
    return c;
  };
  net.engine().run_until(warm);
  for (const FlowRun& f : flows) {
    for (TcpSock* t : {f.a.get(), f.z.get()}) {
      if (t != nullptr) {
        tcp_warmed_up(*t);
      }
    }
  }
  const auto dev0 = device_snapshot();
  const auto snap0 = snapshot();
  const Counters c0 = counters();
  net.engine().run_until(warm + dur);
  const auto snap1 = snapshot();
  const auto dev1 = device_snapshot();
  const Counters c1 = counters();

  RunResult r;
  r.type = spec.flows.empty() ? TrafficType::kTcpStream : spec.flows.front().type;
  r.elapsed_s = spec.duration_s;
  r.bytes_received = c1.received - c0.received;
  r.bytes_sent = c1.sent - c0.sent;
  r.segments = c1.segments - c0.segments;
  r.transactions = c1.transactions - c0.transactions;
  for (std::size_t k = 0; k < kAckPathCount; ++k) {
    r.acks_by_path[k] = c1.acks_by_path[k] - c0.acks_by_path[k];
  }
  r.reader = c1.reader - c0.reader;
  r.writer = c1.writer - c0.writer;
  r.coalesced = c1.coalesced - c0.coalesced;
  r.xmit_timer_starts = c1.xmit_timer_starts - c0.xmit_timer_starts;
  r.delack_timer_starts = c1.delack_timer_starts - c0.delack_timer_starts;
  r.throughput_mbps = static_cast<double>(r.bytes_received) * 8.0 / spec.duration_s / 1e6;
  r.sent_mbps = static_cast<double>(r.bytes_sent) * 8.0 / spec.duration_s / 1e6;
  r.transactions_per_s = static_cast<double>(r.transactions) / spec.duration_s;
  const auto hosts = net.hosts();
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    HostResult h;
    h.name = hosts[i]->name;
    h.cpus_counted = hosts[i]->cpus_counted;
    h.busy_ps = snap1[i].first - snap0[i].first;
    for (std::size_t c = 0; c < snap1[i].by_cpu.size(); ++c) {
      h.cpu_busy_pct.push_back(100.0 *
                               static_cast<double>(snap1[i].by_cpu[c] - snap0[i].by_cpu[c]) /
                               static_cast<double>(dur));
    }
    // Each context's cost in the window, matched by position (a host's contexts are only ever
    // appended; one made during the window, which the model does not do, would count from 0).
    for (std::size_t k = 0; k < snap1[i].by_ctx.size(); ++k) {
      const auto& [ctx, cost] = snap1[i].by_ctx[k];
      const std::int64_t before = k < snap0[i].by_ctx.size() ? snap0[i].by_ctx[k].second : 0;
      h.contexts.push_back({ctx->name(), ctx->cpu().index(), ctx->level(),
                            100.0 * static_cast<double>(cost - before) / static_cast<double>(dur)});
    }
    for (std::size_t d = 0; d < net.devices().size(); ++d) {
      const Device& dev = *net.devices()[d];
      if (dev.ns == nullptr || dev.ns->host != hosts[i]) {
        continue;
      }
      h.devices.emplace_back(dev.name(), DevCounters{dev1[d].xmit.since(dev0[d].xmit),
                                                     dev1[d].rx.since(dev0[d].rx)});
    }
    for (std::size_t s = 0; s < kSymCount; ++s) {
      LedgerCell c = snap1[i].second[s];
      c.subtract(snap0[i].second[s]);
      h.cells[s] = c;
      h.total.add(c);
    }
    const double busy_us = static_cast<double>(h.busy_ps) / static_cast<double>(kPsPerUs);
    h.cpu_util_pct = 100.0 * busy_us / (static_cast<double>(h.cpus_counted) * spec.duration_s * 1e6);
    const double kb = static_cast<double>(r.bytes_received) / 1024.0;
    h.service_demand_us_per_kb = kb > 0 ? busy_us / kb : 0;
    h.service_demand_us_per_tr =
        r.transactions > 0 ? busy_us / static_cast<double>(r.transactions) : 0;
    r.hosts.push_back(std::move(h));
  }

  // Stop the senders and drain: in-flight data is delivered, rings complete, timers fire.
  for (FlowRun& f : flows) {
    for (TcpSock* t : {f.a.get(), f.z.get()}) {
      if (t != nullptr) {
        t->to_send = 0;
        t->rr.stopped = true;
      }
    }
    if (f.ua) {
      f.ua->to_send = 0;
    }
  }
  net.engine().run_until(warm + dur + 2 * kPsPerSec);
  for (FlowRun& f : flows) {
    // close(): in the processes' own contexts, so the frees are CPU time like any other.
    for (TcpSock* t : {f.a.get(), f.z.get()}) {
      if (t != nullptr) {
        t->proc->cpu().submit({t->proc, [&net, t] { tcp_close(net, *t->proc, *t); }});
      }
    }
    for (UdpSock* u : {f.ua.get(), f.uz.get()}) {
      if (u != nullptr) {
        u->proc->cpu().submit({u->proc, [&net, u] { udp_close(net, *u->proc, *u); }});
      }
    }
  }
  net.engine().run_until(warm + dur + 3 * kPsPerSec);
  net.run_deferred_frees();
  net.engine().run_until(warm + dur + 4 * kPsPerSec);
  const Counters end = counters();
  r.total_bytes_sent = end.sent;
  r.total_bytes_received = end.received;
  r.total_bytes_dropped = net.dropped_payload_bytes();
  for (std::size_t i = 0; i < net.drops().size(); ++i) {
    if (net.drops()[i] != 0) {
      r.drops[std::string(drop_reason_name(static_cast<DropReason>(i)))] = net.drops()[i];
    }
  }
  r.hazards = net.hazards();
  r.trace = net.trace();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const FlowRun& f = flows[i];
    for (const auto& [sock, log] :
         {std::pair{f.a.get(), f.log_a.get()}, {f.z.get(), f.log_z.get()}}) {
      if (log == nullptr) {
        continue;
      }
      for (const SockEvent& e : *log) {
        if (e.time < warm || e.time >= warm + dur) {
          continue;
        }
        r.timeline.push_back({.time_us = static_cast<double>(e.time - warm) / kPsPerUs,
                              .ctx = e.ctx->name(),
                              .cpu = e.ctx->cpu().index(),
                              .flow = static_cast<std::uint32_t>(i),
                              .socket = sock->proc->name(),
                              .kind = e.kind,
                              .ack_path = static_cast<AckPath>(e.ack_path),
                              .bytes = e.bytes,
                              .unread = e.unread});
      }
    }
  }
  std::stable_sort(
      r.timeline.begin(), r.timeline.end(),
      [](const TimelineEvent& x, const TimelineEvent& y) { return x.time_us < y.time_us; });
  r.hops = net.hops();
  r.events = net.engine().events_run();
  for (Host* h : net.hosts()) {
    for (auto& c : h->cpus) {
      r.total_busy_ps += c->busy_ps();
    }
    h->for_each_context([&r](const ExecCtx& c) {
      r.total_ledger_ps += c.ledger().total().cost_ps + c.ledger().pending_ps();
    });
  }
  r.pool_empty_at_end = net.pool().empty();
  if (!r.pool_empty_at_end) {
    r.leak_report = std::to_string(net.pool().live_skbs()) + " skbs, " +
                    std::to_string(net.pool().live_bufs()) + " buffers, " +
                    std::to_string(net.pool().live_pages()) + " pages still live";
  }
  return r;
}

}  // namespace skbsim::sim
