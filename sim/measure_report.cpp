// measure_report.cpp — measurement and scenario JSON, the summary table.

#include "sim/measure_report.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "skbsim/kernel.hpp"

namespace skbsim::sim::measure {
namespace {

using ojson = nlohmann::ordered_json;

std::string short_number(double v) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

std::string fixed(double v, int d) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(d) << v;
  return s.str();
}

// A difference in percent with its sign and one decimal: "+18.1%", "-9.9%".
std::string signed_pct(double v) { return (v >= 0 ? "+" : "") + fixed(v, 1) + "%"; }

// How far `now` is from `base`, in percent of `base` (0 against a base of 0).
double diff_pct(double now, double base) {
  return base != 0 ? 100.0 * (now - base) / base : 0;
}

double ratio(std::uint64_t num, std::int64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

double per(std::uint64_t num, std::uint64_t den) {
  return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0;
}

ojson spread_json(const std::vector<double>& v, int decimals) {
  if (v.empty()) {
    return nullptr;
  }
  const Spread s = spread(v);
  return {{"median", rounded(s.median, decimals)},
          {"min", rounded(s.min, decimals)},
          {"max", rounded(s.max, decimals)},
          {"mad", rounded(s.mad, decimals)},
          {"n", s.n}};
}

// The interrupt rows in kRecordedInterrupts' order, those present.
ojson interrupts_json(const std::map<std::string, std::uint64_t>& rows) {
  ojson o = ojson::object();
  for (const char* row : kRecordedInterrupts) {
    const auto it = rows.find(row);
    if (it != rows.end()) {
      o[row] = it->second;
    }
  }
  return o;
}

// A CPU's tick fields as % of the wall (CpuActivity), by the names the files give them.
constexpr std::pair<const char*, double CpuActivity::*> kTickFields[] = {
    {"user", &CpuActivity::user_pct},
    {"system", &CpuActivity::system_pct},
    {"irq", &CpuActivity::irq_pct},
    {"softirq", &CpuActivity::softirq_pct}};

ojson activity_json(const Activity& a) {
  ojson cpus = ojson::array();
  for (const auto& [cpu, c] : a.cpus) {
    ojson ticks = ojson::object();
    for (const auto& [name, field] : kTickFields) {
      ticks[name] = rounded(c.*field, 3);
    }
    ojson e = {{"cpu", cpu},
               {"non_idle_pct", rounded(c.non_idle_pct, 3)},
               {"non_idle_us", rounded(c.non_idle_us, 0)},
               {"ticks_pct", ticks}};
    if (a.softirqs) {
      e["net_rx_softirqs"] = c.net_rx_softirqs;
      e["net_tx_softirqs"] = c.net_tx_softirqs;
    }
    if (!c.interrupts.empty()) {
      e["interrupts"] = interrupts_json(c.interrupts);
    }
    cpus.push_back(e);
  }
  return {{"context_switches", a.context_switches ? ojson(*a.context_switches) : ojson(nullptr)},
          {"ipis", a.interrupts ? ojson(a.wakeup_ipis()) : ojson(nullptr)},
          {"cpus", cpus}};
}

// A figure a probe may lack (0: not probed) as a number, or null.
ojson probed(double v, int decimals) {
  return v > 0 ? ojson(rounded(v, decimals)) : ojson(nullptr);
}

ojson speed_probe_json(const SpeedProbe& p) {
  ojson cpus = ojson::array();
  for (const auto& [cpu, c] : p.cpus) {
    cpus.push_back({{"cpu", cpu},
                    {"alu_ns", rounded(c.alu_ns, 4)},
                    {"syscall_ns", rounded(c.syscall_ns, 1)},
                    {"hot_line_ns", probed(c.hot_line_ns, 3)},
                    {"after_sleep_line_ns", probed(c.after_sleep_line_ns, 3)}});
  }
  return {{"cpus", cpus},
          {"wake_round_trip_us",
           p.wake_round_trip_us ? ojson(rounded(*p.wake_round_trip_us, 2)) : ojson(nullptr)}};
}

ojson yardstick_json(const SpeedYardstick& y) {
  const auto num = [](const std::optional<double>& v, int decimals) {
    return v ? ojson(rounded(*v, decimals)) : ojson(nullptr);
  };
  return {{"alu_ns", num(y.alu_ns, 4)},
          {"syscall_ns", num(y.syscall_ns, 1)},
          {"wake_round_trip_us", num(y.wake_round_trip_us, 2)}};
}

ojson run_speed_json(const RunSpeed& s) {
  const auto wake = s.wake_round_trip_us();
  return {{"alu_ns", rounded(s.alu_ns(), 4)},
          {"syscall_ns", rounded(s.syscall_ns(), 1)},
          {"wake_round_trip_us", wake ? ojson(rounded(*wake, 2)) : ojson(nullptr)},
          {"hot_line_ns", probed(s.hot_line_ns(), 3)},
          {"after_sleep_line_ns", probed(s.after_sleep_line_ns(), 3)},
          {"before", speed_probe_json(s.before)},
          {"after", speed_probe_json(s.after)}};
}

ojson run_json(const RunFigures& r) {
  ojson ticks = ojson::object();
  for (const auto& [k, v] : r.cpu.tick_deltas) {
    ticks[k] = v;
  }
  return {{"wall_s", rounded(r.wall_s, 4)},
          {"stream_s", rounded(r.stream_s, 4)},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"throughput_mbps", rounded(r.throughput_mbps, 2)},
          {"sender_throughput_mbps", rounded(r.sender_throughput_mbps, 2)},
          {"retransmits", r.retransmits},
          {"mss", r.mss},
          {"tcp_congestion",
           {{"sender", r.sender_congestion}, {"receiver", r.receiver_congestion}}},
          {"cpu",
           {{"cpus", r.cpu.cpus},
            {"non_idle_pct", rounded(r.cpu.non_idle_pct, 3)},
            {"ticks_busy_pct", rounded(r.cpu.ticks_busy_pct, 3)},
            {"steal_pct", rounded(r.cpu.steal_pct, 3)},
            {"iowait_pct", rounded(r.cpu.iowait_pct, 3)},
            {"non_idle_us", rounded(r.cpu.non_idle_us, 0)},
            {"ticks_busy_us", rounded(r.cpu.ticks_busy_us, 0)},
            {"tick_deltas", ticks}}},
          {"service_demand_us_per_kb", rounded(r.service_demand_us_per_kb, 5)},
          {"service_demand_ticks_us_per_kb", rounded(r.service_demand_ticks_us_per_kb, 5)},
          {"tcp",
           {{"client_out_segs", r.client_out_segs},
            {"client_retrans_segs", r.client_retrans_segs},
            {"server_in_segs", r.server_in_segs},
            {"server_out_segs", r.server_out_segs},
            {"server_rcvbuf", r.server_rcvbuf ? ojson(*r.server_rcvbuf) : ojson()},
            {"client_tcpext", r.client_tcpext},
            {"server_tcpext", r.server_tcpext}}},
          {"activity", activity_json(r.activity)},
          {"speed", r.speed ? run_speed_json(*r.speed) : ojson(nullptr)},
          {"unsteady", r.unsteady.empty() ? ojson(nullptr) : ojson(r.unsteady)},
          {"iperf3_cpu_utilization_percent", r.iperf3_cpu}};
}

std::uint64_t summed(const std::map<int, std::uint64_t>& m, int state) {
  const auto it = m.find(state);
  return it == m.end() ? 0 : it->second;
}

// A device's counts per wire segment; each direction's counts (not its bytes per skb) times its
// scale (see per_segment_json: 1, or the untraced runs' ACK rate over the traced run's).
ojson device_json(const DeviceCounts& d, std::int64_t segs, double xmit_scale = 1,
                  double rx_scale = 1) {
  ojson o;
  const auto xmit = [&](std::uint64_t n) { return rounded(ratio(n, segs) * xmit_scale, 5); };
  const auto rx = [&](std::uint64_t n) { return rounded(ratio(n, segs) * rx_scale, 5); };
  o["xmit_skbs"] = xmit(d.xmit_skbs);
  o["xmit_segments"] = xmit(d.xmit_segments);
  o["xmit_gso_skbs"] = xmit(d.xmit_gso_skbs);
  for (int s = 0; s < 4; ++s) {
    o["xmit_ip_summed_" + ip_summed_name(s)] = xmit(summed(d.xmit_ip_summed, s));
  }
  o["xmit_len_bytes_per_skb"] = rounded(per(d.xmit_len_bytes, d.xmit_skbs), 1);
  o["xmit_data_len_bytes_per_skb"] = rounded(per(d.xmit_data_len_bytes, d.xmit_skbs), 1);
  o["xmit_linear_bytes_per_skb"] = rounded(
      per(d.xmit_len_bytes - std::min(d.xmit_len_bytes, d.xmit_data_len_bytes), d.xmit_skbs), 1);
  o["rx_skbs"] = rx(d.rx_skbs);
  o["rx_gso_skbs"] = rx(d.rx_gso_skbs);
  for (int s = 0; s < 4; ++s) {
    o["rx_ip_summed_" + ip_summed_name(s)] = rx(summed(d.rx_ip_summed, s));
  }
  o["rx_len_bytes_per_skb"] = rounded(per(d.rx_len_bytes, d.rx_skbs), 1);
  o["rx_data_len_bytes_per_skb"] = rounded(per(d.rx_data_len_bytes, d.rx_skbs), 1);
  o["rx_linear_bytes_per_skb"] =
      rounded(per(d.rx_len_bytes - std::min(d.rx_len_bytes, d.rx_data_len_bytes), d.rx_skbs), 1);
  return o;
}

ojson raw_device_json(const DeviceCounts& d) {
  ojson xs = ojson::object();
  for (const auto& [s, n] : d.xmit_ip_summed) {
    xs[ip_summed_name(s)] = n;
  }
  ojson rs = ojson::object();
  for (const auto& [s, n] : d.rx_ip_summed) {
    rs[ip_summed_name(s)] = n;
  }
  return {{"xmit_skbs", d.xmit_skbs},
          {"xmit_segments", d.xmit_segments},
          {"xmit_gso_skbs", d.xmit_gso_skbs},
          {"xmit_ip_summed", xs},
          {"xmit_len_bytes", d.xmit_len_bytes},
          {"xmit_data_len_bytes", d.xmit_data_len_bytes},
          {"rx_skbs", d.rx_skbs},
          {"rx_gso_skbs", d.rx_gso_skbs},
          {"rx_ip_summed", rs},
          {"rx_len_bytes", d.rx_len_bytes},
          {"rx_data_len_bytes", d.rx_data_len_bytes}};
}

ojson top_sites(const std::map<std::string, std::uint64_t>& sites, std::size_t n) {
  std::vector<std::pair<std::uint64_t, std::string>> v;
  for (const auto& [s, c] : sites) {
    v.emplace_back(c, s);
  }
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  ojson o = ojson::object();
  for (std::size_t i = 0; i < v.size() && i < n; ++i) {
    o[v[i].second] = v[i].first;
  }
  return o;
}

std::string third_field(const std::string& triple) {
  std::istringstream in(triple);
  std::string a;
  std::string b;
  std::string c;
  in >> a >> b >> c;
  return c;
}

}  // namespace

