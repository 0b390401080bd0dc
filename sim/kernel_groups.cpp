#include "sim/kernel_groups.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "sim/measure_profile.hpp"
#include "sim/run.hpp"

namespace skbsim::sim {
namespace {

// Model symbols named as 2.6.20 names them whose 6.x function (the one a profile of a 6.x kernel
// samples) falls in another group: the group is that of the 6.x name.
constexpr std::array<std::pair<Sym, std::string_view>, 3> k6xName = {{
    {Sym::kSysSendto, "__sys_sendto"},      // socket_syscall, not other
    {Sym::kSysRecvfrom, "__sys_recvfrom"},  // socket_syscall, not other
    {Sym::kSkAddBacklog, "tcp_add_backlog"},  // tcp, not socket_syscall
}};

const std::array<std::string_view, kSymCount>& group_table() {
  static const std::array<std::string_view, kSymCount> table = [] {
    std::array<std::string_view, kSymCount> t{};
    for (std::size_t i = 0; i < kSymCount; ++i) {
      std::string_view name = symbol_name(static_cast<Sym>(i));
      for (const auto& [sym, now] : k6xName) {
        if (static_cast<std::size_t>(sym) == i) {
          name = now;
        }
      }
      t[i] = measure::profile_group(name);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string_view kernel_group(Sym s) { return group_table()[static_cast<std::size_t>(s)]; }

bool is_busy_group(std::string_view group) {
  if (group == "idle" || group == "tracing") {
    return false;
  }
  const auto groups = measure::profile_groups();
  return std::any_of(groups.begin(), groups.end(),
                     [group](const measure::ProfileGroup& g) { return g.name == group; });
}

bool model_has_group(std::string_view group) {
  const auto& t = group_table();
  return std::find(t.begin(), t.end(), group) != t.end();
}

std::map<std::string, double> group_us_per_kb(const HostResult& h) {
  std::map<std::string, double> out;
  if (h.busy_ps <= 0) {
    return out;
  }
  std::map<std::string_view, std::int64_t> ps;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    if (h.cells[i].cost_ps != 0) {
      ps[group_table()[i]] += h.cells[i].cost_ps;
    }
  }
  const double busy = static_cast<double>(h.busy_ps);
  for (const auto& [g, p] : ps) {
    out[std::string(g)] = static_cast<double>(p) / busy * h.service_demand_us_per_kb;
  }
  return out;
}

}  // namespace skbsim::sim
