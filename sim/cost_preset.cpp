#include "sim/cost_preset.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/json_reader.hpp"
#include "sim/kernel_groups.hpp"
#include "sim/measure_profile.hpp"

namespace skbsim::sim {
namespace {

double valued(const JsonReader& r, double lo, double hi) {
  r.reject_unknown_keys({"value", "source"});
  (void)r.child("source").string();  // every number says where it comes from
  return r.child("value").number_in(lo, hi);
}

// A key that means something only beside another: unless `met`, fails at `key` with "expected
// NEEDED with "KEY" (WHY), got GOT", NEEDED naming the other key (and what it must hold).
void needs(const JsonReader& r, bool met, std::string_view needed, std::string_view key,
           std::string_view why, std::string_view got) {
  if (!met) {
    r.fail("expected " + std::string(needed) + " with \"" + std::string(key) + "\" (" +
           std::string(why) + "), got " + std::string(got));
  }
}

constexpr std::string_view kCyclesPrefix = "cycles:";
constexpr std::string_view kGroupPrefix = "group_scale:";

// A group a preset may scale: one the model has symbols in (scaling an empty group would be a
// parameter that moves nothing).
bool scalable_group(std::string_view g) { return is_busy_group(g) && model_has_group(g); }

// "user_copy, checksum, ...": the groups scalable_group() accepts, in the profile's order.
std::string scalable_groups() {
  std::string out;
  for (const measure::ProfileGroup& g : measure::profile_groups()) {
    if (scalable_group(g.name)) {
      out += (out.empty() ? "" : ", ") + std::string(g.name);
    }
  }
  return out;
}

}  // namespace

CostPreset CostPreset::load(const std::string& path, const std::string& shown_as) {
  CostPreset p;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json doc = load_json_file(path, shown_as);
  p.doc_ = nlohmann::ordered_json::parse(ss.str());
  JsonReader root(doc, shown_as);
  root.reject_unknown_keys({"schema", "name", "description", "cpu", "calls", "fit"});
  (void)root.child("schema").uint_in(1, 1);
  p.name_ = root.child("name").string();
  (void)root.string_or("description", "");
  const JsonReader cpu = root.child("cpu");
  cpu.reject_unknown_keys({"model",
                           "clock_ghz",
                           "copy_bytes_per_ns",
                           "copy_to_user_bytes_per_ns",
                           "csum_bytes_per_ns",
                           "fused_bytes_per_ns",
                           "page_ref_cycles",
                           "idle_wake_us",
                           "idle_wake_blocked_us",
                           "halt_poll_max_us",
                           "idle_wake_spread",
                           "idle_wake_blocked_spread",
                           "idle_poll_us",
                           "idle_poll_wake_us",
                           "syscall_us",
                           "ipi_send_us",
                           "ipi_send_blocked_us",
                           "idle_exit_blocked_us",
                           "idle_exit_slowdown",
                           "idle_exit_local_slowdown",
                           "idle_exit_slowdown_decay_us",
                           "idle_period_us",
                           "skb_handover_ns"});
  (void)cpu.string_or("model", "");
  p.clock_ghz_ = valued(cpu.child("clock_ghz"), 0.1, 10);
  p.copy_ = valued(cpu.child("copy_bytes_per_ns"), 0.05, 50);
  if (const auto c = cpu.optional_child("copy_to_user_bytes_per_ns")) {
    p.copy_to_user_ = valued(*c, 0.05, 50);
  }
  p.csum_ = valued(cpu.child("csum_bytes_per_ns"), 0.05, 50);
  p.fused_ = valued(cpu.child("fused_bytes_per_ns"), 0.05, 50);
  p.page_ref_cycles_ = valued(cpu.child("page_ref_cycles"), 0, 10000);
  if (const auto w = cpu.optional_child("idle_wake_us")) {
    p.idle_wake_us_ = valued(*w, 0, 10000);
  }
  const auto poll_max = cpu.optional_child("halt_poll_max_us");
  if (const auto b = cpu.optional_child("idle_wake_blocked_us")) {
    needs(*b, poll_max.has_value(), "\"halt_poll_max_us\"", "idle_wake_blocked_us",
          "a wake-up is slower only after the host's polling window", "no polling window");
  }
  if (poll_max) {
    p.halt_poll_max_us_ = valued(*poll_max, 0, 1e6);
    p.idle_wake_blocked_us_ = valued(cpu.child("idle_wake_blocked_us"), 0, 1e5);
  }
  if (const auto s = cpu.optional_child("idle_wake_spread")) {
    needs(*s, cpu.optional_child("idle_wake_us").has_value(), "\"idle_wake_us\"",
          "idle_wake_spread", "the spread of a wake-up's latency", "no latency");
    p.idle_wake_spread_ = valued(*s, 0, 2);
  }
  if (const auto s = cpu.optional_child("idle_wake_blocked_spread")) {
    needs(*s, p.idle_wake_blocked_us_ > 0, "\"idle_wake_blocked_us\" above 0",
          "idle_wake_blocked_spread",
          "the spread of a wake-up's latency after the host's polling window", "no such latency");
    p.idle_wake_blocked_spread_ = valued(*s, 0, 2);
  }
  if (const auto w = cpu.optional_child("idle_poll_us")) {
    p.idle_poll_us_ = valued(*w, 0, 1000);
  }
  if (const auto w = cpu.optional_child("idle_poll_wake_us")) {
    needs(*w, cpu.optional_child("idle_poll_us").has_value(), "\"idle_poll_us\"",
          "idle_poll_wake_us", "the latency of a wake-up that finds the CPU still polling",
          "no polling window");
    p.idle_poll_wake_us_ = valued(*w, 0, 10000);
  }
  if (const auto w = cpu.optional_child("syscall_us")) {
    p.syscall_us_ = valued(*w, 0, 1000);
  }
  if (const auto w = cpu.optional_child("ipi_send_us")) {
    p.ipi_send_us_ = valued(*w, 0, 1000);
  }
  if (const auto w = cpu.optional_child("ipi_send_blocked_us")) {
    needs(*w, p.halt_poll_max_us_ > 0, "\"halt_poll_max_us\" above 0", "ipi_send_blocked_us",
          "what an IPI to a vCPU the host blocked costs its sender", "no host polling window");
    p.ipi_send_blocked_us_ = valued(*w, 0, 1000);
  }
  if (const auto w = cpu.optional_child("idle_period_us")) {
    p.idle_period_us_ = valued(*w, 0, 1000);
  }
  if (const auto w = cpu.optional_child("skb_handover_ns")) {
    const ParamBounds b = p.bounds("skb_handover_ns");
    p.skb_handover_ns_ = valued(*w, b.lo, b.hi);
  }
  if (const auto w = cpu.optional_child("idle_exit_blocked_us")) {
    const ParamBounds b = p.bounds("idle_exit_blocked_us");
    p.idle_exit_blocked_us_ = valued(*w, b.lo, b.hi);
  }
  if (const auto w = cpu.optional_child("idle_exit_slowdown")) {
    needs(*w, p.idle_exit_blocked_us_ > 0, "\"idle_exit_blocked_us\" above 0", "idle_exit_slowdown",
          "how much slower the work after a long halt's exit runs until that exit's cost is paid",
          "no exit cost");
    p.idle_exit_slowdown_ = valued(*w, 0, 100);
  }
  if (const auto w = cpu.optional_child("idle_exit_local_slowdown")) {
    needs(*w, cpu.optional_child("idle_exit_slowdown").has_value(), "\"idle_exit_slowdown\"",
          "idle_exit_local_slowdown",
          "the slowdown after a long halt no IPI ended, beside the one after a halt an IPI ended",
          "none");
    p.idle_exit_local_slowdown_ = valued(*w, 0, 100);
  }
  if (const auto w = cpu.optional_child("idle_exit_slowdown_decay_us")) {
    needs(*w, cpu.optional_child("idle_exit_slowdown").has_value(), "\"idle_exit_slowdown\"",
          "idle_exit_slowdown_decay_us",
          "how fast the slowdown after a long halt fades as the CPU works", "no slowdown");
    p.idle_exit_slowdown_decay_us_ = valued(*w, 0, 1000);
  }
  const JsonReader calls = root.child("calls");
  calls.reject_unknown_keys({"scale", "group_scales", "default_cycles", "symbols"});
  p.call_scale_ = valued(calls.child("scale"), 0.05, 20);
  if (const auto gs = calls.optional_child("group_scales")) {
    if (!gs->node().is_object()) {
      gs->fail("expected an object of kernel-profile group -> {value, source}, got " +
               gs->node().dump());
    }
    for (auto it = gs->node().begin(); it != gs->node().end(); ++it) {
      if (!scalable_group(it.key())) {
        gs->child(it.key()).fail(
            "expected a kernel-profile group the model has symbols in (" + scalable_groups() +
            "), got \"" + it.key() + "\"");
      }
      p.group_scales_[it.key()] = valued(gs->child(it.key()), 0.05, 20);
    }
  }
  p.default_cycles_ = valued(calls.child("default_cycles"), 0, 1e6);
  const JsonReader syms = calls.child("symbols");
  if (!syms.node().is_object()) {
    syms.fail("expected an object of symbol names, got " + syms.node().dump());
  }
  for (auto it = syms.node().begin(); it != syms.node().end(); ++it) {
    const JsonReader s = syms.child(it.key());
    const auto sym = symbol_from_name(it.key());
    if (!sym) {
      s.fail("expected a kernel symbol skbsim models, got \"" + it.key() + "\"");
    }
    if (*sym == Sym::kSyscall) {
      s.fail("expected no cycles for entry_SYSCALL_64: a system call's entry and exit is "
             "\"cpu\": {\"syscall_us\"}, measured as time");
    }
    if (*sym == Sym::kIdleExit) {
      s.fail("expected no cycles for tick_nohz_idle_exit: leaving the idle loop after a long "
             "halt is \"cpu\": {\"idle_exit_blocked_us\"}, as time");
    }
    if (*sym == Sym::kScheduleIdle) {
      s.fail(
          "expected no cycles for schedule_idle: an idle period's own work outside its "
          "cpuidle state is \"cpu\": {\"idle_period_us\"}, as time");
    }
    if (*sym == Sym::kSendIpiBlocked) {
      s.fail(
          "expected no cycles for x2apic_send_IPI: an IPI to a vCPU the host blocked is "
          "\"cpu\": {\"ipi_send_blocked_us\"}, as time");
    }
    if (*sym == Sym::kSendIpi && p.ipi_send_us_ > 0) {
      s.fail("expected no cycles for smp_send_reschedule beside \"cpu\": {\"ipi_send_us\"}, "
             "which prices sending an IPI as time");
    }
    s.reject_unknown_keys({"cycles", "source"});
    (void)s.child("source").string();
    p.cycles_[*sym] = s.child("cycles").number_in(0, 1e6);
  }
  return p;
}

CostModel CostPreset::model() const {
  CostModel m;
  const double ps_per_cycle = 1000.0 / clock_ghz_;
  for (std::size_t i = 0; i < kSymCount; ++i) {
    auto it = cycles_.find(static_cast<Sym>(i));
    const double cycles = it != cycles_.end() ? it->second : default_cycles_;
    const auto g = group_scales_.find(std::string(kernel_group(static_cast<Sym>(i))));
    const double group = g != group_scales_.end() ? g->second : 1.0;
    m.call_ps[i] = std::llround(cycles * call_scale_ * group * ps_per_cycle);
  }
  m.copy_fs_per_byte = std::llround(1e6 / copy_);
  m.copy_to_user_fs_per_byte = copy_to_user_ > 0 ? std::llround(1e6 / copy_to_user_) : 0;
  m.csum_fs_per_byte = std::llround(1e6 / csum_);
  m.fused_fs_per_byte = std::llround(1e6 / fused_);
  m.page_ref_ps = std::llround(page_ref_cycles_ * call_scale_ * ps_per_cycle);
  m.idle_wake_ps = std::llround(idle_wake_us_ * 1e6);
  m.idle_wake_blocked_ps = std::llround(idle_wake_blocked_us_ * 1e6);
  m.halt_poll_max_ps = std::llround(halt_poll_max_us_ * 1e6);
  m.idle_wake_spread = idle_wake_spread_;
  m.idle_wake_blocked_spread = idle_wake_blocked_spread_;
  m.idle_poll_ps = std::llround(idle_poll_us_ * 1e6);
  m.idle_poll_wake_ps = std::llround(idle_poll_wake_us_ * 1e6);
  m.syscall_ps = std::llround(syscall_us_ * 1e6);
  m.call_ps[index(Sym::kSyscall)] = m.syscall_ps;
  if (ipi_send_us_ > 0) {
    m.call_ps[index(Sym::kSendIpi)] = std::llround(ipi_send_us_ * 1e6);
  }
  m.ipi_send_blocked_ps = std::llround(ipi_send_blocked_us_ * 1e6);
  m.call_ps[index(Sym::kSendIpiBlocked)] = m.ipi_send_blocked_ps;
  m.idle_exit_blocked_ps = std::llround(idle_exit_blocked_us_ * 1e6);
  m.idle_exit_slowdown = idle_exit_slowdown_;
  m.idle_exit_local_slowdown = idle_exit_local_slowdown_;
  m.idle_exit_slowdown_decay_ps = std::llround(idle_exit_slowdown_decay_us_ * 1e6);
  m.call_ps[index(Sym::kIdleExit)] = m.idle_exit_blocked_ps;
  m.idle_period_ps = std::llround(idle_period_us_ * 1e6);
  m.call_ps[index(Sym::kScheduleIdle)] = m.idle_period_ps;
  m.skb_handover_ps = std::llround(skb_handover_ns_ * 1e3);
  return m;
}

bool CostPreset::has_param(const std::string& param) const {
  if (param.rfind(kCyclesPrefix, 0) == 0) {
    // Not the symbols a preset prices as time (cpu.syscall_us and the like): cycles for them are
    // an error when the preset is loaded, so a fit must not write any.
    const auto sym = symbol_from_name(param.substr(kCyclesPrefix.size()));
    return sym && *sym != Sym::kSyscall && *sym != Sym::kIdleExit && *sym != Sym::kScheduleIdle &&
           *sym != Sym::kSendIpiBlocked && !(*sym == Sym::kSendIpi && ipi_send_us_ > 0);
  }
  if (param.rfind(kGroupPrefix, 0) == 0) {
    return scalable_group(param.substr(kGroupPrefix.size()));
  }
  return param == "call_scale" || param == "copy_bytes_per_ns" ||
         param == "copy_to_user_bytes_per_ns" || param == "csum_bytes_per_ns" ||
         param == "fused_bytes_per_ns" || param == "page_ref_cycles" ||
         param == "idle_exit_blocked_us" || param == "skb_handover_ns";
}

double CostPreset::get(const std::string& param) const {
  if (param == "call_scale") {
    return call_scale_;
  }
  if (param == "copy_bytes_per_ns") {
    return copy_;
  }
  if (param == "copy_to_user_bytes_per_ns") {
    return copy_to_user_ > 0 ? copy_to_user_ : copy_;
  }
  if (param == "csum_bytes_per_ns") {
    return csum_;
  }
  if (param == "fused_bytes_per_ns") {
    return fused_;
  }
  if (param == "page_ref_cycles") {
    return page_ref_cycles_;
  }
  if (param == "idle_exit_blocked_us") {
    return idle_exit_blocked_us_;
  }
  if (param == "skb_handover_ns") {
    return skb_handover_ns_;
  }
  if (param.rfind(kGroupPrefix, 0) == 0) {
    const auto it = group_scales_.find(param.substr(kGroupPrefix.size()));
    return it != group_scales_.end() ? it->second : 1.0;
  }
  const Sym s = *symbol_from_name(param.substr(kCyclesPrefix.size()));
  auto it = cycles_.find(s);
  return it != cycles_.end() ? it->second : default_cycles_;
}

void CostPreset::set(const std::string& param, double v) {
  // Writes the value back in place; a key the preset did not have gets `source` (a fit's).
  auto put = [this](const char* section, const char* key, double value,
                    const char* source = nullptr) {
    auto& e = doc_[section][key];
    e["value"] = value;
    if (source != nullptr && !e.contains("source")) {
      e["source"] = source;
    }
  };
  if (param == "call_scale") {
    call_scale_ = v;
    doc_["calls"]["scale"]["value"] = v;
  } else if (param == "copy_bytes_per_ns") {
    copy_ = v;
    put("cpu", "copy_bytes_per_ns", v);
  } else if (param == "copy_to_user_bytes_per_ns") {
    copy_to_user_ = v;
    put("cpu", "copy_to_user_bytes_per_ns", v,
        "fitted by skbsim calibrate: the reader's copy from an skb into its buffer");
  } else if (param == "csum_bytes_per_ns") {
    csum_ = v;
    put("cpu", "csum_bytes_per_ns", v);
  } else if (param == "fused_bytes_per_ns") {
    fused_ = v;
    put("cpu", "fused_bytes_per_ns", v);
  } else if (param == "page_ref_cycles") {
    page_ref_cycles_ = v;
    put("cpu", "page_ref_cycles", v);
  } else if (param == "idle_exit_blocked_us") {
    idle_exit_blocked_us_ = v;
    put("cpu", "idle_exit_blocked_us", v,
        "fitted by skbsim calibrate: the time each end of an idle period costs");
  } else if (param == "skb_handover_ns") {
    skb_handover_ns_ = v;
    put("cpu", "skb_handover_ns", v,
        "fitted by skbsim calibrate: what a CPU spends the first time it works on an skb another "
        "CPU worked on last");
  } else if (param.rfind(kGroupPrefix, 0) == 0) {
    const std::string group = param.substr(kGroupPrefix.size());
    group_scales_[group] = v;
    auto& g = doc_["calls"]["group_scales"][group];
    g["value"] = v;
    if (!g.contains("source")) {
      g["source"] = "fitted by skbsim calibrate: multiplies the cycles of the model's symbols in "
                    "the kernel-profile group \"" + group + "\"";
    }
  } else {
    const std::string name = param.substr(kCyclesPrefix.size());
    cycles_[*symbol_from_name(name)] = v;
    auto& s = doc_["calls"]["symbols"][name];
    s["cycles"] = v;
    if (!s.contains("source")) {
      s["source"] = "fitted by skbsim calibrate";
    }
  }
}

ParamBounds CostPreset::bounds(const std::string& param) const {
  if (param == "call_scale" || param.rfind(kGroupPrefix, 0) == 0) {
    return {0.05, 20};
  }
  if (param.find("bytes_per_ns") != std::string::npos) {
    return {0.05, 50};
  }
  if (param == "idle_exit_blocked_us") {
    return {0, 1000};
  }
  if (param == "skb_handover_ns") {
    return {0, 10000};  // up to 10 us: far beyond any cache line's trip between two CPUs
  }
  return {0, 1e6};
}

nlohmann::ordered_json CostPreset::to_json(const nlohmann::ordered_json& fit) const {
  nlohmann::ordered_json out = doc_;
  out["fit"] = fit;
  return out;
}

}  // namespace skbsim::sim