double rounded(double v, int decimals) {
  if (!std::isfinite(v)) {
    return 0;
  }
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

std::string Configuration::rate_label() const {
  return rate_mbps ? short_number(*rate_mbps) + "mbps" : "unlimited";
}

std::string Configuration::name() const {
  return std::string(topology_name(topology)) + "-" + std::string(variant_name(variant)) + "-" +
         rate_label();
}

std::string machine_line(const Machine& m) {
  std::string s = "Linux " + m.kernel + " " + m.arch + ", " + m.cpu_model;
  if (m.cpu_mhz) {
    s += " @ " + fixed(*m.cpu_mhz, 0) + " MHz";
  }
  s += ", " + std::to_string(m.cpus) + " CPUs, virtualisation " + m.virtualisation();
  return s;
}

bool xmit_toward_client(const NetPlan& plan, const PlanDevice& d) {
  if (!d.veth) {
    return false;
  }
  if (d.ns == Role::kServer) {
    return true;
  }
  return !d.peer.empty() && plan.device(d.peer).ns == Role::kClient;
}

ojson per_segment_json(const TraceCounts& c, std::int64_t segments, const NetPlan& plan,
                       const std::string& source, std::optional<double> untraced_acks) {
  ojson counters;
  if (c.allocations_counted) {
    counters["pskb_expand_head_calls"] = rounded(ratio(c.expand_head_allocs, segments), 5);
    counters["pskb_expand_head_alloc_bytes_per_call"] =
        rounded(per(c.expand_head_bytes, c.expand_head_allocs), 1);
    counters["skb_segment_outputs"] = rounded(ratio(c.segment_outputs, segments), 5);
  }
  counters["consume_skb_calls"] = rounded(ratio(c.consume_skb, segments), 5);
  counters["kfree_skb_calls"] = rounded(ratio(c.kfree_skb, segments), 5);
  counters["skb_copy_datagram_iovec_calls"] = rounded(ratio(c.copy_datagram_iovec, segments), 5);
  counters["skb_copy_datagram_iovec_bytes"] =
      rounded(ratio(c.copy_datagram_iovec_bytes, segments), 1);
  if (c.allocations_counted) {
    counters["sk_buff_allocs"] = rounded(ratio(c.sk_buff_allocs, segments), 5);
  }
  // In a TCP stream the server's veth end carries nothing but the receiver's ACKs.
  std::optional<double> traced_acks;
  for (const PlanDevice& d : plan.devices) {
    const auto it = c.devices.find(d.ifname);
    if (d.veth && d.ns == Role::kServer && it != c.devices.end()) {
      traced_acks = ratio(it->second.xmit_skbs, segments);
    }
  }
  // How many ACKs a segment draws depends on when the reader runs, which tracing changes (it
  // slows the sender, an unlimited stream 3-5 times): with the untraced runs' rate given, the
  // ACKs and every count of the reverse direction are that rate times the trace's count per ACK.
  double reverse_scale = 1;
  if (untraced_acks && traced_acks && *traced_acks > 0) {
    reverse_scale = *untraced_acks / *traced_acks;
  }
  if (traced_acks) {
    counters["tcp_acks_sent"] = rounded(*traced_acks * reverse_scale, 5);
  }
  ojson devices = ojson::object();
  for (const PlanDevice& d : plan.devices) {
    const auto it = c.devices.find(d.ifname);
    const bool to_client = xmit_toward_client(plan, d);
    const bool from_client = d.veth && !to_client;  // its receive side carries the ACKs
    devices[d.scenario_name] =
        device_json(it == c.devices.end() ? DeviceCounts{} : it->second, segments,
                    to_client ? reverse_scale : 1.0, from_client ? reverse_scale : 1.0);
  }
  return {{"source", source},
          {"tolerance_pct", 10},
          {"segments", segments},
          {"counters", counters},
          {"devices", devices}};
}

namespace {

ojson vulnerabilities_json(const Machine& m) {
  ojson v = ojson::object();
  for (const auto& [name, state] : m.cpu_vulnerabilities) {
    v[name] = state;
  }
  return v;
}

ojson machine_json(const Machine& m) {
  return {
      {"kernel", m.kernel},
      {"kernel_version", m.kernel_version},
      {"arch", m.arch},
      {"cpu_model", m.cpu_model},
      {"cpu_mhz", m.cpu_mhz ? ojson(rounded(*m.cpu_mhz, 3)) : ojson(nullptr)},
      {"cpus", m.cpus},
      {"clk_tck", m.clk_tck},
      {"skbuff_small_head_bytes", m.small_head_bytes ? ojson(*m.small_head_bytes) : ojson(nullptr)},
      {"virtualisation", m.virtualisation()},
      {"virtualisation_sources",
       {{"kernel_log_hypervisor", m.kernel_hypervisor},
        {"cpuid_signature", m.cpuid_signature},
        {"systemd_detect_virt_vm", m.systemd_detect_vm},
        {"systemd_detect_virt_container", m.systemd_detect_container},
        {"dmi_sys_vendor", m.dmi_vendor},
        {"dmi_product_name", m.dmi_product},
        {"cpuinfo_hypervisor_flag", m.hypervisor_flag}}},
      {"cpu_vulnerabilities", vulnerabilities_json(m)},
      {"kernel_parameters", m.kernel_parameters}};
}

ojson device_setup_json(const PlanDevice& d, const ConfigResult& r) {
  ojson e = {{"ifname", d.ifname},
             {"scenario_name", d.scenario_name},
             {"namespace", role_name(d.ns)},
             {"kind", d.veth ? "veth" : "bridge"}};
  if (!d.peer.empty()) {
    e["peer"] = d.peer;
  }
  if (!d.address.empty()) {
    e["address"] = d.address;
  }
  if (!d.master.empty()) {
    e["master"] = d.master;
  }
  const auto f = r.features.find(d.ifname);
  if (f != r.features.end()) {
    ojson eth = ojson::object();
    for (const std::string& name : recorded_ethtool_features()) {
      const auto it = f->second.find(name);
      if (it != f->second.end()) {
        eth[name] = it->second;
      }
    }
    e["ethtool"] = eth;
    e["netif_features"] = netif_features(f->second);
  }
  return e;
}

ojson setup_json(const MeasureContext& ctx, const ConfigResult& r, const NetPlan& plan) {
  ojson devs = ojson::array();
  for (const PlanDevice& d : plan.devices) {
    devs.push_back(device_setup_json(d, r));
  }
  ojson sysctls = ojson::object();
  for (const auto& [k, v] : r.sysctls) {
    sysctls[k] = v;
  }
  return {{"devices", devs},
          {"ip_forward", plan.ip_forward},
          {"server_address", plan.server_address},
          {"route_congctl", ctx.route_congestion_control},
          {"sysctls", sysctls},
          {"client_cpu", ctx.client_cpu >= 0 ? ojson(ctx.client_cpu) : ojson(nullptr)},
          {"server_cpu", ctx.server_cpu >= 0 ? ojson(ctx.server_cpu) : ojson(nullptr)}};
}

// One figure of every run, for spread().
template <typename F>
std::vector<double> each(const std::vector<RunFigures>& runs, F figure) {
  std::vector<double> out;
  out.reserve(runs.size());
  for (const RunFigures& f : runs) {
    out.push_back(figure(f));
  }
  return out;
}

// A count of every run that has it (`count` gives nullopt when a run lacks it) as the spread of
// its rate per wire segment (client TcpOutSegs) into per_seg[name] and per second into
// per_s[name]; nothing when no run has it.
template <typename F>
void add_rates(ojson& per_seg, ojson& per_s, const std::string& name,
               const std::vector<RunFigures>& runs, F count) {
  std::vector<double> seg;
  std::vector<double> sec;
  for (const RunFigures& f : runs) {
    const std::optional<double> n = count(f);
    if (!n) {
      continue;
    }
    seg.push_back(f.client_out_segs > 0 ? *n / static_cast<double>(f.client_out_segs) : 0.0);
    sec.push_back(f.wall_s > 0 ? *n / f.wall_s : 0.0);
  }
  if (!seg.empty()) {
    per_seg[name] = spread_json(seg, 6);
    per_s[name] = spread_json(sec, 1);
  }
}

std::optional<double> as_double(std::optional<std::uint64_t> n) {
  return n ? std::optional<double>(static_cast<double>(*n)) : std::nullopt;
}

// A count of CPU `cpu` in a run, for add_rates: `get(activity, cpu's activity)`, nullopt when
// the run lacks the CPU or the count.
template <typename G>
auto of_cpu(std::uint32_t cpu, G get) {
  return [cpu, get](const RunFigures& f) -> std::optional<double> {
    const auto it = f.activity.cpus.find(cpu);
    return it == f.activity.cpus.end() ? std::nullopt : as_double(get(f.activity, it->second));
  };
}

// One figure of CPU `cpu` (its busy share, a tick field) in each run that read the CPU.
std::vector<double> of_each_run(const std::vector<RunFigures>& runs, std::uint32_t cpu,
                                double CpuActivity::*field) {
  std::vector<double> v;
  for (const RunFigures& f : runs) {
    if (const auto it = f.activity.cpus.find(cpu); it != f.activity.cpus.end()) {
      v.push_back(it->second.*field);
    }
  }
  return v;
}

std::optional<std::uint64_t> interrupt_row(const CpuActivity& c, const char* row) {
  const auto it = c.interrupts.find(row);
  return it == c.interrupts.end() ? std::nullopt : std::optional<std::uint64_t>(it->second);
}

// summary.activity: the wake-up and placement counters per wire segment and per second, for the
// whole machine and per CPU.
ojson activity_summary_json(const std::vector<RunFigures>& runs) {
  using Count = std::optional<std::uint64_t>;
  ojson per_seg = ojson::object();
  ojson per_s = ojson::object();
  add_rates(per_seg, per_s, "ipis", runs, [](const RunFigures& f) {
    return as_double(f.activity.interrupts ? Count(f.activity.wakeup_ipis()) : std::nullopt);
  });
  add_rates(per_seg, per_s, "context_switches", runs,
            [](const RunFigures& f) { return as_double(f.activity.context_switches); });
  std::set<std::uint32_t> cpu_ids;
  for (const RunFigures& f : runs) {
    for (const auto& [cpu, c] : f.activity.cpus) {
      cpu_ids.insert(cpu);
    }
  }
  ojson cpus = ojson::object();
  for (std::uint32_t cpu : cpu_ids) {
    ojson cs = ojson::object();
    ojson cps = ojson::object();
    add_rates(cs, cps, "net_rx_softirqs", runs,
              of_cpu(cpu, [](const Activity& a, const CpuActivity& c) {
                return a.softirqs ? Count(c.net_rx_softirqs) : std::nullopt;
              }));
    add_rates(cs, cps, "net_tx_softirqs", runs,
              of_cpu(cpu, [](const Activity& a, const CpuActivity& c) {
                return a.softirqs ? Count(c.net_tx_softirqs) : std::nullopt;
              }));
    for (const char* row : kRecordedInterrupts) {
      add_rates(cs, cps, row, runs, of_cpu(cpu, [row](const Activity&, const CpuActivity& c) {
                  return interrupt_row(c, row);
                }));
    }
    // Each tick field's share of the wall, the runs' spread (which level the busy time was at).
    ojson ticks = ojson::object();
    for (const auto& [name, field] : kTickFields) {
      ticks[name] = spread_json(of_each_run(runs, cpu, field), 3);
    }
    cpus[std::to_string(cpu)] = {
        {"non_idle_pct", spread_json(of_each_run(runs, cpu, &CpuActivity::non_idle_pct), 3)},
                                 {"ticks_pct", ticks},
                                 {"per_segment", cs},
                                 {"per_s", cps}};
  }
  return {{"per_segment", per_seg}, {"per_s", per_s}, {"cpus", cpus}};
}

// summary.tcpext: each recorded TcpExt counter of each namespace per wire segment and per
// second, over the runs that have it ({"client": {"per_segment": {"TCPBacklogCoalesce": spread,
// ...}, "per_s": {...}}, "server": {...}}).
ojson tcpext_summary_json(const std::vector<RunFigures>& runs) {
  ojson out = ojson::object();
  for (const auto& [side, field] :
       {std::pair{"client", &RunFigures::client_tcpext}, std::pair{"server", &RunFigures::server_tcpext}}) {
    ojson per_seg = ojson::object();
    ojson per_s = ojson::object();
    for (const char* name : kRecordedTcpExt) {
      add_rates(per_seg, per_s, name, runs, [field, name](const RunFigures& f) {
        const auto it = (f.*field).find(name);
        return it == (f.*field).end() ? std::nullopt
                                      : std::optional<double>(static_cast<double>(it->second));
      });
    }
    out[side] = {{"per_segment", per_seg}, {"per_s", per_s}};
  }
  return out;
}

// The speed probe's figures of the runs that have one (wake and the lines: of those that have
// them too).
struct SpeedSeries {
  std::vector<double> alu;
  std::vector<double> sys;
  std::vector<double> wake;
  std::vector<double> hot_line;
  std::vector<double> after_sleep_line;
};

SpeedSeries speed_series(const std::vector<RunFigures>& runs) {
  SpeedSeries out;
  for (const RunFigures& f : runs) {
    if (f.speed) {
      out.alu.push_back(f.speed->alu_ns());
      out.sys.push_back(f.speed->syscall_ns());
      if (const auto w = f.speed->wake_round_trip_us()) {
        out.wake.push_back(*w);
      }
      if (f.speed->hot_line_ns() > 0 && f.speed->after_sleep_line_ns() > 0) {
        out.hot_line.push_back(f.speed->hot_line_ns());
        out.after_sleep_line.push_back(f.speed->after_sleep_line_ns());
      }
    }
  }
  return out;
}

// summary.speed: the speed probe's medians over the runs that have one (null when none has).
ojson speed_summary_json(const std::vector<RunFigures>& runs) {
  const SpeedSeries sp = speed_series(runs);
  if (sp.alu.empty()) {
    return nullptr;
  }
  return {{"alu_ns", spread_json(sp.alu, 4)},
          {"syscall_ns", spread_json(sp.sys, 1)},
          {"wake_round_trip_us", sp.wake.empty() ? ojson(nullptr) : spread_json(sp.wake, 2)},
          {"hot_line_ns", sp.hot_line.empty() ? ojson(nullptr) : spread_json(sp.hot_line, 3)},
          {"after_sleep_line_ns",
           sp.after_sleep_line.empty() ? ojson(nullptr) : spread_json(sp.after_sleep_line, 3)}};
}

// The runs' server sk_rcvbuf (RunFigures::server_rcvbuf), those that read it.
std::vector<double> server_rcvbufs(const std::vector<RunFigures>& runs) {
  std::vector<double> v;
  for (const RunFigures& f : runs) {
    if (f.server_rcvbuf) {
      v.push_back(static_cast<double>(*f.server_rcvbuf));
    }
  }
  return v;
}

ojson summary_json(const std::vector<RunFigures>& runs) {
  const std::vector<double> rcvbufs = server_rcvbufs(runs);
  return {
      {"throughput_mbps", spread_json(each(runs, [](auto& f) { return f.throughput_mbps; }), 2)},
      {"cpu_util_pct", spread_json(each(runs, [](auto& f) { return f.cpu.non_idle_pct; }), 3)},
      {"cpu_util_ticks_pct",
       spread_json(each(runs, [](auto& f) { return f.cpu.ticks_busy_pct; }), 3)},
      {"service_demand_us_per_kb",
       spread_json(each(runs, [](auto& f) { return f.service_demand_us_per_kb; }), 5)},
      {"service_demand_ticks_us_per_kb",
       spread_json(each(runs, [](auto& f) { return f.service_demand_ticks_us_per_kb; }), 5)},
      {"steal_pct", spread_json(each(runs, [](auto& f) { return f.cpu.steal_pct; }), 3)},
      {"segments_per_s", spread_json(each(runs,
                                          [](auto& f) {
                                            return f.wall_s > 0
                                                       ? static_cast<double>(f.client_out_segs) /
                                                             f.wall_s
                                                       : 0.0;
                                          }),
                                     0)},
      {"server_rcvbuf", rcvbufs.empty() ? ojson(nullptr) : spread_json(rcvbufs, 0)},
      {"activity", activity_summary_json(runs)},
      {"tcpext", tcpext_summary_json(runs)},
      {"speed", speed_summary_json(runs)}};
}

ojson counts_json(const TraceCounts& c, std::int64_t segs, const NetPlan& plan) {
  ojson raw_devs = ojson::object();
  for (const PlanDevice& d : plan.devices) {
    const auto it = c.devices.find(d.ifname);
    raw_devs[d.scenario_name] =
        raw_device_json(it == c.devices.end() ? DeviceCounts{} : it->second);
  }
  ojson caches = ojson::object();
  for (const auto& [k, v] : c.slab_cache_allocs) {
    caches[k] = v;
  }
  return {{"segments", segs},
          {"devices", raw_devs},
          {"consume_skb", c.consume_skb},
          {"kfree_skb", c.kfree_skb},
          {"skb_copy_datagram_iovec", c.copy_datagram_iovec},
          {"skb_copy_datagram_iovec_bytes", c.copy_datagram_iovec_bytes},
          {"pskb_expand_head_allocs", c.expand_head_allocs},
          {"pskb_expand_head_alloc_bytes", c.expand_head_bytes},
          {"skb_segment_outputs", c.segment_outputs},
          {"sk_buff_allocs", c.sk_buff_allocs},
          {"slab_cache_allocs", caches},
          {"distinct_alloc_stacks", c.distinct_stacks}};
}

// {"name": samples, ...} of the first `n`.
ojson samples_object(const std::vector<std::pair<std::string, std::uint64_t>>& v, std::size_t n) {
  ojson o = ojson::object();
  for (std::size_t i = 0; i < v.size() && i < n; ++i) {
    o[v[i].first] = v[i].second;
  }
  return o;
}

// The traced run's CPUs and their busy (non-idle) time.
std::map<std::uint32_t, double> cpu_busy_us(const std::optional<RunFigures>& traced) {
  std::map<std::uint32_t, double> out;
  if (traced) {
    for (const auto& [cpu, a] : traced->activity.cpus) {
      out[cpu] = a.non_idle_us;
    }
  }
  return out;
}

ProfileSummary summarize(const ProfileSamples& s, const std::map<std::uint32_t, double>& busy) {
  std::vector<std::uint32_t> cpus;
  for (const auto& [cpu, us] : busy) {
    cpus.push_back(cpu);
  }
  return summarize_profile(s, cpus);
}

// In profile_groups() order (a std::map would sort them by name).
ojson ordered_shares_json(const std::map<std::string, double>& shares) {
  ojson o = ojson::object();
  for (const ProfileGroup& g : profile_groups()) {
    const auto it = shares.find(std::string(g.name));
    if (it != shares.end()) {
      o[std::string(g.name)] = rounded(it->second, 4);
    }
  }
  return o;
}

// trace.profile (docs/measure.md, "The kernel profile"); `traced` gives the CPUs and their busy
// time.
ojson profile_json(const ProfileSamples& samples, const std::optional<RunFigures>& traced) {
  const std::map<std::uint32_t, double> busy_us = cpu_busy_us(traced);
  const ProfileSummary p = summarize(samples, busy_us);
  const double expected = p.expected_samples_per_cpu();
  const auto share = [&p](std::uint64_t n) { return rounded(p.share(n), 4); };
  ojson functions = ojson::array();
  for (std::size_t i = 0; i < p.functions.size() && i < 40; ++i) {
    const auto& [f, n] = p.functions[i];
    functions.push_back(
        {{"function", f}, {"group", profile_group(f)}, {"samples", n}, {"busy_share", share(n)}});
  }
  const std::uint64_t deferred = p.group("irqs_off_deferred");
  ojson callers = ojson::array();
  for (std::size_t i = 0; i < p.deferred_callers.size() && i < 15; ++i) {
    const auto& [f, n] = p.deferred_callers[i];
    callers.push_back(
        {{"caller", f}, {"samples", n}, {"deferred_share", rounded(per(n, deferred), 4)}});
  }
  ojson chains = ojson::array();
  for (std::size_t i = 0; i < p.chains.size() && i < 25; ++i) {
    const auto& [c, n] = p.chains[i];
    chains.push_back({{"chain", c}, {"samples", n}, {"busy_share", share(n)}});
  }
  ojson cpus = ojson::array();
  for (const auto& [cpu, c] : p.cpus) {
    const auto us = busy_us.find(cpu);
    cpus.push_back({{"cpu", cpu},
                    {"samples", c.samples},
                    {"expected_samples", rounded(expected, 0)},
                    {"sampled_share",
                     rounded(expected > 0 ? static_cast<double>(c.samples) / expected : 0, 4)},
                    {"idle_samples", c.idle},
                    {"tracing_samples", c.tracing},
                    {"user_samples", c.user},
                    {"busy_samples", c.busy},
                    {"traced_run_non_idle_us",
                     us == busy_us.end() ? ojson(nullptr) : ojson(rounded(us->second, 0))},
                    {"group_shares", ordered_shares_json(group_shares(c.groups, c.busy))}});
  }
  const std::map<std::string, double> weighted = cpu_weighted_group_shares(p, busy_us);
  return {{"hz", kProfileHz},
          {"window_s", rounded(p.window_s, 4)},
          {"samples", p.samples},
          {"expected_samples", rounded(expected * static_cast<double>(p.cpus.size()), 0)},
          {"idle_samples", p.idle},
          {"tracing_samples", p.tracing},
          {"tracer_process_samples", p.tracer_process},
          {"user_samples", p.user},
          {"busy_samples", p.busy},
          {"unrecorded_samples", p.unrecorded},
          {"group_shares", ordered_shares_json(group_shares(p.groups, p.busy))},
          {"group_shares_cpu_weighted",
           weighted.empty() ? ojson(nullptr) : ordered_shares_json(weighted)},
          {"deferred_by_irqs_off",
           {{"samples", deferred},
            {"busy_share", share(deferred)},
            {"at", samples_object(p.deferred_at, 10)},
            {"callers", callers}}},
          {"functions", functions},
          {"chains", chains},
          {"chain_samples", p.chain_samples},
          {"per_cpu", cpus},
          {"processes", samples_object(p.processes, 12)},
          {"idle_functions", samples_object(p.idle_functions, 10)},
          {"tracing_functions", samples_object(p.tracing_functions, 10)}};
}

namespace {

// trace.wake_latency: the reader's remote wake-ups, sched_waking -> sched_wakeup (mean_us) and
// -> the switch that runs it (to_running_mean_us, where recorded), by its sleep.
ojson wake_latency_json(const TraceCounts& c) {
  ojson o = ojson::object();
  for_each_wake_bucket(c, [&o](const WakeBucket& b, const WakeLatency& w) {
    o[b.key] = {{"wakeups", w.count}, {"mean_us", rounded(w.mean_us(), 2)}};
    if (w.to_running_count != 0) {
      o[b.key]["to_running_mean_us"] = rounded(w.to_running_mean_us(), 2);
    }
  });
  return o;
}

}  // namespace

ojson trace_json(const TraceOutcome& t, const NetPlan& plan) {
  ojson tr = {{"status", t.status}};
  if (!t.reason.empty()) {
    tr["reason"] = t.reason;
  }
  if (!t.missing_tracepoints.empty()) {
    tr["missing_tracepoints"] = t.missing_tracepoints;
  }
  if (!t.allocations_refused.empty()) {
    tr["allocations_refused"] = t.allocations_refused;
  }
  if (!t.slab_caches.empty()) {
    tr["slab_caches_traced"] = t.slab_caches;
  }
  if (!t.slab_merges.empty()) {
    ojson merges = ojson::object();
    for (const auto& [k, v] : t.slab_merges) {
      merges[k] = v;
    }
    tr["slab_merged"] = merges;  // "skbuff_fclone_cache" is reported under one of these names
  }
  if (t.run) {
    tr["run"] = run_json(*t.run);
  }
  if (t.alloc_run) {
    // The allocations' counts come from this run, scaled to "run"'s segments.
    tr["allocations_run"] = run_json(*t.alloc_run);
  }
  if (!t.counts || !t.run) {
    return tr;
  }
  const TraceCounts& c = *t.counts;
  const std::int64_t segs = t.run->client_out_segs;
  if (segs > 0) {
    tr["per_segment"] = per_segment_json(c, segs, plan, "the traced run");
  }
  tr["counts"] = counts_json(c, segs, plan);
  if (plan.ip_forward) {
    const auto hs = c.devices.find("skbm-hs");
    const std::uint64_t fwd = hs == c.devices.end() ? 0 : hs->second.xmit_skbs;
    tr["derived"] = {
        {"forwarded_skbs", fwd},
        {"pskb_expand_head_per_forwarded_skb", rounded(per(c.expand_head_allocs, fwd), 5)}};
  }
  tr["consume_skb_sites"] = top_sites(c.consume_skb_sites, 15);
  tr["kfree_skb_sites"] = top_sites(c.kfree_skb_sites, 15);
  ojson sites = ojson::array();
  for (std::size_t i = 0; i < c.alloc_sites.size() && i < 25; ++i) {
    const AllocSite& a = c.alloc_sites[i];
    sites.push_back({{"site", a.site},
                     {"cache", a.cache},
                     {"count", a.count},
                     {"per_segment", rounded(ratio(a.count, segs), 5)},
                     {"bytes", a.bytes}});
  }
  tr["alloc_sites"] = sites;
  if (!c.profile.empty()) {
    tr["profile"] = profile_json(c.profile, t.run);
  }
  if (const ojson w = wake_latency_json(c); !w.empty()) {
    tr["wake_latency"] = {{"source", "bpftrace: sched:sched_waking on the waker's CPU to "
                                     "sched:sched_wakeup on the reader's (mean_us), and to the "
                                     "sched:sched_switch that runs it (to_running_mean_us), "
                                     "remote wake-ups of the iperf3 server after a sleep"},
                          {"by_sleep", w}};
  }
  return tr;
}

std::string scenario_description(const MeasureContext& ctx, const ConfigResult& r) {
  const Configuration& cfg = r.config;
  std::string desc = "Measured by skbsim measure on " + machine_line(ctx.machine) +
                     ": iperf3 TCP stream client -> server, topology " +
                     std::string(topology_name(cfg.topology)) + ", veth features " +
                     std::string(variant_name(cfg.variant));
  const auto args = variant_ethtool_args(cfg.variant);
  if (args.empty()) {
    desc += " (the defaults)";
  } else {
    std::string k;
    for (const std::string& a : args) {
      k += " " + a;
    }
    desc += " (ethtool -K" + k + ")";
  }
  // What the sender's socket used (iperf3's report), else the client namespace's default.
  std::string cc = r.runs.empty() ? "" : r.runs.front().sender_congestion;
  if (const auto it = r.sysctls.find("client/net.ipv4.tcp_congestion_control");
      cc.empty() && it != r.sysctls.end()) {
    cc = it->second;
  }
  if (!cc.empty()) {
    desc += ", congestion control " + cc;
  }
  desc += ", rate " + cfg.rate_label() + "; reference = medians of " +
          std::to_string(r.runs.size()) + " runs of " + std::to_string(ctx.duration_s) + " s.";
  return desc;
}

// The number a sysctl read gave (`field`: the whole value, or one word of a triple such as
// "4096 16384 4194304"), when it is a number within lo..hi; older kernels lack some sysctls.
std::optional<long long> sysctl_number(const ConfigResult& r, const char* key, long long lo,
                                       long long hi,
                                       std::string (*field)(const std::string&) = nullptr) {
  const auto it = r.sysctls.find(key);
  if (it == r.sysctls.end()) {
    return std::nullopt;
  }
  const std::string text = field != nullptr ? field(it->second) : it->second;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    return used == text.size() && v >= lo && v <= hi ? std::optional<long long>(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The maximum of a buffer-size triple, when a size the scenario format takes.
std::optional<long long> buffer_max(const ConfigResult& r, const char* key) {
  return sysctl_number(r, key, 4096, 1LL << 30, third_field);
}

ojson flow_json(const MeasureContext& ctx, const ConfigResult& r, std::uint32_t cpus) {
  // iperf3 -l: the client's write size and the server's read size, from an O_NONBLOCK socket
  ojson flow = {
      {"from", "M/client"}, {"to", "M/server"}, {"send_size", 131072}, {"recv_size", 131072},
      {"reader", "nonblocking"}};
  if (auto w = buffer_max(r, "client/net.ipv4.tcp_wmem")) {
    flow["sndbuf"] = *w;
  }
  // The buffer: the median sk_rcvbuf the runs' streams had four fifths in, under the server
  // namespace's tcp_rmem[2] (tcp_rmem_max), when every run read it; else, as sets measured before
  // 2026-12-06 have it, tcp_rmem[2] itself, which the model then takes for both.
  const auto rm = buffer_max(r, "server/net.ipv4.tcp_rmem");
  const std::vector<double> rcvbufs = server_rcvbufs(r.runs);
  if (!r.runs.empty() && rcvbufs.size() == r.runs.size()) {
    auto buffer = static_cast<long long>(std::llround(spread(rcvbufs).median));
    buffer = std::clamp(buffer, 4096LL, rm ? std::max(*rm, 4096LL) : 1LL << 30);
    flow["rcvbuf"] = buffer;
    if (rm) {
      flow["tcp_rmem_max"] = *rm;
    }
  } else if (rm) {
    flow["rcvbuf"] = *rm;
  }
  const int mss = r.runs.empty() ? 0 : r.runs.front().mss;
  if (mss >= 88 && mss <= 65483) {
    flow["mss"] = mss;
  }
  const auto cpu = [cpus](int c) { return c >= 0 && static_cast<std::uint32_t>(c) < cpus ? c : 0; };
  flow["sender_cpu"] = cpu(ctx.client_cpu);
  flow["receiver_cpu"] = cpu(ctx.server_cpu);
  if (r.config.rate_mbps) {
    flow["rate_mbps"] = *r.config.rate_mbps;  // iperf3 -b, paced as iperf3 paces (1 ms timer)
  }
  return flow;
}

// The untraced runs' counts that depend on timing, per wire segment: IPIs, context switches and
// ACKs (the server's TcpOutSegs), medians; nullopt where no run could count them.
struct UntracedMedians {
  std::optional<double> ipis;
  std::optional<double> context_switches;
  std::optional<double> acks;
};

UntracedMedians untraced_medians(const std::vector<RunFigures>& runs) {
  std::vector<double> ipis;
  std::vector<double> cs;
  std::vector<double> acks;
  for (const RunFigures& f : runs) {
    if (f.client_out_segs <= 0) {
      continue;
    }
    acks.push_back(ratio(f.server_out_segs, f.client_out_segs));
    if (f.activity.interrupts) {
      ipis.push_back(ratio(f.activity.wakeup_ipis(), f.client_out_segs));
    }
    if (f.activity.context_switches) {
      cs.push_back(ratio(*f.activity.context_switches, f.client_out_segs));
    }
  }
  UntracedMedians w;
  if (!ipis.empty()) {
    w.ipis = spread(ipis).median;
  }
  if (!cs.empty()) {
    w.context_switches = spread(cs).median;
  }
  if (!acks.empty()) {
    w.acks = spread(acks).median;
  }
  return w;
}

}  // namespace

ojson reference_profile_groups(const ojson& profile, double service_demand_us_per_kb,
                               const std::string& source) {
  const std::uint64_t busy = profile.value("busy_samples", std::uint64_t{0});
  const ojson* shares = nullptr;
  for (const char* basis : {"group_shares_cpu_weighted", "group_shares"}) {
    if (const auto it = profile.find(basis); it != profile.end() && it->is_object()) {
      shares = &*it;
      break;
    }
  }
  if (busy == 0 || shares == nullptr) {
    return nullptr;
  }
  ojson us = ojson::object();
  for (auto it = shares->begin(); it != shares->end(); ++it) {
    us[it.key()] = rounded(it->get<double>() * service_demand_us_per_kb, 5);
  }
  return {{"source", source},
          {"tolerance_pct", 25},
          {"busy_samples", busy},
          {"us_per_kb", us}};
}

namespace {

// reference.per_segment: the traced run's counts per wire segment, with the untraced runs' wake-up
// counters and ACKs (tracing slows the stream and so changes how often the reader sleeps, and how
// often it ACKs); null when the configuration has no traced run with segments.
ojson reference_per_segment(const ConfigResult& r, const NetPlan& plan,
                            const std::string& measurement_file) {
  if (!r.trace.counts || !r.trace.run || r.trace.run->client_out_segs <= 0) {
    return nullptr;
  }
  const UntracedMedians w = untraced_medians(r.runs);
  ojson ps = per_segment_json(
      *r.trace.counts, r.trace.run->client_out_segs, plan,
      measurement_file + " /trace (tracepoints, bpftrace)" +
          (w.acks ? "; the ACKs, and the reverse direction's counts, at the untraced runs' ACK "
                    "rate (the server's TcpOutSegs per segment, median)"
                  : ""),
      w.acks);
  ojson& counters = ps["counters"];
  if (w.ipis) {
    counters["ipis"] = rounded(*w.ipis, 5);
  }
  if (w.context_switches) {
    counters["context_switches"] = rounded(*w.context_switches, 5);
  }
  return ps;
}

ojson reference_json(const MeasureContext& ctx, const ConfigResult& r, const NetPlan& plan,
                     const std::string& measurement_file) {
  ojson ref;
  ref["source"] =
      "skbsim measure: " + measurement_file + ", " + r.date + ", " + machine_line(ctx.machine);
  ref["tolerance_pct"] = 20;
  ref["host"] = "M";
  if (!r.runs.empty()) {
    ref["throughput_mbps"] =
        rounded(spread(each(r.runs, [](auto& f) { return f.throughput_mbps; })).median, 2);
    ref["cpu_util_pct"] =
        rounded(spread(each(r.runs, [](auto& f) { return f.cpu.non_idle_pct; })).median, 3);
    ref["service_demand_us_per_kb"] =
        rounded(spread(each(r.runs, [](auto& f) { return f.service_demand_us_per_kb; })).median, 5);
    // Each CPU's busy share, the median over the runs (summary.activity.cpus), when every run
    // has every CPU: where the work ran.
    ojson by_cpu = ojson::array();
    for (std::uint32_t cpu = 0; cpu < ctx.machine.cpus; ++cpu) {
      const std::vector<double> busy = of_each_run(r.runs, cpu, &CpuActivity::non_idle_pct);
      if (busy.size() == r.runs.size()) {
        by_cpu.push_back(rounded(spread(busy).median, 3));
      }
    }
    if (ctx.machine.cpus > 0 && by_cpu.size() == ctx.machine.cpus) {
      ref["cpu_busy_pct_by_cpu"] = std::move(by_cpu);
    }
  }
  if (ojson ps = reference_per_segment(r, plan, measurement_file); !ps.is_null()) {
    ref["per_segment"] = std::move(ps);
  }
  if (r.trace.counts && !r.trace.counts->profile.empty() &&
      ref.contains("service_demand_us_per_kb")) {
    const ojson profile = profile_json(r.trace.counts->profile, r.trace.run);
    const bool weighted = profile["group_shares_cpu_weighted"].is_object();
    ojson pg = reference_profile_groups(
        profile, ref["service_demand_us_per_kb"].get<double>(),
        measurement_file + " /trace/profile (bpftrace profile:hz:997): busy-time shares by group, " +
            (weighted ? "weighted by CPU time" : "by samples") + ", times the service demand");
    if (!pg.is_null()) {
      ref["profile_groups"] = std::move(pg);
    }
  }
  return ref;
}

}  // namespace

ojson measurement_json(const MeasureContext& ctx, const ConfigResult& r) {
  const Configuration& cfg = r.config;
  const NetPlan plan = plan_for(cfg.topology);
  ojson j;
  j["schema"] = 1;
  j["kind"] = "skbsim-measurement";
  j["configuration"] = {{"name", cfg.name()},
                        {"topology", topology_name(cfg.topology)},
                        {"variant", variant_name(cfg.variant)},
                        {"ethtool_K", variant_ethtool_args(cfg.variant)},
                        {"rate_mbps", cfg.rate_mbps ? ojson(*cfg.rate_mbps) : ojson(nullptr)},
                        {"duration_s", ctx.duration_s},
                        {"runs", ctx.runs},
                        {"order", ctx.order}};
  j["date"] = r.date;
  j["command"] = ctx.command;
  j["machine"] = machine_json(ctx.machine);
  ojson tools = ojson::object();
  for (const auto& [k, v] : ctx.tool_versions) {
    tools[k] = v;
  }
  j["tools"] = tools;
  j["background"] = {{"wall_s", rounded(ctx.background_wall_s, 3)},
                     {"non_idle_pct", rounded(ctx.background_non_idle_pct, 3)}};
  j["setup"] = setup_json(ctx, r, plan);
  j["speed_check"] = {{"unsteady_retries", ctx.unsteady_retries},
                      {"waited_for_normal_speed_s", rounded(r.settle_wait_s, 1)},
                      {"slack", {{"alu", kAluSlack}, {"syscall", kSyscallSlack}}},
                      {"best_before_first_run", yardstick_json(ctx.first_speed)},
                      {"best", yardstick_json(ctx.best_speed)}};
  ojson runs = ojson::array();
  for (const RunFigures& f : r.runs) {
    runs.push_back(run_json(f));
  }
  j["runs"] = runs;
  ojson set_aside = ojson::array();
  for (const RunFigures& f : r.unsteady_runs) {
    set_aside.push_back(run_json(f));
  }
  j["unsteady_runs"] = set_aside;
  j["summary"] = summary_json(r.runs);
  j["trace"] = trace_json(r.trace, plan);
  return j;
}

// The build's MAX_HEADER, from the machine's skbuff_small_head objects; none when they do not
// tell (no such cache, as before 6.3, or a size no config gives).
std::optional<ojson> kernel_config_json(const Machine& m) {
  if (!m.small_head_bytes) {
    return std::nullopt;
  }
  const auto mh = KernelModel::max_header_from_small_head(*m.small_head_bytes);
  if (!mh) {
    return std::nullopt;
  }
  return ojson{{"max_header", *mh},
               {"comment", "MAX_HEADER " + std::to_string(*mh) + ": the one build value that gives " +
                               std::to_string(*m.small_head_bytes) +
                               "-byte skbuff_small_head objects, as this kernel has"}};
}

namespace {

// 6.x: the traced run shows the sender's CPU refusing every skb the reader handed back
// (skb_attempt_defer_free): the reader copied a thousand skbs or more, not one in ten came back
// through skb_defer_free_flush, and net.core.skb_defer_max allowed it. Its count stood at or
// above the limit with an empty list, where only a raised limit lets it out (docs/measure.md,
// "A later PVM boot"); healthy, nearly every copied skb comes back.
bool deferral_refused(const ConfigResult& r) {
  if (!r.trace.counts || r.trace.counts->copy_datagram_iovec < 1000) {
    return false;
  }
  const auto dm = sysctl_number(r, "net.core.skb_defer_max", 0,
                                std::numeric_limits<std::int32_t>::max());
  if (!dm || *dm == 0) {
    return false;
  }
  const TraceCounts& c = *r.trace.counts;
  const auto it = c.consume_skb_sites.find("skb_defer_free_flush");
  const std::uint64_t flushed = it == c.consume_skb_sites.end() ? 0 : it->second;
  return flushed * 10 < c.copy_datagram_iovec;
}

}  // namespace

ojson scenario_json(const MeasureContext& ctx, const ConfigResult& r, const std::string& extends,
                    const std::string& measurement_file) {
  const NetPlan plan = plan_for(r.config.topology);
  const std::uint32_t cpus = std::max<std::uint32_t>(1, ctx.machine.cpus);
  ojson j;
  j["schema"] = 1;
  j["extends"] = extends;
  j["name"] = ctx.set_name + "-" + r.config.name();
  j["description"] = scenario_description(ctx, r);
  if (const auto kc = kernel_config_json(ctx.machine)) {
    j["kernel_config"] = *kc;
  }
  j["hosts"] = {{"M", {{"cpus", cpus}, {"cpus_counted", cpus}}}};
  if (const auto dm = sysctl_number(r, "net.core.skb_defer_max", 0,
                                     std::numeric_limits<std::int32_t>::max())) {
    j["hosts"]["M"]["skb_defer_max"] = *dm;
    if (ctx.client_cpu >= 0 && ctx.client_cpu != ctx.server_cpu &&
        static_cast<std::uint32_t>(ctx.client_cpu) < cpus && deferral_refused(r)) {
      std::vector<std::int64_t> counts(static_cast<std::size_t>(ctx.client_cpu) + 1, 0);
      counts.back() = *dm;
      j["hosts"]["M"]["defer_count"] = counts;
      j["hosts"]["M"]["comment"] =
          "CPU " + std::to_string(ctx.client_cpu) +
          "'s deferred-free count starts at the limit: the traced run's reader copied " +
          std::to_string(r.trace.counts->copy_datagram_iovec) +
          " skbs and under a tenth came back through skb_defer_free_flush (docs/measure.md, 'A "
          "later PVM boot'); the limit is the least count that refuses every skb";
    }
  }
  // 6.8+ net.ipv4.tcp_backlog_ack_defer, per namespace: the reader's ACKs come from it. On by
  // default (as in the topology's base); a server namespace that has it off says so. Kernels
  // before 6.8 lack it (absent: nothing to say).
  if (sysctl_number(r, "server/net.ipv4.tcp_backlog_ack_defer", 0, 1) == 0) {
    j["namespaces"] = {{"M/server", {{"tcp_backlog_ack_defer", false}}}};
  }
  ojson devices = ojson::object();
  for (const PlanDevice& d : plan.devices) {
    const auto f = r.features.find(d.ifname);
    if (d.veth && f != r.features.end()) {
      devices[d.scenario_name] = {{"features", netif_features(f->second)}};
    }
  }
  if (!devices.empty()) {
    j["devices"] = devices;
  }
  j["traffic"] = {{"flows", ojson::array({flow_json(ctx, r, cpus)})}};
  j["reference"] = reference_json(ctx, r, plan, measurement_file);
  return j;
}

std::string summary_header() {
  std::ostringstream s;
  s << std::left << std::setw(26) << "configuration" << std::right << std::setw(5) << "runs"
    << std::setw(11) << "Mbit/s" << std::setw(9) << "cpu%" << std::setw(9) << "ticks%"
    << std::setw(10) << "us/KB" << std::setw(9) << "MAD" << std::setw(8) << "steal%" << std::setw(6)
    << "redo" << std::setw(9) << "IPI/seg" << std::setw(9) << "cs/seg" << std::setw(8) << "alu ns"
    << std::setw(8) << "sys ns" << std::setw(8) << "line ns"
    << "  trace\n";
  return s.str();
}

std::string summary_row(const ConfigResult& r) {
  std::ostringstream s;
  s << std::left << std::setw(26) << r.config.name() << std::right << std::setw(5) << r.runs.size();
  if (r.runs.empty()) {
    s << "  (no runs)";
  } else {
    std::vector<double> tput;
    std::vector<double> cpu;
    std::vector<double> ticks;
    std::vector<double> sd;
    std::vector<double> steal;
    for (const RunFigures& f : r.runs) {
      tput.push_back(f.throughput_mbps);
      cpu.push_back(f.cpu.non_idle_pct);
      ticks.push_back(f.cpu.ticks_busy_pct);
      sd.push_back(f.service_demand_us_per_kb);
      steal.push_back(f.cpu.steal_pct);
    }
    const Spread sds = spread(sd);
    s << std::setw(11) << fixed(spread(tput).median, 1) << std::setw(9)
      << fixed(spread(cpu).median, 1) << std::setw(9) << fixed(spread(ticks).median, 1)
      << std::setw(10) << fixed(sds.median, 4) << std::setw(9) << fixed(sds.mad, 4) << std::setw(8)
      << fixed(spread(steal).median, 1);
    // runs redone because the machine ran slow; "!" when a slow one still counts
    const bool slow_kept = std::any_of(r.runs.begin(), r.runs.end(),
                                       [](const RunFigures& f) { return !f.unsteady.empty(); });
    s << std::setw(6) << (std::to_string(r.unsteady_runs.size()) + (slow_kept ? "!" : ""));
    const UntracedMedians w = untraced_medians(r.runs);
    s << std::setw(9) << (w.ipis ? fixed(*w.ipis, 4) : "-") << std::setw(9)
      << (w.context_switches ? fixed(*w.context_switches, 4) : "-");
    const SpeedSeries sp = speed_series(r.runs);
    s << std::setw(8) << (sp.alu.empty() ? "-" : fixed(spread(sp.alu).median, 3)) << std::setw(8)
      << (sp.sys.empty() ? "-" : fixed(spread(sp.sys).median, 0)) << std::setw(8)
      << (sp.after_sleep_line.empty() ? "-" : fixed(spread(sp.after_sleep_line).median, 1));
  }
  s << "  " << r.trace.status;
  if (!r.trace.reason.empty()) {
    s << " (" << r.trace.reason << ")";
  }
  s << "\n";
  return s.str();
}

namespace {

// "name 12.3%, ..." of the first `n`, shares of `of`.
std::string top_text(const std::vector<std::pair<std::string, std::uint64_t>>& v, std::size_t n,
                     std::uint64_t of) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < n; ++i) {
    s += (i == 0 ? "" : ", ") + v[i].first + " " + fixed(100 * per(v[i].second, of), 1) + "%";
  }
  return s;
}

std::string profile_summary(const ProfileSamples& samples,
                            const std::optional<RunFigures>& traced) {
  const std::map<std::uint32_t, double> busy_us = cpu_busy_us(traced);
  const ProfileSummary p = summarize(samples, busy_us);
  std::ostringstream s;
  s << "    profile: " << p.samples << " samples at " << kProfileHz << " Hz over "
    << fixed(p.window_s, 2) << " s (";
  bool first = true;
  for (const auto& [cpu, c] : p.cpus) {
    s << (first ? "" : ", ") << "CPU " << cpu << " "
      << fixed(100 * per(c.samples, static_cast<std::uint64_t>(p.expected_samples_per_cpu())), 0)
      << "%";
    first = false;
  }
  s << " of the expected): idle " << fixed(100 * per(p.idle, p.samples), 1) << "%, tracing "
    << fixed(100 * per(p.tracing, p.samples), 1) << "%, busy " << p.busy << "\n";
  s << "      busy samples: " << profile_group_line(group_shares(p.groups, p.busy)) << "\n";
  const std::map<std::string, double> weighted = cpu_weighted_group_shares(p, busy_us);
  if (!weighted.empty()) {
    s << "      by CPU time:  " << profile_group_line(weighted) << "\n";
  }
  s << "      top: " << top_text(p.functions, 6, p.busy) << "\n";
  s << "      processes: " << top_text(p.processes, 6, p.samples - p.tracer_process) << "\n";
  const std::uint64_t deferred = p.group("irqs_off_deferred");
  if (deferred > 0) {
    s << "      irqs-off deferred (" << fixed(100 * p.share(deferred), 1)
      << "% of busy samples), re-enabled under: " << top_text(p.deferred_callers, 4, deferred)
      << "\n";
  }
  return s.str();
}

}  // namespace

std::string trace_summary(const ConfigResult& r) {
  if (!r.trace.counts || !r.trace.run || r.trace.run->client_out_segs <= 0) {
    return "";
  }
  const TraceCounts& c = *r.trace.counts;
  const std::int64_t segs = r.trace.run->client_out_segs;
  const NetPlan plan = plan_for(r.config.topology);
  std::ostringstream s;
  s << "  " << r.config.name() << ", traced run: " << segs << " segments, "
    << fixed(r.trace.run->throughput_mbps, 1) << " Mbit/s";
  if (r.trace.alloc_run) {
    s << " (allocations: " << r.trace.alloc_run->client_out_segs << " segments, "
      << fixed(r.trace.alloc_run->throughput_mbps, 1) << " Mbit/s)";
  }
  s << "; per segment:\n";
  for (const PlanDevice& d : plan.devices) {
    const auto it = c.devices.find(d.ifname);
    const DeviceCounts dc = it == c.devices.end() ? DeviceCounts{} : it->second;
    s << "    " << std::left << std::setw(7) << d.scenario_name << std::right << " xmit "
      << fixed(ratio(dc.xmit_skbs, segs), 4) << " skbs (";
    bool first = true;
    for (const auto& [st, n] : dc.xmit_ip_summed) {
      s << (first ? "" : " ") << ip_summed_name(st) << " " << fixed(ratio(n, segs), 4);
      first = false;
    }
    s << "), " << fixed(per(dc.xmit_len_bytes, dc.xmit_skbs), 0) << " B/skb, linear "
      << fixed(per(dc.xmit_len_bytes - std::min(dc.xmit_len_bytes, dc.xmit_data_len_bytes),
                   dc.xmit_skbs),
               0)
      << " B; rx " << fixed(ratio(dc.rx_skbs, segs), 4) << " skbs\n";
  }
  s << "    ";
  if (c.allocations_counted) {
    s << "pskb_expand_head " << fixed(ratio(c.expand_head_allocs, segs), 4)
      << ", skb_segment outputs " << fixed(ratio(c.segment_outputs, segs), 4) << ", ";
  }
  s << "skb_copy_datagram_iovec " << fixed(ratio(c.copy_datagram_iovec, segs), 4) << " ("
    << fixed(ratio(c.copy_datagram_iovec_bytes, segs), 0) << " B)"
    << ", consume_skb " << fixed(ratio(c.consume_skb, segs), 4) << ", kfree_skb "
    << fixed(ratio(c.kfree_skb, segs), 4) << "\n";
  if (deferral_refused(r)) {
    s << "    deferred frees refused: under a tenth of the skbs the reader copied came back "
         "through skb_defer_free_flush (the sender's CPU's defer count stuck at or above "
         "net.core.skb_defer_max; docs/measure.md, \"A later PVM boot\")\n";
  }
  if (!c.wake_latency.empty()) {
    s << "    reader's wake-up latency (remote, sched_waking -> sched_wakeup):";
    for_each_wake_bucket(c, [&s](const WakeBucket& b, const WakeLatency& w) {
      s << " after " << b.label << " asleep " << fixed(w.mean_us(), 1) << " us (" << w.count << ")";
      if (w.to_running_count != 0) {
        s << ", running after " << fixed(w.to_running_mean_us(), 1) << " us";
      }
    });
    s << "\n";
  }
  if (!c.profile.empty()) {
    s << profile_summary(c.profile, r.trace.run);
  }
  return s.str();
}

namespace {

// The committed measurement's summary (its runs' medians, min and max by figure); null when the
// file is missing or unreadable.
ojson committed_summary(const std::filesystem::path& measurement) {
  try {
    std::ifstream in(measurement);
    return in ? ojson::parse(in).value("summary", ojson()) : ojson();
  } catch (const std::exception&) {
    return ojson();
  }
}

// The speed probe now against the committed measurement's (summary.speed medians): its lines, a
// line per figure, not counted in `all_within` (the context for the figures that follow), and the
// ALU step's and the lines after a sleep's differences in percent. Empty when either side has no
// probe.
struct SpeedComparison {
  std::string text;
  std::optional<double> alu_diff_pct;
  std::optional<double> after_sleep_diff_pct;
  std::optional<double> alu_ratio;  // the ALU step now over the set's (above 1: slower now)
};

// `set_summary` is the measurement file's summary (committed_summary), its "speed" the probe's
// medians.
SpeedComparison speed_comparison(const ConfigResult& r, const ojson& set_summary) {
  const ojson committed = set_summary.is_object() ? set_summary.value("speed", ojson()) : ojson();
  if (!committed.is_object()) {
    return {};
  }
  const SpeedSeries sp = speed_series(r.runs);
  std::ostringstream s;
  struct Medians {
    double was;
    double is;
  };
  // A figure's row when both sides have it; its medians, the set's and now.
  const auto row = [&](const char* key, const std::vector<double>& now) -> std::optional<Medians> {
    const ojson& c = committed.value(key, ojson());
    if (now.empty() || !c.is_object() || !c.value("median", ojson()).is_number()) {
      return std::nullopt;
    }
    const Medians m{c["median"].get<double>(), spread(now).median};
    s << std::left << std::setw(28) << r.config.name() << std::setw(26)
      << (std::string("speed probe ") + key) << std::right << std::setw(12) << fixed(m.was, 3)
      << std::setw(12) << fixed(m.is, 3) << std::setw(10) << signed_pct(diff_pct(m.is, m.was))
      << "  (context)\n";
    return m;
  };
  SpeedComparison out;
  if (const auto alu = row("alu_ns", sp.alu)) {
    out.alu_diff_pct = diff_pct(alu->is, alu->was);
    if (alu->was > 0 && alu->is > 0) {
      out.alu_ratio = alu->is / alu->was;
    }
  }
  row("wake_round_trip_us", sp.wake);
  // what a fixed rate pays after each halt (docs/measure.md, "Work after a sleep")
  if (const auto lines = row("after_sleep_line_ns", sp.after_sleep_line)) {
    out.after_sleep_diff_pct = diff_pct(lines->is, lines->was);
  }
  out.text = s.str();
  return out;
}

// A median as it would have been at the set's speed: `ratio` is the ALU step now over the set's.
// The CPU time a KB costs scales with the step, so service demand is divided by it; at a fixed
// rate so is the CPU, and unlimited (the sender's CPU saturated) the throughput is multiplied by
// it instead. No factor is fitted: docs/measure.md, "At the set's speed", holds it against the
// committed comparisons (scripts/speed-adjusted.sh).
double speed_adjusted(std::string_view figure, bool fixed_rate, double value, double ratio) {
  if (figure == "service_demand_us_per_kb" || (figure == "cpu_util_pct" && fixed_rate)) {
    return value / ratio;
  }
  if (figure == "throughput_mbps" && !fixed_rate) {
    return value * ratio;
  }
  return value;
}

// The ALU step's difference from the committed set's, across the configurations, beyond which a
// verdict says the machine ran at another speed: the probe judges each run only against the best
// it has seen in its own campaign, so a whole campaign on a host running the vCPU a fifth slower
// (or faster) passes it (docs/measure.md, "The 2.6 GHz Intel class on a later kernel build").
constexpr double kSpeedDiffPct = 10;

}  // namespace

namespace {

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    s += (i != 0 ? sep : "") + parts[i];
  }
  return s;
}

}  // namespace

