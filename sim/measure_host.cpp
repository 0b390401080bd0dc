// measure_host.cpp — /proc/stat, /proc/softirqs, /proc/interrupts, /proc/net/snmp, /proc/cpuinfo
// and run statistics.

#include "sim/measure_host.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "sim/measure_process.hpp"

namespace skbsim::sim::measure {
namespace {

constexpr std::array<const char*, 10> kStatFields = {
    "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"};
enum StatField : std::size_t { kUser, kNice, kSystem, kIdle, kIowait, kIrq, kSoftirq, kSteal };

double median_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) {
    return "";
  }
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

CpuTicks parse_proc_stat(const std::string& text) {
  CpuTicks t;
  bool found = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) == 0) {
      std::istringstream fields(line.substr(4));
      for (std::size_t i = 0; i < t.v.size(); ++i) {
        if (!(fields >> t.v[i])) {
          t.v[i] = 0;  // older kernels have fewer fields
          break;
        }
      }
      found = true;
    } else if (line.rfind("cpu", 0) == 0 && line.size() > 3 &&
               std::isdigit(static_cast<unsigned char>(line[3])) != 0) {
      ++t.cpus;
      std::istringstream fields(line.substr(3));
      std::uint32_t cpu = 0;
      fields >> cpu;
      auto& v = t.per_cpu[cpu];
      for (auto& x : v) {
        if (!(fields >> x)) {
          x = 0;
          break;
        }
      }
    } else if (line.rfind("ctxt ", 0) == 0) {
      std::uint64_t n = 0;
      if (std::istringstream(line.substr(5)) >> n) {
        t.ctxt = n;
      }
    }
  }
  if (!found) {
    throw MeasureError("/proc/stat: expected a \"cpu \" line, got none");
  }
  return t;
}

CpuUsage cpu_usage(const CpuTicks& before, const CpuTicks& after, double wall_s, long hz) {
  CpuUsage u;
  u.wall_s = wall_s;
  u.cpus = after.cpus;
  std::array<double, 10> d{};
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::uint64_t delta = after.v[i] >= before.v[i] ? after.v[i] - before.v[i] : 0;
    d[i] = static_cast<double>(delta);
    u.tick_deltas[kStatFields[i]] = delta;
  }
  const double us_per_tick = 1e6 / static_cast<double>(hz);
  const double all_us = static_cast<double>(u.cpus) * wall_s * 1e6;
  const double not_busy_us = (d[kIdle] + d[kIowait] + d[kSteal]) * us_per_tick;
  u.non_idle_us = std::max(0.0, all_us - not_busy_us);
  u.non_idle_pct = all_us > 0 ? 100.0 * u.non_idle_us / all_us : 0;
  const double busy_ticks = d[kUser] + d[kNice] + d[kSystem] + d[kIrq] + d[kSoftirq];
  double all_ticks = 0;
  for (std::size_t i = 0; i <= kSteal; ++i) {
    all_ticks += d[i];
  }
  u.ticks_busy_us = busy_ticks * us_per_tick;
  u.ticks_busy_pct = all_ticks > 0 ? 100.0 * busy_ticks / all_ticks : 0;
  u.steal_pct = all_ticks > 0 ? 100.0 * d[kSteal] / all_ticks : 0;
  u.iowait_pct = all_ticks > 0 ? 100.0 * d[kIowait] / all_ticks : 0;
  return u;
}

namespace {

// The header line's "CPU0 CPU1 ..." as numbers; empty when the line is not such a header.
std::vector<std::uint32_t> cpu_columns(const std::string& line) {
  std::vector<std::uint32_t> cpus;
  std::istringstream in(line);
  std::string w;
  while (in >> w) {
    if (w.size() < 4 || w.rfind("CPU", 0) != 0 ||
        w.find_first_not_of("0123456789", 3) != std::string::npos) {
      return {};
    }
    cpus.push_back(static_cast<std::uint32_t>(std::stoul(w.substr(3))));
  }
  return cpus;
}

// "LABEL: n n n description" -> label, the counts (up to `columns`), the description.
struct Row {
  std::string label;
  std::vector<std::uint64_t> counts;
  std::string description;
};

std::optional<Row> split_row(const std::string& line, std::size_t columns) {
  const auto colon = line.find(':');
  if (colon == std::string::npos) {
    return std::nullopt;
  }
  Row r;
  r.label = trim(line.substr(0, colon));
  std::istringstream in(line.substr(colon + 1));
  std::uint64_t n = 0;
  while (r.counts.size() < columns && in >> n) {
    r.counts.push_back(n);
  }
  if (r.label.empty() || r.counts.size() != columns) {
    return std::nullopt;
  }
  std::string rest;
  std::getline(in, rest);
  r.description = trim(rest);
  return r;
}

PerCpuRows parse_per_cpu_rows(const std::string& text, bool interrupts) {
  PerCpuRows out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (out.cpus.empty()) {
      out.cpus = cpu_columns(line);
      continue;
    }
    const std::optional<Row> r = split_row(line, out.cpus.size());
    if (!r) {
      continue;
    }
    out.rows[r->label] = r->counts;
    if (!interrupts) {
      continue;
    }
    // Other architectures' names for the rows x86 labels CAL, RES and LOC.
    for (const auto& [prefix, alias] :
         {std::pair{"Function call interrupts", "CAL"}, std::pair{"Rescheduling interrupts", "RES"},
          std::pair{"Local timer interrupts", "LOC"}, std::pair{"TLB shootdowns", "TLB"}}) {
      if (r->description.rfind(prefix, 0) == 0 && out.rows.count(alias) == 0) {
        out.rows[alias] = r->counts;
      }
    }
  }
  return out;
}

