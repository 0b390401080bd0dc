#include "sim/report.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <vector>

#include "sim/measure_report.hpp"

namespace skbsim::sim {
namespace {

double round_to(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

std::string host_of_ns(const Scenario& sc, const std::string& ns) {
  for (const auto& n : sc.spec.namespaces) {
    if (n.name == ns) {
      return n.host;
    }
  }
  return {};
}

struct ProfileRow {
  Sym sym;
  const LedgerCell* cell;
};

std::vector<ProfileRow> profile_rows(const HostResult& h) {
  std::vector<ProfileRow> rows;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    if (h.cells[i].calls > 0) {
      rows.push_back({static_cast<Sym>(i), &h.cells[i]});
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ProfileRow& a, const ProfileRow& b) {
    return a.cell->cost_ps > b.cell->cost_ps;
  });
  return rows;
}

std::string fixed(double v, int decimals) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(decimals) << v;
  return s.str();
}

}  // namespace

const HostResult* find_host(const RunResult& r, const std::string& name) {
  for (const auto& h : r.hosts) {
    if (h.name == name) {
      return &h;
    }
  }
  return nullptr;
}

std::map<std::string, double> device_per_segment(const DevCounters& c, double segments) {
  std::map<std::string, double> out;
  const double segs = segments > 0 ? segments : 1.0;
  auto side = [&out, segs](const std::string& p, const DevCounters::Side& s, bool with_segments) {
    const double skbs = static_cast<double>(s.skbs);
    const auto per_skb = [skbs](std::uint64_t v) {
      return skbs > 0 ? static_cast<double>(v) / skbs : 0.0;
    };
    out[p + "skbs"] = skbs / segs;
    if (with_segments) {
      out[p + "segments"] = static_cast<double>(s.segments) / segs;
    }
    out[p + "gso_skbs"] = static_cast<double>(s.gso_skbs) / segs;
    static constexpr std::array<const char*, 4> kState = {"none", "unnecessary", "complete",
                                                          "partial"};
    for (std::size_t k = 0; k < kState.size(); ++k) {
      out[p + "ip_summed_" + kState[k]] = static_cast<double>(s.ip_summed[k]) / segs;
    }
    out[p + "len_bytes_per_skb"] = per_skb(s.len);
    out[p + "data_len_bytes_per_skb"] = per_skb(s.data_len);
    out[p + "linear_bytes_per_skb"] = per_skb(s.len - s.data_len);
  };
  side("xmit_", c.xmit, true);
  side("rx_", c.rx, false);
  return out;
}

const HostResult* local_host(const Scenario& sc, const RunResult& r) {
  if (sc.reference && !sc.reference->host.empty()) {
    return find_host(r, sc.reference->host);
  }
  if (!sc.spec.flows.empty()) {
    return find_host(r, host_of_ns(sc, sc.spec.flows.front().from_ns));
  }
  return r.hosts.empty() ? nullptr : &r.hosts.front();
}

const HostResult* remote_host(const Scenario& sc, const RunResult& r) {
  if (sc.reference && !sc.reference->remote_host.empty()) {
    return find_host(r, sc.reference->remote_host);
  }
  if (!sc.spec.flows.empty()) {
    const std::string h = host_of_ns(sc, sc.spec.flows.front().to_ns);
    const HostResult* local = local_host(sc, r);
    if (local != nullptr && local->name == h) {
      return nullptr;
    }
    return find_host(r, h);
  }
  return nullptr;
}

std::optional<double> predicted_figure(const RunResult& r, const HostResult* local,
                                       const HostResult* remote, const std::string& key) {
  if (key == "throughput_mbps") {
    return r.throughput_mbps;
  }
  const bool is_remote = key.rfind("remote_", 0) == 0;
  const HostResult* h = is_remote ? remote : local;
  if (h == nullptr) {
    return std::nullopt;
  }
  if (key.rfind(kCpuBusyFigurePrefix, 0) == 0) {
    const std::size_t cpu = std::stoul(key.substr(kCpuBusyFigurePrefix.size()));
    return cpu < h->cpu_busy_pct.size() ? std::optional<double>(h->cpu_busy_pct[cpu])
                                        : std::nullopt;
  }
  if (key.ends_with("cpu_util_pct")) {
    return h->cpu_util_pct;
  }
  return h->service_demand_us_per_kb;
}

