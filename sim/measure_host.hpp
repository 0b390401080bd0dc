#pragma once
// measure_host.hpp — what `skbsim measure` reads from the machine itself: the description that
// goes into every measurement file (kernel, CPU, clock, CPU count, virtualisation), CPU time from
// /proc/stat, TCP counters from /proc/net/snmp, the per-CPU wake-up and placement counters
// (/proc/stat per CPU and ctxt, /proc/softirqs, /proc/interrupts), and the statistics of repeated
// runs.
//
// CPU time, two ways (docs/measure.md says why both):
//   non-idle:  CPUs × wall − idle − iowait − steal, with wall from CLOCK_MONOTONIC. On a
//              tickless kernel idle and iowait are measured at idle entry and exit, so this is
//              exact up to /proc/stat's 1/USER_HZ resolution.
//   ticks:     user + nice + system + irq + softirq, the fields the scheduler tick samples; on a
//              virtual machine at low load they can be far off.
// Pure functions on text, so the tests feed them fixtures.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skbsim::sim::measure {

// The aggregate "cpu" line of /proc/stat, in USER_HZ ticks: user nice system idle iowait irq
// softirq steal guest guest_nice (guest time is already inside user and nice).
struct CpuTicks {
  std::array<std::uint64_t, 10> v{};
  std::uint32_t cpus = 0;                                          // the "cpuN" lines
  std::map<std::uint32_t, std::array<std::uint64_t, 10>> per_cpu;  // "cpuN" -> its fields
  std::optional<std::uint64_t> ctxt;  // "ctxt": context switches since boot, all CPUs
};
// Throws MeasureError when the text has no "cpu " line.
CpuTicks parse_proc_stat(const std::string& text);

struct CpuUsage {
  double wall_s = 0;
  std::uint32_t cpus = 0;
  double non_idle_us = 0;     // cpus × wall − idle − iowait − steal
  double non_idle_pct = 0;    // non_idle_us / (cpus × wall)
  double ticks_busy_us = 0;   // (user + nice + system + irq + softirq) ticks as time
  double ticks_busy_pct = 0;  // the same over all ticks counted
  double steal_pct = 0;       // steal ticks over all ticks counted
  double iowait_pct = 0;
  std::map<std::string, std::uint64_t> tick_deltas;  // per field
};
// `hz` is sysconf(_SC_CLK_TCK).
CpuUsage cpu_usage(const CpuTicks& before, const CpuTicks& after, double wall_s, long hz);

// Rows of per-CPU counters, /proc/softirqs or /proc/interrupts: label -> one count per column.
struct PerCpuRows {
  std::vector<std::uint32_t> cpus;                         // the header's CPUn, column order
  std::map<std::string, std::vector<std::uint64_t>> rows;  // "NET_RX" -> a count per column
  // The count of `row` on CPU `cpu`; 0 when either is absent.
  std::uint64_t at(const std::string& row, std::uint32_t cpu) const;
};
// /proc/softirqs ("NET_RX:  6489162  5869776"). Text without a CPU header gives no rows.
PerCpuRows parse_proc_softirqs(const std::string& text);
// /proc/interrupts: every row by its label ("24", "LOC", "CAL"); a row with fewer counts than
// CPUs (x86's "ERR: 0") is skipped. The IPI rows are also filed under x86's labels when another
// architecture names them differently, by their description (arm64 "IPI0: ... Rescheduling
// interrupts" -> "RES", "Function call interrupts" -> "CAL"), so that "CAL" and "RES" mean the
// same everywhere; "LOC" (local timer) likewise.
PerCpuRows parse_proc_interrupts(const std::string& text);

// The /proc/interrupts rows a run records per CPU, when present: function-call IPIs (CAL; 6.x
// remote wake-ups go through the wake list and send these), rescheduling IPIs (RES), TLB
// shootdowns (TLB) and local timer interrupts (LOC).
inline constexpr std::array<const char*, 4> kRecordedInterrupts = {"CAL", "RES", "TLB", "LOC"};
// The rows counted as the IPIs of a wake-up: CAL + RES.
inline constexpr std::array<const char*, 2> kWakeupIpis = {"CAL", "RES"};