std::optional<ojson> committed_machine(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir / "measurements", ec)) {
    if (e.path().extension() == ".json") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    try {
      std::ifstream in(f);
      const ojson doc = ojson::parse(in);
      if (doc.contains("machine") && doc["machine"].is_object()) {
        return doc["machine"];
      }
    } catch (const std::exception&) {
      continue;  // not a measurement file: the next one may be
    }
  }
  return std::nullopt;
}

std::vector<std::string> machine_differences(const ojson& committed, const Machine& now) {
  std::vector<std::string> d;
  // Compared without case: systemd-detect-virt says "kvm" where the kernel says "KVM" (a kernel
  // release or CPU model never differs by case alone).
  const auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return s;
  };
  const auto text = [&](const char* key, const std::string& is, const char* what) {
    const ojson& v = committed.value(key, ojson());
    const std::string was = v.is_string() ? v.get<std::string>() : "unknown";
    if (lower(was) != lower(is)) {
      d.push_back(std::string(what) + " " + was + ", now " + is);
    }
  };
  text("kernel", now.kernel, "kernel");
  text("virtualisation", now.virtualisation(), "virtualisation");
  text("cpu_model", now.cpu_model, "CPU");
  const ojson& cpus = committed.value("cpus", ojson());
  if (!cpus.is_number_unsigned() || cpus.get<std::uint32_t>() != now.cpus) {
    d.push_back("CPUs " + (cpus.is_number() ? cpus.dump() : std::string("unknown")) + ", now " +
                std::to_string(now.cpus));
  }
  const ojson& mhz = committed.value("cpu_mhz", ojson());
  if (mhz.is_number() && now.cpu_mhz &&
      std::abs(*now.cpu_mhz / mhz.get<double>() - 1.0) > 0.05) {
    d.push_back("clock " + fixed(mhz.get<double>(), 0) + " MHz, now " + fixed(*now.cpu_mhz, 0) +
                " MHz");
  }
  // Recorded since December 2026: a set without them is not held to them.
  const auto as_text = [](const ojson& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  const auto quoted = [&as_text](const ojson& v) { return "\"" + as_text(v) + "\""; };
  if (const ojson& v = committed.value("cpu_vulnerabilities", ojson()); v.is_object()) {
    const ojson is = vulnerabilities_json(now);
    std::vector<std::string> changed;
    for (const auto& [name, state] : is.items()) {
      if (!v.contains(name) || v[name] != state) {
        changed.push_back(name + " " + (v.contains(name) ? quoted(v[name]) : "unknown") + ", now " +
                          quoted(state));
      }
    }
    for (const auto& [name, state] : v.items()) {
      if (!is.contains(name)) {
        changed.push_back(name + " " + quoted(state) + ", now unknown");
      }
    }
    if (!changed.empty()) {
      d.push_back("CPU vulnerabilities: " + joined(changed, ", "));
    }
  }
  // The kernel parameters as a set: their order on the command line changes nothing.
  if (const ojson& p = committed.value("kernel_parameters", ojson()); p.is_array()) {
    std::vector<std::string> was;
    for (const ojson& w : p) {
      was.push_back(as_text(w));
    }
    std::vector<std::string> is = now.kernel_parameters;
    const auto listed = [](const std::vector<std::string>& ps) {
      return ps.empty() ? std::string("none") : joined(ps, " ");
    };
    const std::string was_text = listed(was);
    const std::string is_text = listed(is);
    std::sort(was.begin(), was.end());
    std::sort(is.begin(), is.end());
    if (was != is) {
      d.push_back("kernel parameters " + was_text + ", now " + is_text);
    }
  }
  return d;
}