std::optional<double> predicted_counter(const RunResult& r, const HostResult& h,
                                        std::string_view key) {
  // Each counter's symbol, and whether it counts bytes rather than calls
  struct ModelCount {
    std::string_view key;
    Sym sym;
    bool bytes = false;
  };
  static constexpr std::array<ModelCount, 9> kModelCounts = {{
      {"pskb_expand_head_calls", Sym::kPskbExpandHead},
      {"skb_segment_outputs", Sym::kSkbSegment},
      {"consume_skb_calls", Sym::kConsumeSkb},
      {"kfree_skb_calls", Sym::kKfreeSkb},
      {"skb_copy_datagram_iovec_calls", Sym::kSkbCopyDatagramIovec},
      {"skb_copy_datagram_iovec_bytes", Sym::kSkbCopyDatagramIovec, true},
      {"tcp_acks_sent", Sym::kTcpSendAck},
      // /proc/stat ctxt and the CAL + RES IPIs of the untraced runs
      {"context_switches", Sym::kSchedule},
      {"ipis", Sym::kSendIpi},
  }};
  static_assert(
      std::ranges::equal(kModelCounts, measure::kValidatedCounters, {}, &ModelCount::key));
  const auto it = std::ranges::find(kModelCounts, key, &ModelCount::key);
  if (it == kModelCounts.end() || r.segments == 0) {
    return std::nullopt;
  }
  const LedgerCell& c = h.cells[static_cast<std::size_t>(it->sym)];
  return static_cast<double>(it->bytes ? c.bytes() : c.calls) / static_cast<double>(r.segments);
}

nlohmann::ordered_json error_pct(const RunResult& r, const Reference& ref) {
  nlohmann::ordered_json e = nlohmann::ordered_json::object();
  const HostResult* local = find_host(r, ref.host);
  const HostResult* remote = find_host(r, ref.remote_host);
  for (const ReferenceFigure& f : ref.figures()) {
    if (const auto p = predicted_figure(r, local, remote, f.key); p && f.has_relative_error()) {
      e[f.key] = round_to(100.0 * (*p - f.value) / f.value, 3);
    }
  }
  return e;
}