std::uint64_t grown(std::uint64_t before, std::uint64_t after) {
  return after >= before ? after - before : 0;
}

}  // namespace

std::uint64_t PerCpuRows::at(const std::string& row, std::uint32_t cpu) const {
  const auto r = rows.find(row);
  if (r == rows.end()) {
    return 0;
  }
  for (std::size_t i = 0; i < cpus.size() && i < r->second.size(); ++i) {
    if (cpus[i] == cpu) {
      return r->second[i];
    }
  }
  return 0;
}

PerCpuRows parse_proc_softirqs(const std::string& text) {
  return parse_per_cpu_rows(text, false);
}

PerCpuRows parse_proc_interrupts(const std::string& text) {
  return parse_per_cpu_rows(text, true);
}

std::uint64_t Activity::wakeup_ipis() const {
  std::uint64_t n = 0;
  for (const auto& [cpu, a] : cpus) {
    for (const char* row : kWakeupIpis) {
      const auto it = a.interrupts.find(row);
      n += it == a.interrupts.end() ? 0 : it->second;
    }
  }
  return n;
}

Activity activity(const ActivitySnapshot& before, const ActivitySnapshot& after, double wall_s,
                  long hz) {
  Activity a;
  if (before.stat.ctxt && after.stat.ctxt) {
    a.context_switches = grown(*before.stat.ctxt, *after.stat.ctxt);
  }
  const auto has_rows = [](const PerCpuRows& x, const PerCpuRows& y, const char* row) {
    return x.rows.count(row) != 0 && y.rows.count(row) != 0;
  };
  a.softirqs = has_rows(before.softirqs, after.softirqs, "NET_RX") &&
               has_rows(before.softirqs, after.softirqs, "NET_TX");
  for (const char* row : kWakeupIpis) {
    a.interrupts = a.interrupts || has_rows(before.interrupts, after.interrupts, row);
  }
  const double us_per_tick = 1e6 / static_cast<double>(hz);
  for (const auto& [cpu, t1] : after.stat.per_cpu) {
    const auto b = before.stat.per_cpu.find(cpu);
    if (b == before.stat.per_cpu.end()) {
      continue;  // came online during the run
    }
    const auto& t0 = b->second;
    CpuActivity c;
    const double not_busy =
        static_cast<double>(grown(t0[kIdle], t1[kIdle]) + grown(t0[kIowait], t1[kIowait]) +
                            grown(t0[kSteal], t1[kSteal])) *
        us_per_tick;
    c.non_idle_us = std::max(0.0, wall_s * 1e6 - not_busy);
    c.non_idle_pct = wall_s > 0 ? 100.0 * c.non_idle_us / (wall_s * 1e6) : 0;
    const auto tick_pct = [&](std::uint64_t ticks) {
      return wall_s > 0 ? 100.0 * static_cast<double>(ticks) * us_per_tick / (wall_s * 1e6) : 0;
    };
    c.user_pct = tick_pct(grown(t0[kUser], t1[kUser]) + grown(t0[kNice], t1[kNice]));
    c.system_pct = tick_pct(grown(t0[kSystem], t1[kSystem]));
    c.irq_pct = tick_pct(grown(t0[kIrq], t1[kIrq]));
    c.softirq_pct = tick_pct(grown(t0[kSoftirq], t1[kSoftirq]));
    if (a.softirqs) {
      c.net_rx_softirqs =
          grown(before.softirqs.at("NET_RX", cpu), after.softirqs.at("NET_RX", cpu));
      c.net_tx_softirqs =
          grown(before.softirqs.at("NET_TX", cpu), after.softirqs.at("NET_TX", cpu));
    }
    for (const char* row : kRecordedInterrupts) {
      if (has_rows(before.interrupts, after.interrupts, row)) {
        c.interrupts[row] = grown(before.interrupts.at(row, cpu), after.interrupts.at(row, cpu));
      }
    }
    a.cpus[cpu] = std::move(c);
  }
  return a;
}