std::filesystem::path resolve_compare_dir(const std::filesystem::path& dir, const Machine& now) {
  namespace fs = std::filesystem;
  if (fs::is_directory(dir / "measurements")) {
    return dir;
  }
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::is_directory(e.path() / "measurements")) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  std::vector<fs::path> matching;
  std::string listing;
  for (const fs::path& set : sets) {
    const std::optional<ojson> m = committed_machine(set);
    const std::vector<std::string> diffs =
        m ? machine_differences(*m, now) : std::vector<std::string>{"no machine description"};
    if (diffs.empty()) {
      matching.push_back(set);
    }
    listing += "\n  " + set.string() + ": " +
               (diffs.empty() ? std::string("this machine's class") : joined(diffs, "; "));
  }
  if (matching.size() == 1) {
    return matching.front();
  }
  if (sets.empty()) {
    throw std::runtime_error("no measured set in " + dir.string() +
                             " (a set is a directory with measurements/)");
  }
  throw std::runtime_error(
      std::string(matching.empty() ? "no set in " : "more than one set in ") + dir.string() +
      " was measured on this machine's class (" + machine_line(now) +
      "); name one set to compare with it anyway:" + listing);
}

namespace {

// compare_text's count of the medians at the set's speed (speed_adjusted): those with a probe on
// both sides, and what went beyond (a configuration with no committed reference included).
struct SpeedAdjustedTally {
  int compared = 0;
  int within = 0;
  std::vector<std::string> beyond;
};

// Whether the count is the verdict: asked to be (`judge`), and every one of the `compared` medians
// had a probe on both sides.
bool judged_at_set_speed(const SpeedAdjustedTally& t, std::size_t compared, bool judge) {
  return judge && t.compared > 0 && static_cast<std::size_t>(t.compared) == compared;
}

// Its lines: the verdict when judged_at_set_speed, else context (and, when `judge`, why it is not
// the verdict).
std::string at_set_speed_text(const SpeedAdjustedTally& t, std::size_t compared,
                              double tolerance_pct, bool judge) {
  const bool judged = judged_at_set_speed(t, compared, judge);
  std::ostringstream s;
  if (t.compared > 0) {
    s << (!judged            ? "at the set's speed (context): "
          : t.beyond.empty() ? "reproduced at the set's speed: "
                             : "NOT reproduced at the set's speed: ")
      << t.within << " of " << t.compared << " medians within " << fixed(tolerance_pct, 0)
      << "% with each configuration's service demand, and its CPU at a fixed rate or its "
         "throughput unlimited, scaled by its speed probe's ALU step against the set's";
    if (static_cast<std::size_t>(t.compared) < compared) {
      s << " (" << compared - static_cast<std::size_t>(t.compared)
        << " more compared as measured, without a probe on one side)";
    }
    s << (t.beyond.empty() ? "" : "; beyond: " + joined(t.beyond, ", ")) << "\n";
  }
  if (judge && !judged) {
    s << "not judged at the set's speed: "
      << (compared == 0 ? "no median was compared"
                        : "a median has no speed probe on one side (this run's or the set's "
                          "measurement file)")
      << "; the verdict is the medians as measured\n";
  }
  return s.str();
}

// The figures compare_text holds against the set's references, in the order it prints them.
constexpr std::array<const char*, 3> kCompareFigures = {"throughput_mbps", "cpu_util_pct",
                                                        "service_demand_us_per_kb"};

// What compare_text counts over the configurations.
struct CompareTally {
  std::array<std::vector<double>, kCompareFigures.size()> by_figure;  // differences, percent
  std::vector<std::string> beyond;
  int within = 0;
  int with_range = 0;             // of those beyond, how many have their committed runs' min..max
  int inside_range = 0;           // and how many lie within it
  // The speed probe's ALU step and lines after a sleep against the set's, per configuration.
  std::vector<double> alu_diffs;
  std::vector<double> after_sleep_diffs;
  // The same medians adjusted to the set's speed (speed_adjusted), for configurations with a probe
  // on both sides.
  SpeedAdjustedTally adjusted;
  // The kernel's per-segment counts against the set's (compare_counts): their rows, how many were
  // compared and held, and each configuration with a count beyond, as "<name> (<how many>)".
  std::ostringstream count_rows;
  int counts_compared = 0;
  int counts_within = 0;
  std::vector<std::string> counts_beyond;
};

// The kernel's counts per wire segment now (`now`, as reference_per_segment makes them) against the
// set's (`committed`, its reference.per_segment), by validate's rule (count_within,
// count_relative) and the set's tolerance: each validated counter and device count
// (kValidatedCounters, kValidatedDeviceCounts) that both have, a row each, but for a device's
// negligible ones (device_count_over).
void compare_counts(const std::string& name, const ojson& committed, const ojson& now,
                    CompareTally& t) {
  if (!committed.is_object() || !now.is_object()) {
    return;
  }
  // A number at o[key]; nullopt when o is no object or holds no number there.
  const auto number = [](const ojson& o, const std::string& key) -> std::optional<double> {
    const auto it = o.is_object() ? o.find(key) : o.end();
    return it != o.end() && it->is_number() ? std::optional(it->get<double>()) : std::nullopt;
  };
  // An object at o[key], else null.
  const auto object = [](const ojson& o, const std::string& key) -> const ojson& {
    static const ojson kNone;
    const auto it = o.find(key);
    return it != o.end() && it->is_object() ? *it : kNone;
  };
  const double tolerance = number(committed, "tolerance_pct").value_or(10.0);
  int beyond = 0;
  const auto row = [&](const std::string& figure, double ref, double value, bool relative) {
    const bool ok = count_within(ref, value, tolerance, relative);
    ++t.counts_compared;
    t.counts_within += ok ? 1 : 0;
    beyond += ok ? 0 : 1;
    const double d = value - ref;
    const std::string diff = !relative                ? (d >= 0 ? "+" : "") + fixed(d, 4)
                             : ref != 0 || value == 0 ? signed_pct(diff_pct(value, ref))
                                                      : "inf";
    t.count_rows << std::left << std::setw(28) << name << std::setw(34) << figure << std::right
                 << std::setw(12) << fixed(ref, 4) << std::setw(12) << fixed(value, 4)
                 << std::setw(10) << diff << "  " << (ok ? "yes" : "NO") << "\n";
  };
  const ojson& counters = object(committed, "counters");
  const ojson& now_counters = object(now, "counters");
  for (const std::string_view k : kValidatedCounters) {
    const std::string key(k);
    const auto ref = number(counters, key);
    const auto value = number(now_counters, key);
    if (ref && value) {
      row(key, *ref, *value, count_relative(key, *ref));
    }
  }
  const ojson& now_devices = object(now, "devices");
  for (const auto& [dev, counts] : object(committed, "devices").items()) {
    const ojson& now_counts = object(now_devices, dev);
    for (const std::string_view k : kValidatedDeviceCounts) {
      const std::string key(k);
      const auto ref = number(counts, key);
      const auto value = number(now_counts, key);
      const std::string over = device_count_over(key);
      const auto negligible = [&](const ojson& o) {
        return number(o, over).value_or(0) < kNegligibleDeviceCount;
      };
      if (ref && value && !(negligible(counts) && negligible(now_counts))) {
        row(dev + " " + key, *ref, *value, count_relative(key, *ref));
      }
    }
  }
  if (beyond > 0) {
    t.counts_beyond.push_back(name + " (" + std::to_string(beyond) + ")");
  }
}

// A median beyond the tolerance, against the committed runs' own range (`runs`: the measurement
// file's summary): inside it, the set's runs already spread that far (context only; the verdict
// stays the median's). "" when the file has no range for `key`.
std::string committed_range_note(const ojson& runs, const char* key, double value,
                                 CompareTally& t) {
  const ojson& f = runs.is_object() ? runs.value(key, ojson()) : ojson();
  if (!f.is_object() || !f.value("min", ojson()).is_number() ||
      !f.value("max", ojson()).is_number()) {
    return "";
  }
  const double lo = f["min"].get<double>();
  const double hi = f["max"].get<double>();
  const bool inside = value >= lo && value <= hi;
  ++t.with_range;
  t.inside_range += inside ? 1 : 0;
  return std::string(inside ? "inside" : "outside") + " the committed runs' " + fixed(lo, 4) +
         ".." + fixed(hi, 4);
}

// One configuration's rows: its speed probe against the set's, then a row per figure with a
// committed reference in DIR/<config>.json; counted into `t`.
std::string compare_configuration(const ConfigResult& r, const std::filesystem::path& dir,
                                  double tolerance_pct, CompareTally& t) {
  std::ostringstream s;
  const std::string name = r.config.name();
  const std::filesystem::path file = dir / (name + ".json");
  ojson ref;
  try {
    std::ifstream in(file);
    ref = in ? ojson::parse(in).value("reference", ojson::object()) : ojson();
  } catch (const std::exception&) {
    ref = ojson();
  }
  if (!ref.is_object() || r.runs.empty()) {
    t.beyond.push_back(name + " (no committed reference)");
    t.adjusted.beyond.push_back(name + " (no committed reference)");
    s << std::left << std::setw(28) << name << "no committed reference in " << file.string()
      << "\n";
    return s.str();
  }
  const std::array<double, kCompareFigures.size()> now = {
      spread(each(r.runs, [](auto& f) { return f.throughput_mbps; })).median,
      spread(each(r.runs, [](auto& f) { return f.cpu.non_idle_pct; })).median,
      spread(each(r.runs, [](auto& f) { return f.service_demand_us_per_kb; })).median};
  // The set's measurement file, read once: the speed probe's medians and the runs' ranges.
  const ojson runs = committed_summary(dir / "measurements" / (name + ".json"));
  const SpeedComparison speed = speed_comparison(r, runs);
  s << speed.text;
  if (speed.alu_diff_pct) {
    t.alu_diffs.push_back(*speed.alu_diff_pct);
  }
  if (speed.after_sleep_diff_pct) {
    t.after_sleep_diffs.push_back(*speed.after_sleep_diff_pct);
  }
  for (std::size_t i = 0; i < now.size(); ++i) {
    const char* key = kCompareFigures[i];
    const double value = now[i];
    if (!ref.contains(key) || !ref[key].is_number()) {
      continue;
    }
    const double committed = ref[key].get<double>();
    const double diff = diff_pct(value, committed);
    const bool ok = std::abs(diff) <= tolerance_pct;
    t.within += ok ? 1 : 0;
    t.by_figure[i].push_back(diff);
    if (speed.alu_ratio) {
      const double adjusted_diff = diff_pct(
          speed_adjusted(key, r.config.rate_mbps.has_value(), value, *speed.alu_ratio), committed);
      ++t.adjusted.compared;
      if (std::abs(adjusted_diff) <= tolerance_pct) {
        ++t.adjusted.within;
      } else {
        t.adjusted.beyond.push_back(name + " " + key + " " + signed_pct(adjusted_diff));
      }
    }
    std::string range;
    if (!ok) {
      range = committed_range_note(runs, key, value, t);
      t.beyond.push_back(name + " " + key + " " + signed_pct(diff));
    }
    s << std::left << std::setw(28) << name << std::setw(26) << key << std::right << std::setw(12)
      << fixed(committed, 4) << std::setw(12) << fixed(value, 4) << std::setw(10)
      << signed_pct(diff) << "  " << (ok ? "yes" : "NO")
      << (range.empty() ? "" : "  (" + range + ")") << "\n";
  }
  compare_counts(name, ref.value("per_segment", ojson()),
                 reference_per_segment(r, plan_for(r.config.topology), ""), t);
  return s.str();
}

}  // namespace