nlohmann::ordered_json result_json(const Scenario& sc, const RunResult& r, bool with_trace) {
  using J = nlohmann::ordered_json;
  const double ghz = sc.preset.clock_ghz();
  J out;
  out["schema"] = 1;
  out["scenario"] = sc.name;
  out["kernel"] = std::string(KernelModel::get(sc.spec.kernel).name);
  out["preset"] = sc.preset.name();
  out["seed"] = sc.spec.seed;
  out["test"] = std::string(traffic_type_name(r.type));
  out["elapsed_s"] = r.elapsed_s;
  out["throughput_mbps"] = round_to(r.throughput_mbps, 3);
  if (r.type == TrafficType::kUdpStream) {
    out["sent_mbps"] = round_to(r.sent_mbps, 3);  // before drops: netperf's local UDP figure
  }
  if (r.type == TrafficType::kTcpRr) {
    out["transactions_per_s"] = round_to(r.transactions_per_s, 2);
  }
  out["segments"] = r.segments;
  if (r.type != TrafficType::kUdpStream && r.segments > 0) {
    const auto per_segment = [&r](std::uint64_t n) {
      return round_to(static_cast<double>(n) / static_cast<double>(r.segments), 5);
    };
    // The ACKs per data segment by the path that sent them, as scripts/ack-source.sh splits the
    // kernel's.
    J acks = J::object();
    for (std::size_t k = 0; k < kAckPathCount; ++k) {
      acks[kAckPathNames[k]] = per_segment(r.acks_by_path[k]);
    }
    out["tcp_acks_by_path"] = std::move(acks);
    // The receiving applications' calls per data segment, and the bytes each copying read
    // returned, as scripts/rcv-cadence.sh counts the kernel's.
    J reader;
    reader["reads_copying"] = per_segment(r.reader.reads_copying);
    reader["reads_short"] = per_segment(r.reader.reads_short);
    reader["reads_empty"] = per_segment(r.reader.reads_empty);
    reader["selects"] = per_segment(r.reader.selects);
    reader["sleeps"] = per_segment(r.reader.sleeps);
    reader["bytes_per_copying_read"] =
        r.reader.reads_copying == 0 ? 0.0
                                    : round_to(static_cast<double>(r.bytes_received) /
                                                   static_cast<double>(r.reader.reads_copying),
                                               1);
    // Those calls timed as scripts/sleep-cycle.sh times the kernel's read() (ReadTiming): the
    // mean, and the least-squares line over the bytes each returned (null: too few to say).
    const ReadTiming& rt = r.reader.timed;
    const std::optional<double> slope = rt.us_per_byte();
    reader["timed_reads"] = rt.n;
    reader["read_us"] = rt.n == 0 ? J(nullptr) : J(round_to(rt.us / static_cast<double>(rt.n), 3));
    reader["read_ns_per_byte"] = slope ? J(round_to(*slope * 1000.0, 4)) : J(nullptr);
    reader["read_intercept_us"] = slope ? J(round_to(rt.intercept_us(*slope), 3)) : J(nullptr);
    out["tcp_reader"] = std::move(reader);
    // The sending applications' writes, timed as scripts/write-gaps.sh and write-copy.sh time
    // the kernel's (WriterStats): mean microseconds (null: none timed), and how many of each.
    const auto mean_us = [](const TimedSum& t) -> J {
      if (t.n == 0) {
        return nullptr;
      }
      return round_to(static_cast<double>(t.ps) / static_cast<double>(t.n) / 1e6, 3);
    };
    const WriterStats& w = r.writer;
    out["tcp_writer"] = {{"first_to_second_transmit_us", mean_us(w.first_second)},
                         {"second_to_third_transmit_us", mean_us(w.second_third)},
                         {"resumed_to_full_transmit_us", mean_us(w.resume_full)},
                         {"resumed_to_tail_transmit_us", mean_us(w.resume_tail)},
                         {"call_to_first_transmit_us", mean_us(w.call_first)},
                         {"timed",
                          {{"first_to_second", w.first_second.n},
                           {"second_to_third", w.second_third.n},
                           {"resumed_to_full", w.resume_full.n},
                           {"resumed_to_tail", w.resume_tail.n},
                           {"call_to_first", w.call_first.n}}}};
    // Skbs merged into another per data segment, as the kernel's TcpExt TCPRcvCoalesce and
    // TCPBacklogCoalesce count them (CoalesceStats).
    out["tcp_coalesce"] = {{"receive_queue", per_segment(r.coalesced.receive_queue)},
                           {"backlog_data", per_segment(r.coalesced.backlog_data)},
                           {"backlog_acks", per_segment(r.coalesced.backlog_acks)}};
    // Timers queued on the wheel per data segment, as scripts/tcp-timers.sh counts the kernel's
    // timer_start events.
    out["tcp_timer_starts"] = {{"retransmit", per_segment(r.xmit_timer_starts)},
                               {"delayed_ack", per_segment(r.delack_timer_starts)}};
  }
  J hosts = J::object();
  for (const auto& h : r.hosts) {
    J jh;
    jh["cpus_counted"] = h.cpus_counted;
    jh["cpu_util_pct"] = round_to(h.cpu_util_pct, 4);
    J by_cpu = J::array();
    for (double b : h.cpu_busy_pct) {
      by_cpu.push_back(round_to(b, 2));
    }
    jh["cpu_busy_pct_by_cpu"] = std::move(by_cpu);
    J contexts = J::array();
    for (const ContextShare& c : h.contexts) {
      contexts.push_back({{"name", c.name},
                          {"cpu", c.cpu},
                          {"level", std::string(level_name(c.level))},
                          {"busy_pct", round_to(c.busy_pct, 2)}});
    }
    jh["contexts"] = std::move(contexts);
    jh["service_demand_us_per_kb"] = round_to(h.service_demand_us_per_kb, 4);
    if (r.type == TrafficType::kTcpRr) {
      jh["service_demand_us_per_tr"] = round_to(h.service_demand_us_per_tr, 4);
    }
    const double segs = r.segments > 0 ? static_cast<double>(r.segments) : 1.0;
    J per = J::object();
    per["bytes_copied"] = round_to(static_cast<double>(h.total.bytes_copied()) / segs, 3);
    per["bytes_checksummed"] = round_to(static_cast<double>(h.total.bytes_checksummed()) / segs, 3);
    per["allocs"] = round_to(static_cast<double>(h.total.allocs) / segs, 4);
    per["skb_handovers"] = round_to(static_cast<double>(h.total.handovers) / segs, 4);
    per["cycles"] = round_to(static_cast<double>(h.total.cost_ps) * ghz / 1000.0 / segs, 2);
    for (std::size_t i = 0; i < kSymCount; ++i) {
      const LedgerCell& c = h.cells[i];
      if (c.calls == 0) {
        continue;
      }
      const std::string name(symbol_name(static_cast<Sym>(i)));
      per[name + "_calls"] = round_to(static_cast<double>(c.calls) / segs, 4);
      per[name + "_bytes"] = round_to(static_cast<double>(c.bytes()) / segs, 3);
    }
    jh["per_segment"] = std::move(per);
    J devs = J::object();
    for (const auto& [name, counters] : h.devices) {
      J d = J::object();
      for (const auto& [key, value] : device_per_segment(counters, segs)) {
        d[key] = round_to(value, 5);
      }
      devs[name] = std::move(d);
    }
    jh["devices"] = std::move(devs);
    J prof = J::array();
    const double total = static_cast<double>(h.total.cost_ps);
    for (const ProfileRow& row : profile_rows(h)) {
      prof.push_back({{"symbol", std::string(symbol_name(row.sym))},
                      {"group", std::string(group_name(symbol_group(row.sym)))},
                      {"calls", row.cell->calls},
                      {"cycles", std::llround(static_cast<double>(row.cell->cost_ps) * ghz / 1000.0)},
                      {"pct", total > 0 ? round_to(100.0 * static_cast<double>(row.cell->cost_ps) /
                                                       total, 3)
                                        : 0.0}});
    }
    jh["profile"] = std::move(prof);
    hosts[h.name] = std::move(jh);
  }
  out["hosts"] = std::move(hosts);
  J drops = J::object();
  for (const auto& [k, v] : r.drops) {
    drops[k] = v;
  }
  out["drops"] = std::move(drops);
  J hz = J::array();
  for (const Hazard& h : r.hazards) {
    hz.push_back({{"kind", h.kind}, {"message", h.message}, {"where", h.where}});
  }
  out["hazards"] = std::move(hz);
  out["conservation"] = {{"bytes_sent", r.total_bytes_sent},
                         {"bytes_received", r.total_bytes_received},
                         {"bytes_dropped", r.total_bytes_dropped},
                         {"all_freed", r.pool_empty_at_end},
                         {"busy_equals_ledger", r.total_busy_ps == r.total_ledger_ps}};
  if (sc.reference) {
    const Reference& ref = *sc.reference;
    J jr;
    jr["source"] = ref.source;
    jr["tolerance_pct"] = ref.tolerance_pct;
    jr["host"] = ref.host;
    if (ref.throughput_mbps) {
      jr["throughput_mbps"] = *ref.throughput_mbps;
    }
    if (ref.cpu_util_pct) {
      jr["cpu_util_pct"] = *ref.cpu_util_pct;
    }
    if (ref.service_demand_us_per_kb) {
      jr["service_demand_us_per_kb"] = *ref.service_demand_us_per_kb;
    }
    if (ref.remote_cpu_util_pct) {
      jr["remote_cpu_util_pct"] = *ref.remote_cpu_util_pct;
    }
    out["reference"] = std::move(jr);
    out["error_pct"] = error_pct(r, ref);
  }
  if (with_trace) {
    J tr = J::array();
    for (const TraceEntry& t : r.trace) {
      tr.push_back({{"time_us", round_to(static_cast<double>(t.time) / kPsPerUs, 3)},
                    {"host", t.host},
                    {"context", t.ctx},
                    {"what", t.what},
                    {"skb", t.skb_id},
                    {"bytes", t.bytes},
                    {"cycles", std::llround(static_cast<double>(t.cost_ps) * ghz / 1000.0)}});
    }
    out["trace"] = std::move(tr);
  }
  return out;
}