// What the machine's counters say at one instant (empty rows when a file could not be read).
struct ActivitySnapshot {
  CpuTicks stat;
  PerCpuRows softirqs;
  PerCpuRows interrupts;
};

// One CPU over a run.
struct CpuActivity {
  double non_idle_us = 0;   // wall − its idle − iowait − steal (never below 0)
  double non_idle_pct = 0;  // of wall
  // The tick-sampled fields as % of wall: where the busy time went by level. Ticks, so coarse at
  // low load on a VM (see CpuUsage); at a saturated CPU they split non_idle_pct.
  double user_pct = 0;     // user + nice
  double system_pct = 0;   // system: process context in the kernel (system calls, release_sock)
  double irq_pct = 0;      // hard interrupts
  double softirq_pct = 0;  // softirqs, NET_RX's included
  std::uint64_t net_rx_softirqs = 0;
  std::uint64_t net_tx_softirqs = 0;
  std::map<std::string, std::uint64_t> interrupts;  // kRecordedInterrupts that exist
};

// The wake-up and placement counters of a run: deltas between two snapshots.
struct Activity {
  std::map<std::uint32_t, CpuActivity> cpus;
  std::optional<std::uint64_t> context_switches;  // ctxt delta; nullopt when /proc/stat lacks it
  bool softirqs = false;                          // /proc/softirqs had NET_RX/NET_TX
  bool interrupts = false;  // /proc/interrupts had at least one of kWakeupIpis
  // CAL + RES over all CPUs (0 when neither exists).
  std::uint64_t wakeup_ipis() const;
};
// `hz` is sysconf(_SC_CLK_TCK); `wall_s` the time between the snapshots.
Activity activity(const ActivitySnapshot& before, const ActivitySnapshot& after, double wall_s,
                  long hz);

// The "Tcp:" pair of lines of /proc/net/snmp as name -> value (InSegs, OutSegs, RetransSegs...).
// Throws MeasureError when there is none.
std::map<std::string, std::int64_t> parse_snmp_tcp(const std::string& text);
// The "TcpExt:" pair of lines of /proc/net/netstat as name -> value (TCPBacklogCoalesce,
// TCPOFOQueue...); empty when there is none (the counters are context, not required).
std::map<std::string, std::int64_t> parse_netstat_tcpext(const std::string& text);

// The receive buffer (sk_rcvbuf, skmem's "rb") of the socket that has received the most bytes
// (bytes_received) in `ss -Htmi` output: the stream's, not iperf3's control connection on the
// same port. nullopt when no socket shows both (an old ss, or none established).
std::optional<std::int64_t> parse_ss_rcvbuf(const std::string& text);

// A namespace's TCP counters at one moment: /proc/net/snmp's Tcp, /proc/net/netstat's TcpExt.
struct TcpCounters {
  std::map<std::string, std::int64_t> tcp;
  std::map<std::string, std::int64_t> ext;
};

// The TcpExt counters a run records per namespace: how the receiver ACKed (DelayedACKs,
// TCPAckCompressed), how skbs were merged on the way in (TCPBacklogCoalesce in the socket's
// backlog, TCPRcvCoalesce in the receive queue), reordering and its duplicate-data reports
// (TCPOFOQueue, DelayedACKLost, TCPDSACKOldSent), the sender's corking (TCPAutoCorking), the
// fast path's pure ACKs and data (TCPHPAcks, TCPPureAcks, TCPHPHits), and a receive queue that
// outgrew sk_rcvbuf (tcp_prune_queue: PruneCalled; OfoPruned, TCPRcvCollapsed, RcvPruned and
// TCPRcvQDrop, the skbs it pruned from the out-of-order queue, merged, pruned or dropped), whose
// tcp_clamp_window raises sk_rcvbuf and leaves window_clamp under the buffer's space
// (docs/measure.md, "ACKs after the queue outgrew its buffer").
inline constexpr const char* kRecordedTcpExt[] = {
    "DelayedACKs", "TCPAckCompressed", "TCPBacklogCoalesce", "TCPRcvCoalesce",
    "TCPOFOQueue", "DelayedACKLost",   "TCPDSACKOldSent",    "TCPAutoCorking",
    "TCPHPAcks",   "TCPPureAcks",      "TCPHPHits",          "PruneCalled",
    "OfoPruned",   "TCPRcvCollapsed",  "RcvPruned",          "TCPRcvQDrop"};