namespace {

// A /proc/net/snmp or /proc/net/netstat table: the first two lines that start with `prefix`
// ("Tcp:", "TcpExt:"), names then values; nullopt when there are not two such lines that agree.
std::optional<std::map<std::string, std::int64_t>> proc_net_table(const std::string& text,
                                                                  const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> names;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) {
      continue;
    }
    std::istringstream fields(line.substr(prefix.size()));
    std::vector<std::string> words;
    std::string w;
    while (fields >> w) {
      words.push_back(w);
    }
    if (names.empty()) {
      names = words;
      continue;
    }
    if (words.size() != names.size()) {
      break;
    }
    std::map<std::string, std::int64_t> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      out[names[i]] = std::stoll(words[i]);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, std::int64_t> parse_snmp_tcp(const std::string& text) {
  auto t = proc_net_table(text, "Tcp:");
  if (!t) {
    throw MeasureError("/proc/net/snmp: expected the two \"Tcp:\" lines, got none");
  }
  return *t;
}

std::map<std::string, std::int64_t> parse_netstat_tcpext(const std::string& text) {
  return proc_net_table(text, "TcpExt:").value_or(std::map<std::string, std::int64_t>{});
}

std::optional<std::int64_t> parse_ss_rcvbuf(const std::string& text) {
  // The decimal number right after `key`; nullopt without one.
  const auto number_after = [](std::string_view line,
                               std::string_view key) -> std::optional<std::int64_t> {
    const std::size_t at = line.find(key);
    if (at == std::string_view::npos) {
      return std::nullopt;
    }
    const std::string_view digits = line.substr(at + key.size());
    std::int64_t v = 0;
    const std::from_chars_result r =
        std::from_chars(digits.data(), digits.data() + digits.size(), v);
    return r.ec == std::errc() ? std::optional<std::int64_t>(v) : std::nullopt;
  };
  std::optional<std::int64_t> best_bytes;
  std::optional<std::int64_t> rcvbuf;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t skmem = line.find("skmem:(");
    if (skmem == std::string::npos) {
      continue;
    }
    const auto rb = number_after(std::string_view(line).substr(skmem), ",rb");
    const auto bytes = number_after(line, " bytes_received:");
    if (rb && bytes && (!best_bytes || *bytes > *best_bytes)) {
      best_bytes = bytes;
      rcvbuf = rb;
    }
  }
  return rcvbuf;
}

Spread spread(std::vector<double> values) {
  Spread s;
  s.n = values.size();
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  s.median = median_of(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double v : values) {
    dev.push_back(std::abs(v - s.median));
  }
  s.mad = median_of(dev);
  return s;
}

std::string Machine::virtualisation() const {
  std::string vm;
  if (!kernel_hypervisor.empty()) {
    vm = kernel_hypervisor;
  } else if (!cpuid_signature.empty()) {
    vm = hypervisor_from_cpuid_signature(cpuid_signature);
  } else if (!systemd_detect_vm.empty() && systemd_detect_vm != "none") {
    vm = systemd_detect_vm;
  } else if (!dmi_vendor.empty() && (dmi_vendor.find("QEMU") != std::string::npos ||
                                     dmi_vendor.find("VMware") != std::string::npos ||
                                     dmi_vendor.find("Xen") != std::string::npos ||
                                     dmi_vendor.find("Microsoft") != std::string::npos ||
                                     dmi_vendor.find("Amazon") != std::string::npos ||
                                     dmi_vendor.find("Google") != std::string::npos)) {
    vm = dmi_vendor;
  } else {
    vm = hypervisor_flag ? "hypervisor" : "none";
  }
  if (!systemd_detect_container.empty() && systemd_detect_container != "none") {
    vm += "+" + systemd_detect_container;
  }
  return vm;
}

std::string hypervisor_from_kernel_log(const std::string& text) {
  const std::string key = "Hypervisor detected: ";
  const auto at = text.find(key);
  if (at == std::string::npos) {
    return "";
  }
  const auto b = at + key.size();
  return trim(text.substr(b, text.find('\n', b) - b));
}