void print_profile(std::ostream& out, const Scenario& sc, const RunResult& r, std::size_t rows) {
  const double ghz = sc.preset.clock_ghz();
  for (const auto& h : r.hosts) {
    out << "\n# Host " << h.name << ": " << fixed(h.cpu_util_pct, 2) << "% of " << h.cpus_counted
        << " CPUs (by CPU:";
    for (double b : h.cpu_busy_pct) {
      out << " " << fixed(b, 1) << "%";
    }
    out << "), " << r.segments << " data segments\n";
    // Where that time ran: each context's share of its CPU, as `perf report --sort cpu,comm`.
    out << "# By context:";
    const char* sep = " ";
    for (const ContextShare& c : h.contexts) {
      if (c.busy_pct > 0) {
        out << sep << c.name << " (CPU " << c.cpu << ") " << fixed(c.busy_pct, 1) << "%";
        sep = ", ";
      }
    }
    out << "\n";
    out << "# Overhead       Calls   Calls/seg  Cycles/seg  Symbol\n";
    const double total = static_cast<double>(h.total.cost_ps);
    const double segs = r.segments > 0 ? static_cast<double>(r.segments) : 1.0;
    std::size_t n = 0;
    for (const ProfileRow& row : profile_rows(h)) {
      if (n++ == rows) {
        break;
      }
      const double pct = total > 0 ? 100.0 * static_cast<double>(row.cell->cost_ps) / total : 0;
      out << std::setw(9) << fixed(pct, 2) << "%  " << std::setw(10) << row.cell->calls << "  "
          << std::setw(9) << fixed(static_cast<double>(row.cell->calls) / segs, 3) << "  "
          << std::setw(10)
          << fixed(static_cast<double>(row.cell->cost_ps) * ghz / 1000.0 / segs, 1) << "  "
          << symbol_name(row.sym) << "\n";
    }
  }
}

