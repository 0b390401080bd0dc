// measure_profile.cpp — the profile's grouping rules and its summary.

#include "sim/measure_profile.hpp"

#include <algorithm>
#include <array>
#include <iomanip>
#include <sstream>

namespace skbsim::sim::measure {
namespace {

using enum NameMatch;

constexpr std::array kGroups = {
    ProfileGroup{"idle", "idle"},
    ProfileGroup{"tracing", "tracing"},
    ProfileGroup{"irqs_off_deferred", "irqs-off"},
    ProfileGroup{"user_copy", "copy"},
    ProfileGroup{"checksum", "csum"},
    ProfileGroup{"alloc_free", "alloc"},
    ProfileGroup{"locking", "lock"},
    ProfileGroup{"tcp", "tcp"},
    ProfileGroup{"ip", "ip"},
    ProfileGroup{"device", "dev"},
    ProfileGroup{"skb", "skb"},
    ProfileGroup{"socket_syscall", "sock"},
    ProfileGroup{"sched_wakeup", "sched"},
    ProfileGroup{"irq_virt", "irq/virt"},
    ProfileGroup{"other", "other"},
    ProfileGroup{"user", "user"},
};

// First match wins, so the order matters: the idle loop and tracing first (not busy work), then
// the irq-enable points (before the locking rules would take _raw_spin_unlock_irqrestore), the
// paravirt irq thunks (before "_raw_" would take __raw_callee_save_*), copies and checksums
// before the functions that call them, allocation before device ("napi_consume_skb"), and the
// wide substring rules ("sched", "irq") last.
constexpr std::array kRules = {
    // The idle loop: the halt (PVM pvm_safe_halt_hc, native_safe_halt, xen_safe_halt), the
    // cpuidle drivers, polling idle, and the idle task's own loop.
    ProfileRule{"idle", kSubstring, "safe_halt"},
    ProfileRule{"idle", kPrefix, "default_idle"},
    ProfileRule{"idle", kPrefix, "native_halt"},
    ProfileRule{"idle", kPrefix, "acpi_idle_"},
    ProfileRule{"idle", kPrefix, "acpi_processor_ffh_cstate_enter"},
    ProfileRule{"idle", kPrefix, "cpuidle_"},
    ProfileRule{"idle", kPrefix, "__cpuidle"},
    ProfileRule{"idle", kPrefix, "mwait_idle"},
    ProfileRule{"idle", kPrefix, "intel_idle"},
    ProfileRule{"idle", kPrefix, "poll_idle"},
    ProfileRule{"idle", kPrefix, "amd_e400_idle"},
    ProfileRule{"idle", kPrefix, "io_idle"},
    ProfileRule{"idle", kPrefix, "do_idle"},
    ProfileRule{"idle", kPrefix, "cpu_idle_poll"},
    ProfileRule{"idle", kPrefix, "arch_cpu_idle"},
    ProfileRule{"idle", kPrefix, "cpu_do_idle"},  // arm64
    ProfileRule{"idle", kPrefix, "cpu_startup_entry"},
    // BPF hooks on the path itself, not tracing: TCP's sock_ops header options and the LSM's.
    ProfileRule{"tcp", kPrefix, "bpf_skops"},
    ProfileRule{"socket_syscall", kPrefix, "bpf_lsm_"},
    // Tracing: BPF programs (bpf_prog_<tag>_<probe>), helpers and maps, tracepoint and perf
    // glue, and the stack walks of kstack().
    ProfileRule{"tracing", kPrefix, "bpf_"},
    ProfileRule{"tracing", kPrefix, "__bpf_"},
    ProfileRule{"tracing", kPrefix, "___bpf_"},
    ProfileRule{"tracing", kPrefix, "htab_"},
    ProfileRule{"tracing", kPrefix, "__htab_"},
    ProfileRule{"tracing", kPrefix, "pcpu_freelist"},
    ProfileRule{"tracing", kPrefix, "__pcpu_freelist"},
    ProfileRule{"tracing", kPrefix, "array_map_"},
    ProfileRule{"tracing", kPrefix, "percpu_array_map_"},
    ProfileRule{"tracing", kPrefix, "stack_map_"},
    ProfileRule{"tracing", kPrefix, "__stack_map_"},
    ProfileRule{"tracing", kPrefix, "perf_"},
    ProfileRule{"tracing", kPrefix, "__perf_"},
    ProfileRule{"tracing", kPrefix, "get_perf_callchain"},
    ProfileRule{"tracing", kPrefix, "unwind_"},
    ProfileRule{"tracing", kPrefix, "__unwind_"},
    ProfileRule{"tracing", kPrefix, "orc_"},
    ProfileRule{"tracing", kPrefix, "__orc_"},
    ProfileRule{"tracing", kPrefix, "arch_stack_walk"},
    ProfileRule{"tracing", kPrefix, "kernel_text_address"},
    ProfileRule{"tracing", kPrefix, "__kernel_text_address"},
    ProfileRule{"tracing", kPrefix, "is_bpf_text_address"},
    ProfileRule{"tracing", kSubstring, "nofault"},  // bpf_probe_read_kernel's copies
    ProfileRule{"tracing", kSubstring, "trace"},    // perf_trace_*, trace_call_bpf, __traceiter_*
    // Where interrupts are re-enabled: the samples deferred while they were off.
    ProfileRule{"irqs_off_deferred", kSubstring, "irq_enable"},
    ProfileRule{"irqs_off_deferred", kSubstring, "irqrestore"},
    ProfileRule{"irqs_off_deferred", kSubstring, "irq_restore"},
    ProfileRule{"irqs_off_deferred", kSubstring, "restore_fl"},
    ProfileRule{"irqs_off_deferred", kSuffix, "_unlock_irq"},
    // The rest of the paravirt irq thunks (disable, save flags).
    ProfileRule{"irq_virt", kPrefix, "__raw_callee_save_"},
    ProfileRule{"irq_virt", kSubstring, "irq_disable"},
    ProfileRule{"irq_virt", kSubstring, "save_fl"},
    // Copies to and from user space (and the kernel's memcpy: pskb_expand_head's head copy lands
    // here too), with the hardened-usercopy checks.
    ProfileRule{"user_copy", kSubstring, "copy_to_iter"},
    ProfileRule{"user_copy", kSubstring, "copy_from_iter"},
    ProfileRule{"user_copy", kSubstring, "copy_user"},
    ProfileRule{"user_copy", kSubstring, "copy_to_user"},
    ProfileRule{"user_copy", kSubstring, "copy_from_user"},
    ProfileRule{"user_copy", kPrefix, "rep_movs"},
    ProfileRule{"user_copy", kSubstring, "memcpy"},
    ProfileRule{"user_copy", kSubstring, "memmove"},
    ProfileRule{"user_copy", kPrefix, "copy_page_to_iter"},
    ProfileRule{"user_copy", kPrefix, "copy_page_from_iter"},
    ProfileRule{"user_copy", kPrefix, "copy_folio_"},
    ProfileRule{"user_copy", kPrefix, "__skb_datagram_iter"},
    ProfileRule{"user_copy", kPrefix, "skb_copy_datagram"},
    ProfileRule{"user_copy", kPrefix, "skb_do_copy_data"},
    ProfileRule{"user_copy", kPrefix, "skb_copy_to_page"},
    ProfileRule{"user_copy", kPrefix, "skb_copy_bits"},
    ProfileRule{"user_copy", kSubstring, "check_object_size"},
    ProfileRule{"user_copy", kSubstring, "check_heap_object"},
    ProfileRule{"user_copy", kPrefix, "__virt_addr_valid"},
    ProfileRule{"user_copy", kPrefix, "fault_in_"},
    // Software checksums, the fused copy-and-checksum included.
    ProfileRule{"checksum", kSubstring, "csum"},
    ProfileRule{"checksum", kSubstring, "checksum"},
    // sk_buff and memory allocation, free and accounting (slab, page allocator, memcg, sk_mem).
    ProfileRule{"alloc_free", kPrefix, "kmem_cache_"},
    ProfileRule{"alloc_free", kPrefix, "__kmem_cache_"},
    ProfileRule{"alloc_free", kSubstring, "kmalloc"},
    ProfileRule{"alloc_free", kSubstring, "kfree"},
    ProfileRule{"alloc_free", kSubstring, "slab"},
    ProfileRule{"alloc_free", kSubstring, "alloc_skb"},
    ProfileRule{"alloc_free", kSubstring, "build_skb"},
    ProfileRule{"alloc_free", kSubstring, "skb_clone"},
    ProfileRule{"alloc_free", kSubstring, "consume_skb"},
    ProfileRule{"alloc_free", kPrefix, "skb_release_"},
    ProfileRule{"alloc_free", kPrefix, "skb_free"},
    ProfileRule{"alloc_free", kPrefix, "skb_attempt_defer_free"},
    ProfileRule{"alloc_free", kPrefix, "skb_defer_free"},
    ProfileRule{"alloc_free", kPrefix, "napi_skb_cache"},
    ProfileRule{"alloc_free", kSubstring, "page_frag"},
    ProfileRule{"alloc_free", kSubstring, "alloc_pages"},
    ProfileRule{"alloc_free", kSubstring, "frozen_pages"},
    ProfileRule{"alloc_free", kPrefix, "get_page_from_freelist"},
    ProfileRule{"alloc_free", kPrefix, "rmqueue"},
    ProfileRule{"alloc_free", kSubstring, "free_pages"},
    ProfileRule{"alloc_free", kPrefix, "free_unref_"},
    ProfileRule{"alloc_free", kPrefix, "free_pcppages"},
    ProfileRule{"alloc_free", kPrefix, "__folio_put"},
    ProfileRule{"alloc_free", kPrefix, "__put_page"},
    ProfileRule{"alloc_free", kSubstring, "memcg"},
    ProfileRule{"alloc_free", kSubstring, "mem_cgroup"},
    ProfileRule{"alloc_free", kPrefix, "obj_cgroup"},
    ProfileRule{"alloc_free", kPrefix, "refill_stock"},
    ProfileRule{"alloc_free", kPrefix, "page_counter"},
    ProfileRule{"alloc_free", kSubstring, "sk_mem"},
    // Locks, and what spins on them.
    ProfileRule{"locking", kSubstring, "spin_lock"},
    ProfileRule{"locking", kSubstring, "spin_unlock"},
    ProfileRule{"locking", kSubstring, "_raw_"},
    ProfileRule{"locking", kSubstring, "queued_spin"},
    ProfileRule{"locking", kSubstring, "queued_read"},
    ProfileRule{"locking", kSubstring, "queued_write"},
    ProfileRule{"locking", kSubstring, "mutex"},
    ProfileRule{"locking", kPrefix, "osq_"},
    ProfileRule{"locking", kSubstring, "rwsem"},
    // TCP, congestion control included (cubictcp_*, bbr_*).
    ProfileRule{"tcp", kSubstring, "tcp"},
    ProfileRule{"tcp", kPrefix, "bbr_"},
    // IP: routing, netfilter, neighbours, inet sockets.
    ProfileRule{"ip", kPrefix, "ip_"},
    ProfileRule{"ip", kPrefix, "__ip_"},
    ProfileRule{"ip", kPrefix, "ipv4_"},
    ProfileRule{"ip", kPrefix, "fib_"},
    ProfileRule{"ip", kPrefix, "fib4_"},
    ProfileRule{"ip", kPrefix, "__fib"},
    ProfileRule{"ip", kPrefix, "inet_"},
    ProfileRule{"ip", kPrefix, "__inet_"},
    ProfileRule{"ip", kPrefix, "nf_"},
    ProfileRule{"ip", kPrefix, "__nf_"},
    ProfileRule{"ip", kPrefix, "nft_"},
    ProfileRule{"ip", kPrefix, "ipt_"},
    ProfileRule{"ip", kPrefix, "dst_"},
    ProfileRule{"ip", kPrefix, "__dst_"},
    ProfileRule{"ip", kPrefix, "rt_"},
    ProfileRule{"ip", kPrefix, "neigh_"},
    ProfileRule{"ip", kPrefix, "__neigh_"},
    ProfileRule{"ip", kPrefix, "raw_local_deliver"},
    ProfileRule{"ip", kPrefix, "icmp_"},
    // Devices: veth, the bridge, the core's transmit and receive, GRO/GSO, qdiscs, backlog.
    ProfileRule{"device", kPrefix, "veth_"},
    ProfileRule{"device", kPrefix, "br_"},
    ProfileRule{"device", kPrefix, "__br_"},
    ProfileRule{"device", kPrefix, "dev_"},
    ProfileRule{"device", kPrefix, "__dev_"},
    ProfileRule{"device", kPrefix, "netif_"},
    ProfileRule{"device", kPrefix, "__netif_"},
    ProfileRule{"device", kPrefix, "netdev_"},
    ProfileRule{"device", kPrefix, "__netdev_"},
    ProfileRule{"device", kPrefix, "process_backlog"},
    ProfileRule{"device", kPrefix, "enqueue_to_backlog"},
    ProfileRule{"device", kPrefix, "net_rx_action"},
    ProfileRule{"device", kPrefix, "napi_"},
    ProfileRule{"device", kPrefix, "__napi_"},
    ProfileRule{"device", kSubstring, "gro_"},
    ProfileRule{"device", kSubstring, "gso"},
    ProfileRule{"device", kPrefix, "skb_segment"},
    ProfileRule{"device", kPrefix, "validate_xmit"},
    ProfileRule{"device", kPrefix, "sch_direct_xmit"},
    ProfileRule{"device", kPrefix, "qdisc_"},
    ProfileRule{"device", kPrefix, "__qdisc_"},
    ProfileRule{"device", kPrefix, "pfifo_"},
    ProfileRule{"device", kPrefix, "eth_"},
    ProfileRule{"device", kPrefix, "rps_"},
    // The other sk_buff operations: geometry, references, coalescing.
    ProfileRule{"skb", kPrefix, "__copy_skb_header"},
    ProfileRule{"skb", kPrefix, "skb_"},
    ProfileRule{"skb", kPrefix, "__skb_"},
    ProfileRule{"skb", kPrefix, "pskb_"},
    ProfileRule{"skb", kPrefix, "__pskb_"},
    // The socket layer and the system calls into it.
    ProfileRule{"socket_syscall", kPrefix, "sock_"},
    ProfileRule{"socket_syscall", kPrefix, "__sock_"},
    ProfileRule{"socket_syscall", kPrefix, "sk_"},
    ProfileRule{"socket_syscall", kPrefix, "__sk_"},
    ProfileRule{"socket_syscall", kPrefix, "sockfd_"},
    ProfileRule{"socket_syscall", kPrefix, "lock_sock"},
    ProfileRule{"socket_syscall", kPrefix, "release_sock"},
    ProfileRule{"socket_syscall", kPrefix, "__release_sock"},
    ProfileRule{"socket_syscall", kPrefix, "__sys_"},
    ProfileRule{"socket_syscall", kPrefix, "___sys_"},
    ProfileRule{"socket_syscall", kPrefix, "__x64_sys_"},
    ProfileRule{"socket_syscall", kPrefix, "__arm64_sys_"},
    ProfileRule{"socket_syscall", kPrefix, "x64_sys_call"},
    ProfileRule{"socket_syscall", kPrefix, "do_syscall"},
    ProfileRule{"socket_syscall", kPrefix, "entry_SYSCALL"},
    ProfileRule{"socket_syscall", kPrefix, "syscall_"},
    ProfileRule{"socket_syscall", kPrefix, "ksys_"},
    ProfileRule{"socket_syscall", kPrefix, "vfs_"},
    ProfileRule{"socket_syscall", kPrefix, "rw_verify_area"},
    ProfileRule{"socket_syscall", kSubstring, "fdget"},
    ProfileRule{"socket_syscall", kPrefix, "fput"},
    ProfileRule{"socket_syscall", kPrefix, "__fput"},
    ProfileRule{"socket_syscall", kPrefix, "security_"},
    ProfileRule{"socket_syscall", kPrefix, "apparmor_"},
    ProfileRule{"socket_syscall", kPrefix, "selinux_"},
    ProfileRule{"socket_syscall", kPrefix, "import_"},
    ProfileRule{"socket_syscall", kPrefix, "iov_iter_"},
    ProfileRule{"socket_syscall", kPrefix, "do_select"},
    ProfileRule{"socket_syscall", kPrefix, "do_pselect"},
    ProfileRule{"socket_syscall", kPrefix, "core_sys_select"},
    ProfileRule{"socket_syscall", kPrefix, "poll_"},
    ProfileRule{"socket_syscall", kPrefix, "__pollwait"},
    ProfileRule{"socket_syscall", kPrefix, "do_sys_poll"},
    // The scheduler and wake-ups, the IPIs they send (the wake list's function calls) included.
    ProfileRule{"sched_wakeup", kSubstring, "sched"},  // schedule, __schedule, *_sched_*
    ProfileRule{"sched_wakeup", kPrefix, "try_to_wake_up"},
    ProfileRule{"sched_wakeup", kPrefix, "ttwu"},
    ProfileRule{"sched_wakeup", kSubstring, "wake_up"},
    ProfileRule{"sched_wakeup", kSubstring, "wake_function"},
    ProfileRule{"sched_wakeup", kSubstring, "woken"},
    ProfileRule{"sched_wakeup", kPrefix, "finish_task_switch"},
    ProfileRule{"sched_wakeup", kPrefix, "prepare_task_switch"},
    ProfileRule{"sched_wakeup", kPrefix, "__switch_to"},
    ProfileRule{"sched_wakeup", kPrefix, "switch_mm"},
    ProfileRule{"sched_wakeup", kPrefix, "switch_fpu"},
    ProfileRule{"sched_wakeup", kSubstring, "enqueue"},
    ProfileRule{"sched_wakeup", kSubstring, "dequeue"},
    ProfileRule{"sched_wakeup", kPrefix, "pick_"},
    ProfileRule{"sched_wakeup", kPrefix, "put_prev"},
    ProfileRule{"sched_wakeup", kPrefix, "set_next"},
    ProfileRule{"sched_wakeup", kPrefix, "update_curr"},
    ProfileRule{"sched_wakeup", kPrefix, "update_load"},
    ProfileRule{"sched_wakeup", kPrefix, "__update_load"},
    ProfileRule{"sched_wakeup", kPrefix, "update_cfs"},
    ProfileRule{"sched_wakeup", kPrefix, "update_rq_clock"},
    ProfileRule{"sched_wakeup", kPrefix, "select_task_rq"},
    ProfileRule{"sched_wakeup", kPrefix, "select_idle"},
    ProfileRule{"sched_wakeup", kPrefix, "check_preempt"},
    ProfileRule{"sched_wakeup", kSubstring, "resched"},
    ProfileRule{"sched_wakeup", kPrefix, "psi_"},
    ProfileRule{"sched_wakeup", kPrefix, "cpuacct_"},
    ProfileRule{"sched_wakeup", kPrefix, "reweight_"},
    ProfileRule{"sched_wakeup", kPrefix, "place_entity"},
    ProfileRule{"sched_wakeup", kPrefix, "prepare_to_wait"},
    ProfileRule{"sched_wakeup", kPrefix, "finish_wait"},
    ProfileRule{"sched_wakeup", kSubstring, "balance"},
    ProfileRule{"sched_wakeup", kPrefix, "raw_spin_rq_"},
    ProfileRule{"sched_wakeup", kSubstring, "smp_call"},
    ProfileRule{"sched_wakeup", kSubstring, "call_function"},
    ProfileRule{"sched_wakeup", kSubstring, "_ipi"},
    ProfileRule{"sched_wakeup", kSubstring, "_IPI"},
    ProfileRule{"sched_wakeup", kPrefix, "llist_"},
    // Interrupts, softirq entry and exit, timers, and the hypervisor interface: paravirt
    // operations, MSRs, the local APIC, the paravirtual clock.
    ProfileRule{"irq_virt", kPrefix, "pvm_"},
    ProfileRule{"irq_virt", kPrefix, "kvm_"},
    ProfileRule{"irq_virt", kPrefix, "xen_"},
    ProfileRule{"irq_virt", kPrefix, "hv_"},
    ProfileRule{"irq_virt", kPrefix, "native_"},
    ProfileRule{"irq_virt", kSubstring, "paravirt"},
    ProfileRule{"irq_virt", kSubstring, "msr"},
    ProfileRule{"irq_virt", kSubstring, "apic"},
    ProfileRule{"irq_virt", kSubstring, "pvclock"},
    ProfileRule{"irq_virt", kSubstring, "irq"},  // irqentry_*, irq_exit_rcu, handle_softirqs
    ProfileRule{"irq_virt", kSubstring, "sysvec"},
    ProfileRule{"irq_virt", kSubstring, "interrupt"},
    ProfileRule{"irq_virt", kSubstring, "local_bh"},
    ProfileRule{"irq_virt", kSubstring, "hrtimer"},
    ProfileRule{"irq_virt", kPrefix, "tick_"},
    ProfileRule{"irq_virt", kPrefix, "clockevents"},
    ProfileRule{"irq_virt", kPrefix, "ktime_get"},
    ProfileRule{"irq_virt", kPrefix, "read_tsc"},
    ProfileRule{"irq_virt", kPrefix, "timekeeping"},
};

bool matches(const ProfileRule& r, std::string_view f) {
  switch (r.match) {
    case kPrefix:
      return f.substr(0, r.pattern.size()) == r.pattern;
    case kSuffix:
      return f.size() >= r.pattern.size() && f.substr(f.size() - r.pattern.size()) == r.pattern;
    case kSubstring:
      return f.find(r.pattern) != std::string_view::npos;
  }
  return false;
}

bool is_deferred(std::string_view f) {
  return profile_group(f) == "irqs_off_deferred";
}

// Most first, ties by name, at most `n`.
std::vector<std::pair<std::string, std::uint64_t>> ranked(
    const std::map<std::string, std::uint64_t>& m, std::size_t n = SIZE_MAX) {
  std::vector<std::pair<std::string, std::uint64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > n) {
    v.resize(n);
  }
  return v;
}

std::string chain_text(const std::vector<std::string>& frames) {
  std::string s;
  for (const std::string& f : frames) {
    s += (s.empty() ? "" : " <- ") + f;
  }
  return s;
}

}  // namespace