std::string compare_text(const std::vector<ConfigResult>& results, const std::filesystem::path& dir,
                         const Machine& machine, double tolerance_pct, bool& all_within,
                         bool judge_speed_adjusted) {
  std::ostringstream s;
  s << "\ncompared with " << dir.string() << " (medians; within " << fixed(tolerance_pct, 0)
    << "% = reproduced)\n";
  std::vector<std::string> diffs;
  if (const std::optional<ojson> m = committed_machine(dir)) {
    diffs = machine_differences(*m, machine);
  } else {
    diffs.emplace_back("the set has no machine description");
  }
  if (diffs.empty()) {
    s << "machine: the committed set's class (kernel, virtualisation, CPU, CPUs and clock agree)\n";
  } else {
    s << "machine: NOT the committed set's: " << joined(diffs, "; ") << ". A median beyond "
      << fixed(tolerance_pct, 0) << "% may say more about the machine than about the harness.\n";
  }
  s << std::left << std::setw(28) << "configuration" << std::setw(26) << "figure" << std::right
    << std::setw(12) << "committed" << std::setw(12) << "now" << std::setw(10) << "diff"
    << "  ok\n";
  CompareTally t;
  for (const ConfigResult& r : results) {
    s << compare_configuration(r, dir, tolerance_pct, t);
  }
  // Each figure's spread of differences over the configurations, then the verdict with the
  // count and what went beyond.
  std::size_t compared = 0;
  // "<what>: -1.0% to +2.0%, median +0.5% over 3 configurations<suffix>"
  const auto spread_line = [&s](const std::string& what, const std::vector<double>& d,
                                const char* suffix) {
    const auto [lo, hi] = std::minmax_element(d.begin(), d.end());
    s << what << ": " << signed_pct(*lo) << " to " << signed_pct(*hi) << ", median "
      << signed_pct(spread(d).median) << " over " << d.size() << " configuration"
      << (d.size() == 1 ? "" : "s") << suffix << "\n";
  };
  for (std::size_t i = 0; i < t.by_figure.size(); ++i) {
    if (!t.by_figure[i].empty()) {
      compared += t.by_figure[i].size();
      spread_line(kCompareFigures[i], t.by_figure[i], "");
    }
  }
  std::optional<double> alu_median;
  if (!t.alu_diffs.empty()) {
    alu_median = spread(t.alu_diffs).median;
    spread_line("speed probe alu_ns", t.alu_diffs, " (context)");
  }
  if (!t.after_sleep_diffs.empty()) {
    spread_line("speed probe after_sleep_line_ns", t.after_sleep_diffs, " (context)");
  }
  const bool adjusted_judged = judged_at_set_speed(t.adjusted, compared, judge_speed_adjusted);
  const bool raw_within = t.beyond.empty();
  all_within = adjusted_judged ? t.adjusted.beyond.empty() : raw_within;
  if (adjusted_judged) {
    s << "as measured, not the verdict (the next line is): "
      << (raw_within ? "every median within " : "beyond ");
  } else {
    s << (raw_within ? "reproduced: every median within " : "NOT reproduced: beyond ");
  }
  s << fixed(tolerance_pct, 0) << "% " << (raw_within ? "of the committed set" : "somewhere above")
    << (diffs.empty() ? "" : ", on a different machine") << " (" << t.within << " of " << compared
    << " medians within)" << (t.beyond.empty() ? "" : "; beyond: " + joined(t.beyond, ", "));
  if (t.with_range > 0) {
    s << "; of the " << t.with_range << " beyond with the committed runs' min..max, "
      << t.inside_range << " lie inside it";
  }
  if (alu_median && std::abs(*alu_median) > kSpeedDiffPct) {
    s << (raw_within ? "; " : "; and ") << "the speed probe's ALU step took "
      << signed_pct(*alu_median) << " (median) against the set's: this machine ran "
      << (*alu_median > 0 ? "slower" : "faster") << " than when the set was measured";
  }
  s << "\n" << at_set_speed_text(t.adjusted, compared, tolerance_pct, judge_speed_adjusted);
  if (t.counts_compared > 0) {
    s << "\nthe kernel's counts per segment against the set's (reference.per_segment, what skbsim "
         "validate holds the model to; context, not the verdict):\n"
      << std::left << std::setw(28) << "configuration" << std::setw(34) << "count" << std::right
      << std::setw(12) << "committed" << std::setw(12) << "now" << std::setw(10) << "diff"
      << "  ok\n"
      << t.count_rows.str() << "counts: " << t.counts_within << " of " << t.counts_compared
      << " within the set's tolerance"
      << (t.counts_beyond.empty() ? "" : "; beyond in: " + joined(t.counts_beyond, ", ")) << "\n";
  }
  return s.str();
}

bool count_within(double reference, double value, double tolerance_pct, bool relative,
                  double abs_tolerance) {
  const double diff = std::abs(value - reference);
  return relative ? diff <= tolerance_pct / 100.0 * reference : diff <= abs_tolerance;
}

bool count_relative(std::string_view key, double reference) {
  return key.ends_with("_per_skb") || reference >= 0.01;
}

std::string device_count_over(std::string_view key) {
  return key.ends_with("_per_skb") ? std::string(key.substr(0, key.find('_'))) + "_skbs"
                                   : std::string(key);
}

}  // namespace skbsim::sim::measure