void print_trace(std::ostream& out, const Scenario& sc, const RunResult& r) {
  const double ghz = sc.preset.clock_ghz();
  out << "\n# Life of the traced data segment: time (task start), host, context, kernel function\n"
         "# or hop, skb (clones and copies have their own), cycles charged, bytes handled\n";
  std::int64_t total_ps = 0;
  for (const TraceEntry& t : r.trace) {
    out << std::setw(12) << fixed(static_cast<double>(t.time) / kPsPerUs, 3) << " us  "
        << std::left << std::setw(3) << t.host << " " << std::setw(14) << t.ctx << " "
        << std::setw(40) << t.what << std::right << " skb#" << std::setw(7) << std::left
        << t.skb_id << std::right;
    if (t.what.rfind("hop:", 0) != 0) {
      out << std::setw(8) << std::llround(static_cast<double>(t.cost_ps) * ghz / 1000.0)
          << " cyc";
      if (t.bytes != 0) {
        out << "  " << t.bytes << " B";
      }
    }
    total_ps += t.cost_ps;
    out << "\n";
  }
  out << "# total: " << std::llround(static_cast<double>(total_ps) * ghz / 1000.0)
      << " cycles charged to this segment's skbs\n";
}

std::string timeline_tsv(const RunResult& r) {
  std::ostringstream out;
  out << "time_us\tcpu\tcontext\tflow\tsocket\tevent\tbytes\tunread\tack_path\n";
  for (const TimelineEvent& e : r.timeline) {
    out << fixed(e.time_us, 3) << '\t' << e.cpu << '\t' << e.ctx << '\t' << e.flow << '\t'
        << e.socket << '\t' << kSockEventNames[static_cast<std::size_t>(e.kind)] << '\t' << e.bytes
        << '\t' << e.unread << '\t'
        << (e.kind == SockEventKind::kAck ? kAckPathNames[static_cast<std::size_t>(e.ack_path)]
                                          : "-")
        << '\n';
  }
  return out.str();
}