std::span<const ProfileGroup> profile_groups() {
  return kGroups;
}

std::span<const ProfileRule> profile_rules() {
  return kRules;
}

std::string_view profile_group(std::string_view function) {
  if (function.rfind("__pfx_", 0) == 0) {
    function.remove_prefix(6);  // the padding before a function is counted as the function
  }
  for (const ProfileRule& r : kRules) {
    if (matches(r, function)) {
      return r.group;
    }
  }
  return "other";
}

std::uint64_t ProfileSummary::group(std::string_view name) const {
  const auto it = groups.find(std::string(name));
  return it == groups.end() ? 0 : it->second;
}

ProfileSummary summarize_profile(const ProfileSamples& s,
                                 const std::vector<std::uint32_t>& online_cpus) {
  ProfileSummary p;
  if (s.last_ns > s.first_ns) {
    p.window_s = static_cast<double>(s.last_ns - s.first_ns) / 1e9;
  }
  for (std::uint32_t cpu : online_cpus) {
    p.cpus[cpu];
  }
  std::map<std::string, std::uint64_t> busy_fns;
  std::map<std::string, std::uint64_t> idle_fns;
  std::map<std::string, std::uint64_t> tracing_fns;
  std::map<std::string, std::uint64_t> deferred_at;
  for (const auto& [cpu, fns] : s.kernel) {
    ProfileSummary::Cpu& c = p.cpus[cpu];
    for (const auto& [f, n] : fns) {
      const std::string_view g = profile_group(f);
      c.samples += n;
      if (g == "idle") {
        c.idle += n;
        idle_fns[f] += n;
      } else if (g == "tracing") {
        c.tracing += n;
        tracing_fns[f] += n;
      } else {
        c.busy += n;
        c.groups[std::string(g)] += n;
        busy_fns[f] += n;
        if (g == "irqs_off_deferred") {
          deferred_at[f] += n;
        }
      }
    }
  }
  for (const auto& [cpu, n] : s.user) {
    ProfileSummary::Cpu& c = p.cpus[cpu];
    c.samples += n;
    c.user += n;
    c.busy += n;
    c.groups["user"] += n;
  }
  for (const auto& [cpu, n] : s.tracer) {
    ProfileSummary::Cpu& c = p.cpus[cpu];
    c.samples += n;
    c.tracing += n;
    p.tracer_process += n;
  }
  for (const auto& [cpu, c] : p.cpus) {
    p.samples += c.samples;
    p.idle += c.idle;
    p.tracing += c.tracing;
    p.user += c.user;
    p.busy += c.busy;
    for (const auto& [g, n] : c.groups) {
      p.groups[g] += n;
    }
  }
  std::map<std::string, std::uint64_t> chains;
  std::map<std::string, std::uint64_t> callers;
  for (const auto& [frames, n] : s.chains) {
    p.chain_samples += n;
    if (frames.empty()) {
      continue;
    }
    const std::string_view g = profile_group(frames.front());
    if (g == "idle" || g == "tracing") {
      continue;
    }
    chains[chain_text(frames)] += n;
    if (g != "irqs_off_deferred") {
      continue;
    }
    const auto caller = std::find_if(frames.begin(), frames.end(), [](const std::string& f) {
      return !is_deferred(f) && f.rfind("__raw_callee_save_", 0) != 0;
    });
    callers[caller == frames.end() ? "(beyond the chain)" : *caller] += n;
  }
  p.functions = ranked(busy_fns);
  p.idle_functions = ranked(idle_fns);
  p.tracing_functions = ranked(tracing_fns);
  p.chains = ranked(chains);
  p.deferred_at = ranked(deferred_at);
  p.deferred_callers = ranked(callers);
  p.processes = ranked(s.processes);
  std::uint64_t by_process = 0;
  for (const auto& [comm, n] : s.processes) {
    by_process += n;
  }
  const std::uint64_t recorded = p.samples - p.tracer_process;
  p.unrecorded = by_process > recorded ? by_process - recorded : 0;
  return p;
}

