// measure_host.cpp — /proc/stat, /proc/net/snmp, /proc/cpuinfo and run statistics.

#include "sim/measure_host.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

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

std::map<std::string, std::int64_t> parse_snmp_tcp(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> names;
  while (std::getline(in, line)) {
    if (line.rfind("Tcp:", 0) != 0) {
      continue;
    }
    std::istringstream fields(line.substr(4));
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
  throw MeasureError("/proc/net/snmp: expected the two \"Tcp:\" lines, got none");
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