void print_text(std::ostream& out, const Scenario& sc, const RunResult& r, const ReportOptions& o) {
  const HostResult* local = local_host(sc, r);
  const HostResult* remote = remote_host(sc, r);
  const FlowSpec* f = sc.spec.flows.empty() ? nullptr : &sc.spec.flows.front();
  auto util = [](const HostResult* h) { return h ? fixed(h->cpu_util_pct, 2) : "-1.00"; };
  auto sd_kb = [](const HostResult* h) {
    return h ? fixed(h->service_demand_us_per_kb, 3) : "-1.000";
  };
  out << "MIGRATED " << traffic_type_name(r.type) << " TEST (skbsim " << sc.name << ", kernel "
      << KernelModel::get(sc.spec.kernel).name << ", preset " << sc.preset.name() << ")\n";
  switch (r.type) {
    case TrafficType::kTcpStream:
    case TrafficType::kTcpMaerts:
      out << "Recv   Send    Send                          Utilization       Service Demand\n"
             "Socket Socket  Message  Elapsed              Send     Recv     Send    Recv\n"
             "Size   Size    Size     Time     Throughput  local    remote   local   remote\n"
             "bytes  bytes   bytes    secs.    10^6bits/s  % S      % S      us/KB   us/KB\n\n";
      out << std::setw(6) << (f ? f->rcvbuf : 0) << " " << std::setw(6) << (f ? f->sndbuf : 0)
          << " " << std::setw(6) << (f ? f->send_size : 0) << "    " << std::setw(5)
          << fixed(r.elapsed_s, 2) << "   " << std::setw(10) << fixed(r.throughput_mbps, 2)
          << "   " << std::setw(6) << util(local) << "   " << std::setw(6) << util(remote)
          << "   " << std::setw(6) << sd_kb(local) << "  " << std::setw(6) << sd_kb(remote)
          << "\n";
      break;
    case TrafficType::kUdpStream: {
      // netperf's two lines: the sender (local) with what it sent, the receiver (remote) with what
      // arrived; the datagram counts are over the measured window.
      const double size = f ? static_cast<double>(f->send_size) : 1.0;
      const auto sent = static_cast<std::uint64_t>(static_cast<double>(r.bytes_sent) / size);
      const auto got = static_cast<std::uint64_t>(static_cast<double>(r.bytes_received) / size);
      out << "Socket  Message  Elapsed      Messages                   CPU      Service\n"
             "Size    Size     Time         Okay Errors   Throughput   Util     Demand\n"
             "bytes   bytes    secs            #      #   10^6bits/sec % S      us/KB\n\n";
      out << std::setw(7) << (f ? f->sndbuf : 0) << " " << std::setw(7) << (f ? f->send_size : 0)
          << "  " << std::setw(6) << fixed(r.elapsed_s, 2) << "  " << std::setw(10) << sent
          << "      0   " << std::setw(10) << fixed(r.sent_mbps, 2) << "   " << std::setw(6)
          << util(local) << "   " << sd_kb(local) << "\n";
      out << std::setw(7) << (f ? f->rcvbuf : 0) << "          " << std::setw(6)
          << fixed(r.elapsed_s, 2) << "  " << std::setw(10) << got << "          "
          << std::setw(10) << fixed(r.throughput_mbps, 2) << "   " << std::setw(6) << util(remote)
          << "   " << sd_kb(remote) << "\n";
      break;
    }
    case TrafficType::kTcpRr:
      out << "Local /Remote\n"
             "Socket Size   Request Resp.  Elapsed Trans.     CPU    CPU    S.dem   S.dem\n"
             "Send   Recv   Size    Size   Time    Rate       local  remote local   remote\n"
             "bytes  bytes  bytes   bytes  secs.   per sec    % S    % S    us/Tr   us/Tr\n\n";
      out << std::setw(6) << (f ? f->sndbuf : 0) << " " << std::setw(6) << (f ? f->rcvbuf : 0)
          << " " << std::setw(6) << (f ? f->request_size : 0) << "  " << std::setw(6)
          << (f ? f->response_size : 0) << " " << std::setw(6) << fixed(r.elapsed_s, 2) << "  "
          << std::setw(10) << fixed(r.transactions_per_s, 2) << " " << std::setw(6)
          << util(local) << " " << std::setw(6) << util(remote) << " " << std::setw(7)
          << (local ? fixed(local->service_demand_us_per_tr, 3) : "-1.000") << " "
          << std::setw(7) << (remote ? fixed(remote->service_demand_us_per_tr, 3) : "-1.000")
          << "\n"
          << std::setw(6) << (f ? f->sndbuf : 0) << " " << std::setw(6) << (f ? f->rcvbuf : 0)
          << "\n";
      break;
  }
  if (sc.reference) {
    const Reference& ref = *sc.reference;
    const auto err = error_pct(r, ref);
    out << "\nMeasured (" << ref.source << "):\n";
    auto line = [&](const std::string& what, const std::optional<double>& m,
                    const std::string& key) {
      const std::optional<double> predicted = predicted_figure(r, local, remote, key);
      if (!m || !predicted) {
        return;
      }
      out << "  " << std::left << std::setw(28) << what << std::right << std::setw(10)
          << fixed(*m, 2) << "  predicted " << std::setw(10) << fixed(*predicted, 2)
          << "  error ";
      if (err.contains(key)) {
        out << std::showpos << fixed(err[key].get<double>(), 1) << std::noshowpos << "%";
      } else {
        out << "-";  // measured 0: no relative error
      }
      out << "  (tolerance " << fixed(ref.tolerance_pct, 0) << "%)\n";
    };
    line("throughput 10^6bits/s", ref.throughput_mbps, "throughput_mbps");
    line("local CPU %", ref.cpu_util_pct, "cpu_util_pct");
    line("local service demand us/KB", ref.service_demand_us_per_kb, "service_demand_us_per_kb");
    line("remote CPU %", ref.remote_cpu_util_pct, "remote_cpu_util_pct");
    for (std::size_t c = 0; c < ref.cpu_busy_pct_by_cpu.size(); ++c) {
      line("local CPU " + std::to_string(c) + " busy %", ref.cpu_busy_pct_by_cpu[c],
           std::string(kCpuBusyFigurePrefix) + std::to_string(c));
    }
  }
  for (const Hazard& h : r.hazards) {
    out << "\nHAZARD " << h.kind << " (" << h.where << "): " << h.message << "\n";
  }
  if (!r.drops.empty()) {
    out << "\nDrops:";
    for (const auto& [k, v] : r.drops) {
      out << " " << k << "=" << v;
    }
    out << "\n";
  }
  if (o.profile) {
    print_profile(out, sc, r, o.profile_rows);
  }
  if (o.trace) {
    print_trace(out, sc, r);
  }
}

}  // namespace skbsim::sim