std::map<std::string, double> group_shares(const std::map<std::string, std::uint64_t>& groups,
                                           std::uint64_t busy) {
  std::map<std::string, double> out;
  for (const ProfileGroup& g : kGroups) {
    if (g.name == "idle" || g.name == "tracing") {
      continue;
    }
    const auto it = groups.find(std::string(g.name));
    const std::uint64_t n = it == groups.end() ? 0 : it->second;
    out[std::string(g.name)] = busy > 0 ? static_cast<double>(n) / static_cast<double>(busy) : 0.0;
  }
  return out;
}

std::map<std::string, double> cpu_weighted_group_shares(
    const ProfileSummary& p, const std::map<std::uint32_t, double>& busy_us) {
  std::map<std::string, double> out;
  double total = 0;
  for (const auto& [cpu, c] : p.cpus) {
    const auto w = busy_us.find(cpu);
    if (c.busy == 0 || w == busy_us.end() || w->second <= 0) {
      continue;
    }
    total += w->second;
    for (const auto& [g, share] : group_shares(c.groups, c.busy)) {
      out[g] += w->second * share;
    }
  }
  if (total <= 0) {
    return {};
  }
  for (auto& [g, v] : out) {
    v /= total;
  }
  return out;
}

std::string profile_group_line(const std::map<std::string, double>& shares) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  bool first = true;
  for (const ProfileGroup& g : kGroups) {
    const auto it = shares.find(std::string(g.name));
    if (it == shares.end()) {
      continue;
    }
    s << (first ? "" : " ") << g.label << " " << 100 * it->second << "%";
    first = false;
  }
  return s.str();
}

}  // namespace skbsim::sim::measure