struct Spread {
  std::size_t n = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mad = 0;  // median absolute deviation from the median (unscaled)
};
// Requires: !values.empty().
Spread spread(std::vector<double> values);

struct Machine {
  std::string kernel;             // uname -r
  std::string kernel_version;     // uname -v
  std::string arch;               // uname -m
  std::string cpu_model;          // /proc/cpuinfo "model name"
  std::optional<double> cpu_mhz;  // /proc/cpuinfo "cpu MHz" of the first CPU
  std::uint32_t cpus = 0;         // online CPUs
  long clk_tck = 100;             // USER_HZ
  bool hypervisor_flag = false;   // the cpuinfo "hypervisor" flag
  std::string kernel_hypervisor;  // the kernel log's "Hypervisor detected: X", "" if not found
  // The hypervisor's CPUID signature (leaf 0x40000000, x86), "" when there is none: what the
  // kernel's detect_hypervisor_vendor() reads, there whatever the kernel log still holds.
  std::string cpuid_signature;
  std::string systemd_detect_vm;  // systemd-detect-virt --vm, "" when not installed
  std::string systemd_detect_container;  // systemd-detect-virt --container
  std::string dmi_vendor;                // /sys/class/dmi/id/sys_vendor, "" when absent
  std::string dmi_product;               // /sys/class/dmi/id/product_name
  // /sys/kernel/slab/skbuff_small_head/object_size (6.x): tells the build's MAX_HEADER.
  std::optional<std::uint32_t> small_head_bytes;
  // /sys/devices/system/cpu/vulnerabilities: each CPU flaw the kernel knows and how it deals with
  // it ("Mitigation: Retpolines", "Vulnerable: Safe RET, no microcode"), by name; empty when the
  // directory is absent. Two boots of one kernel on different hosts can differ here, and the
  // mitigations on the kernel's entry, exit and return paths change what every syscall and
  // interrupt costs.
  std::vector<std::pair<std::string, std::string>> cpu_vulnerabilities;
  // The parameters on the kernel command line that change what the kernel spends:
  // kernel_parameters_of_note.
  std::vector<std::string> kernel_parameters;
  // "<vm>" or "<vm>+<container>": the vm from the kernel log, else the CPUID signature as the
  // kernel names it, else systemd-detect-virt --vm, else the DMI vendor, else "hypervisor" (the
  // cpuinfo flag alone), else "none"; the container from systemd-detect-virt --container when not
  // "none". (The boot's "Hypervisor detected" line leaves the log's ring buffer after a while;
  // the signature gives the same name for the hypervisors the kernel knows by it.)
  std::string virtualisation() const;
};

// Of /proc/cmdline's text, in order, the kernel's own parameters (those before a "--", which
// go to init) that change what it spends: the speculation mitigations (mitigations=, nopti,
// spectre_v2=, retbleed=, spec_rstack_overflow= and the like), idle and polling (idle=,
// cpuidle_haltpoll.*, haltpoll.*, processor.max_cstate=, intel_idle.*), the tick and isolation
// (nohz*, isolcpus=, rcu_nocbs=), preemption (preempt=, threadirqs) and the clock (tsc=,
// clocksource=).
std::vector<std::string> kernel_parameters_of_note(const std::string& cmdline);

// Parses /proc/cpuinfo text into `m` (model, MHz, hypervisor flag).
void parse_cpuinfo(const std::string& text, Machine& m);
// "KVM" from kernel log text with a line "... Hypervisor detected: KVM"; "" when none.
std::string hypervisor_from_kernel_log(const std::string& text);
// The name the kernel's "Hypervisor detected:" line gives a CPUID signature (arch/x86/kernel/cpu:
// "KVMKVMKVM" KVM, "Microsoft Hv" Microsoft Hyper-V, "VMwareVMware" VMware, "XenVMMXenVMM" Xen
// HVM, "Jailhouse" Jailhouse, "ACRNACRNACRN" ACRN), the signature itself (trimmed) for another;
// "" for none.
std::string hypervisor_from_cpuid_signature(const std::string& signature);
// The CPUID hypervisor signature of the CPU this runs on ("" off x86 or with no hypervisor).
std::string read_cpuid_signature();

}  // namespace skbsim::sim::measure