std::string hypervisor_from_cpuid_signature(const std::string& signature) {
  static const std::map<std::string, std::string, std::less<>> kKnown = {
      {"KVMKVMKVM", "KVM"},       {"Microsoft Hv", "Microsoft Hyper-V"},
      {"VMwareVMware", "VMware"}, {"XenVMMXenVMM", "Xen HVM"},
      {"Jailhouse", "Jailhouse"}, {"ACRNACRNACRN", "ACRN"}};
  const std::string sig = trim(signature.substr(0, signature.find('\0')));
  const auto it = kKnown.find(sig);
  return it != kKnown.end() ? it->second : sig;
}

std::string read_cpuid_signature() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0;
  unsigned b = 0;
  unsigned c = 0;
  unsigned d = 0;
  __cpuid(1, a, b, c, d);
  if ((c & (1U << 31)) == 0) {  // CPUID.1:ECX.HYPERVISOR
    return "";
  }
  const auto signature_at = [&](unsigned leaf) {
    __cpuid(leaf, a, b, c, d);
    std::array<char, 12> sig{};
    std::memcpy(sig.data(), &b, 4);
    std::memcpy(sig.data() + 4, &c, 4);
    std::memcpy(sig.data() + 8, &d, 4);
    const std::string s(sig.data(), sig.size());
    return s.substr(0, s.find('\0'));
  };
  // KVM may sit above another hypervisor's leaves (Hyper-V enlightenments put "Microsoft Hv" at
  // 0x40000000): the kernel's kvm_cpuid_base() looks every 0x100 up to 0x40010000, and its KVM
  // detection outranks the others when found.
  for (unsigned leaf = 0x40000000; leaf < 0x40010000; leaf += 0x100) {
    if (signature_at(leaf) == "KVMKVMKVM") {
      return "KVMKVMKVM";
    }
  }
  return signature_at(0x40000000);
#else
  return "";
#endif
}

std::vector<std::string> kernel_parameters_of_note(const std::string& cmdline) {
  // Names (before any '=', '-' read as '_' as the kernel reads them) that are one of these, or
  // start with one ending in '.'.
  // clang-format off
  static constexpr auto kNoted = std::to_array<std::string_view>({
      "mitigations", "nopti", "pti", "nospectre_v1", "nospectre_v2", "spectre_v2",
      "spectre_v2_user", "spectre_bhi", "spec_store_bypass_disable", "nospec_store_bypass_disable",
      "retbleed", "spec_rstack_overflow", "mds", "tsx", "tsx_async_abort", "l1tf",
      "mmio_stale_data", "srbds", "gather_data_sampling", "reg_file_data_sampling",
      "indirect_target_selection", "tsa", "vmscape", "nosmt", "init_on_alloc", "init_on_free",
      "idle", "cpuidle.", "cpuidle_haltpoll.", "haltpoll.", "processor.max_cstate", "intel_idle.",
      "nohz", "nohz_full", "isolcpus", "rcu_nocbs", "preempt", "threadirqs", "tsc",
      "clocksource"});
  // clang-format on
  // Words split at spaces outside double quotes (a value may be quoted: foo="a b").
  std::vector<std::string> words;
  std::string word;
  bool quoted = false;
  for (const char c : cmdline) {
    if (c == '"') {
      quoted = !quoted;
    }
    if (!quoted && (c == ' ' || c == '\t' || c == '\n')) {
      if (!word.empty()) {
        words.push_back(std::exchange(word, {}));
      }
      continue;
    }
    word += c;
  }
  if (!word.empty()) {
    words.push_back(word);
  }
  std::vector<std::string> out;
  for (const std::string& w : words) {
    if (w == "--") {
      break;  // what follows is init's
    }
    std::string name = w.substr(0, w.find('='));
    std::replace(name.begin(), name.end(), '-', '_');
    const bool noted = std::any_of(kNoted.begin(), kNoted.end(), [&name](std::string_view k) {
      return k.back() == '.' ? name.starts_with(k) : name == k;
    });
    if (noted) {
      out.push_back(w);
    }
  }
  return out;
}

void parse_cpuinfo(const std::string& text, Machine& m) {
  std::istringstream in(text);
  std::string line;
  bool model = false;
  bool mhz = false;
  bool flags = false;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "model name" && !model) {
      m.cpu_model = value;
      model = true;
    } else if (key == "cpu MHz" && !mhz) {
      try {
        m.cpu_mhz = std::stod(value);
      } catch (const std::exception&) {
      }
      mhz = true;
    } else if (key == "flags" && !flags) {
      std::istringstream f(value);
      std::string w;
      while (f >> w) {
        m.hypervisor_flag = m.hypervisor_flag || w == "hypervisor";
      }
      flags = true;
    }
  }
}

}  // namespace skbsim::sim::measure
