#include "sim/run.hpp"

#include <bit>
#include <stdexcept>

#include "sim/devices.hpp"
#include "sim/tcp.hpp"
#include "skbsim/skb_check.hpp"

namespace skbsim::sim {
namespace {

struct Built {
  std::map<std::string, Namespace*> ns;
  std::map<std::string, Device*> dev;
  std::vector<std::unique_ptr<TcpSock>> socks;
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
    net.add_host(h.name, h.cpus, h.cpus_counted);
  }
  for (const NamespaceSpec& n : spec.namespaces) {
    Host* h = net.host(n.host);
    if (h == nullptr) {
      throw std::invalid_argument("namespace " + n.name + " on unknown host " + n.host);
    }
    Namespace& ns = net.add_namespace(*h, n.name);
    ns.ip_forward = n.ip_forward;
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
        throw std::invalid_argument("bridge devices are not modelled yet");
    }
    dev->features = d.features.value_or(default_features(d.kind, spec.kernel, d.modern));
    // register_netdevice (2.6.20): SG needs a checksum feature, TSO needs SG.
    if ((dev->features & feat::kAllCsum) == 0) {
      dev->features &= ~feat::kSg;
    }
    if ((dev->features & feat::kSg) == 0) {
      dev->features &= ~feat::kTso;
    }
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
  for (const NamespaceSpec& n : spec.namespaces) {
    Namespace& ns = find_ns(b, n.name);
    for (const RouteSpec& r : n.routes) {
      ns.routes.push_back({r.prefix, r.prefix_len, &find_dev(b, r.dev)});
    }
  }
  net.patches() = spec.patches;
}

}  // namespace

RunResult run_scenario(const ScenarioSpec& spec) {
  Net net(spec.kernel, spec.cost);
  Built b;
  build(net, spec, b);
  net.trace_segment(spec.trace_segment);

  struct FlowSocks {
    TcpSock* snd;
    TcpSock* rcv;
  };
  std::vector<FlowSocks> flows;
  std::uint16_t port = 10000;
  for (const FlowSpec& f : spec.flows) {
    Namespace& from = find_ns(b, f.from_ns);
    Namespace& to = find_ns(b, f.to_ns);
    auto snd = std::make_unique<TcpSock>();
    auto rcv = std::make_unique<TcpSock>();
    for (TcpSock* s : {snd.get(), rcv.get()}) {
      s->net = &net;
      s->params = TcpParams{f.mss, f.sndbuf, f.rcvbuf, f.send_size};
    }
    snd->ns = &from;
    snd->host = from.host;
    snd->saddr = f.from_addr;
    snd->daddr = f.to_addr;
    snd->sport = port;
    snd->dport = 12865;
    rcv->ns = &to;
    rcv->host = to.host;
    rcv->saddr = f.to_addr;
    rcv->daddr = f.from_addr;
    rcv->sport = 12865;
    rcv->dport = port;
    ++port;
    snd->proc = &net.add_context(*from.host, "netperf", f.sender_cpu, Level::kProcess);
    rcv->proc = &net.add_context(*to.host, "netserver", f.receiver_cpu, Level::kProcess);
    from.sockets.push_back(snd.get());
    to.sockets.push_back(rcv.get());
    tcp_connect(net, *snd, *rcv);
    flows.push_back({snd.get(), rcv.get()});
    b.socks.push_back(std::move(snd));
    b.socks.push_back(std::move(rcv));
  }
  for (auto& f : flows) {
    tcp_start_sender(net, *f.snd);
  }

  // Warm-up, then the measured window: snapshot ledgers, busy time and bytes at both ends.
  const Time warm = static_cast<Time>(spec.warmup_s * static_cast<double>(kPsPerSec));
  const Time dur = static_cast<Time>(spec.duration_s * static_cast<double>(kPsPerSec));
  auto snapshot = [&net] {
    std::vector<std::pair<Time, std::array<LedgerCell, kSymCount>>> snap;
    for (Host* h : net.hosts()) {
      Time busy = 0;
      for (auto& c : h->cpus) {
        busy += c->busy_ps();
      }
      std::array<LedgerCell, kSymCount> cells{};
      auto add = [&cells](const ExecCtx& ctx) {
        for (std::size_t i = 0; i < kSymCount; ++i) {
          cells[i].add(ctx.ledger().cells()[i]);
        }
      };
      for (auto& sn : h->softnet) {
        add(*sn.ctx);
      }
      for (auto& c : h->other_ctxs) {
        add(*c);
      }
      snap.emplace_back(busy, cells);
    }
    return snap;
  };
  auto received = [&flows] {
    std::uint64_t n = 0;
    for (auto& f : flows) {
      n += f.rcv->stats.bytes_received;
    }
    return n;
  };
  auto segments = [&flows] {
    std::uint64_t n = 0;
    for (auto& f : flows) {
      n += f.snd->stats.segs_out;
    }
    return n;
  };
  net.engine().run_until(warm);
  const auto snap0 = snapshot();
  const std::uint64_t rx0 = received();
  const std::uint64_t seg0 = segments();
  net.engine().run_until(warm + dur);
  const auto snap1 = snapshot();
  const std::uint64_t rx1 = received();
  const std::uint64_t seg1 = segments();

  RunResult r;
  r.elapsed_s = spec.duration_s;
  r.bytes_received = rx1 - rx0;
  r.segments = seg1 - seg0;
  r.throughput_mbps = static_cast<double>(r.bytes_received) * 8.0 / spec.duration_s / 1e6;
  const auto hosts = net.hosts();
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    HostResult h;
    h.name = hosts[i]->name;
    h.cpus_counted = hosts[i]->cpus_counted;
    h.busy_ps = snap1[i].first - snap0[i].first;
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
    r.hosts.push_back(std::move(h));
  }

  // Stop the senders and drain: in-flight data is delivered, rings complete, timers fire.
  for (auto& f : flows) {
    f.snd->to_send = 0;
  }
  net.engine().run_until(warm + dur + 2 * kPsPerSec);
  for (auto& f : flows) {
    // close(): in the processes' own contexts, so the frees are CPU time like any other.
    f.snd->proc->cpu().submit({f.snd->proc, [&net, &f] { tcp_close(net, *f.snd->proc, *f.snd); }});
    f.rcv->proc->cpu().submit({f.rcv->proc, [&net, &f] { tcp_close(net, *f.rcv->proc, *f.rcv); }});
  }
  net.engine().run_until(warm + dur + 3 * kPsPerSec);
  for (auto& f : flows) {
    r.total_bytes_sent += f.snd->stats.bytes_sent;
    r.total_bytes_received += f.rcv->stats.bytes_received;
  }
  r.total_bytes_dropped = net.dropped_payload_bytes();
  for (std::size_t i = 0; i < net.drops().size(); ++i) {
    if (net.drops()[i] != 0) {
      r.drops[std::string(drop_reason_name(static_cast<DropReason>(i)))] = net.drops()[i];
    }
  }
  r.hazards = net.hazards();
  r.trace = net.trace();
  r.hops = net.hops();
  r.events = net.engine().events_run();
  for (Host* h : net.hosts()) {
    for (auto& c : h->cpus) {
      r.total_busy_ps += c->busy_ps();
    }
    for (auto& sn : h->softnet) {
      r.total_ledger_ps += sn.ctx->ledger().total().cost_ps + sn.ctx->ledger().pending_ps();
    }
    for (auto& c : h->other_ctxs) {
      r.total_ledger_ps += c->ledger().total().cost_ps + c->ledger().pending_ps();
    }
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
