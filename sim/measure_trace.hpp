#pragma once
// measure_trace.hpp — per-segment event counts from kernel tracepoints, through bpftrace: the
// only tracing this machine class allows (no kprobes, no function tracer; tracepoints and BTF are
// there). One bpftrace process runs for a traced run; on SIGINT it prints its maps as JSON lines
// (`bpftrace -f json`), which parse_bpftrace_output() reads.
//
// What is counted (docs/measure.md has the table):
//   net:net_dev_start_xmit  per device (our "skbm-*" ones): skbs, by ip_summed, wire segments
//                           (gso_segs), GSO skbs, len and data_len;
//   net:netif_rx_entry      per device: skbs, by ip_summed, GSO skbs, len and data_len;
//   skb:consume_skb, skb:kfree_skb   by call site (system-wide);
//   skb:skb_copy_datagram_iovec      calls and bytes (system-wide);
//   kmem:kmalloc, kmem:kmem_cache_alloc (skbuff caches)   with a kernel stack of 8 frames, so
//                           an allocation is attributed to pskb_expand_head or skb_segment when
//                           either is on its stack (system-wide);
//   profile:hz:997          the sampled kernel function per CPU, a 4-frame kernel stack, and
//                           the samples in user space and in bpftrace's own process
//                           (sim/measure_profile.hpp says what is made of them).
// System-wide counts include whatever else the machine did meanwhile; at the rates of a stream
// that is small, but it is why the run description records the machine's background load.

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/measure_profile.hpp"

namespace skbsim::sim::measure {

// Makes tracefs visible for the lifetime of the object: uses /sys/kernel/tracing or
// /sys/kernel/debug/tracing if mounted, else mounts tracefs at /sys/kernel/tracing and unmounts
// it on destruction. Never throws; available() false with reason() when it cannot.
class Tracefs {
 public:
  Tracefs();
  Tracefs(const Tracefs&) = delete;
  Tracefs& operator=(const Tracefs&) = delete;
  ~Tracefs();
  bool available() const { return !root_.empty(); }
  const std::string& reason() const { return reason_; }
  bool mounted_by_us() const { return mounted_; }
  const std::filesystem::path& root() const { return root_; }
  // "net:net_dev_start_xmit" -> whether events/net/net_dev_start_xmit exists.
  bool has(const std::string& tracepoint) const;

 private:
  std::filesystem::path root_;
  std::string reason_;
  bool mounted_ = false;
};

// The tracepoints the program uses, "category:name".
const std::vector<std::string>& wanted_tracepoints();

// The slab cache names an sk_buff or its small head can be allocated from, as the kmem
// tracepoints name them: skbuff_head_cache, skbuff_fclone_cache, skbuff_small_head and, when SLUB
// merged one of them with other caches (/sys/kernel/slab/skbuff_fclone_cache -> :0000512), every
// name of the merged cache, since the tracepoint reports the merged cache's own name.
std::vector<std::string> skb_cache_names(
    const std::filesystem::path& slab_dir = "/sys/kernel/slab");
// The skbuff caches SLUB merged with others: "skbuff_fclone_cache" -> {"pool_workqueue", ...},
// the names its allocations may be reported under.
std::map<std::string, std::vector<std::string>> skb_cache_merges(
    const std::filesystem::path& slab_dir = "/sys/kernel/slab");

// The register bpftrace's reg() names the interrupted instruction pointer by, for `uname -m`:
// "ip" on x86_64, "pc" on aarch64; "" for an architecture this does not know (no profile then).
std::string profile_ip_register(const std::string& arch);

// The bpftrace program over `present` (a subset of wanted_tracepoints()); devices are those
// whose name starts with `device_prefix`; slab allocations are traced from `skb_caches`. With an
// `ip_register` (profile_ip_register()) it ends with the profile probe: last, so that bpftrace
// attaches it after the tracepoints. A sample whose instruction pointer has the top bit clear is
// counted as user space, by CPU only: kernel text is in the upper half on the 64-bit
// architectures this runs on, and user addresses keyed one by one would make the map as large as
// the number of samples.
std::string bpftrace_program(const std::vector<std::string>& present,
                             const std::string& device_prefix,
                             const std::vector<std::string>& skb_caches,
                             const std::string& ip_register);

// The tracepoints whose probes take a kernel stack on every allocation (kmem:kmalloc,
// kmem:kmem_cache_alloc): the dearest ones. skbsim measure traces them in a run of their own,
// apart from the others, because with all of them attached at once a fixed-rate stream can fall
// short of its rate (forward with offloads off at 1000 Mbit/s on the project's KVM guest: 768
// Mbit/s traced in one run, 999.9 and 999.8 in two; docs/measure.md, "Two traced runs").
bool is_allocation_tracepoint(const std::string& tracepoint);

// The two traced runs' programs over `present`, arguments as bpftrace_program's: `main` with all
// but the allocation tracepoints (and the profile probe), `allocations` with those alone; one
// program, in `main`, when either part would have no probe (kmem:kmem_cache_alloc has none
// without `skb_caches`; the sched probes need all three).
struct TracePrograms {
  std::string main;
  std::string allocations;          // "" when there is no second run
  bool counts_allocations = false;  // whether any allocation probe is in either program
};
TracePrograms bpftrace_programs(const std::vector<std::string>& present,
                                const std::string& device_prefix,
                                const std::vector<std::string>& skb_caches,
                                const std::string& ip_register);

// Kernel text symbols from /proc/kallsyms, to name the call sites bpftrace reports as addresses.
class Kallsyms {
 public:
  static Kallsyms load();                          // empty when unreadable
  static Kallsyms parse(const std::string& text);  // /proc/kallsyms text
  // "ip_forward" for an address inside it; "0x..." when unknown.
  std::string name_of(std::uint64_t addr) const;

 private:
  std::vector<std::pair<std::uint64_t, std::string>> syms_;  // sorted by address
};

struct DeviceCounts {
  std::uint64_t xmit_skbs = 0;
  std::uint64_t xmit_segments = 0;  // sum of max(gso_segs, 1)
  std::uint64_t xmit_gso_skbs = 0;  // gso_size > 0
  std::uint64_t xmit_len_bytes = 0;
  std::uint64_t xmit_data_len_bytes = 0;
  std::map<int, std::uint64_t> xmit_ip_summed;  // CHECKSUM_NONE 0 ... CHECKSUM_PARTIAL 3
  std::uint64_t rx_skbs = 0;
  std::uint64_t rx_gso_skbs = 0;
  std::uint64_t rx_len_bytes = 0;
  std::uint64_t rx_data_len_bytes = 0;
  std::map<int, std::uint64_t> rx_ip_summed;
};

struct AllocSite {
  std::string site;   // first frame that is not an allocator: "skb_segment", "ip_forward"...
  std::string cache;  // "kmalloc" or the slab cache ("skbuff_head_cache", ...)
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;  // bytes_req
};

struct WakeLatency {
  std::uint64_t count = 0;     // sched_waking -> sched_wakeup
  std::uint64_t total_ns = 0;
  std::uint64_t to_running_count = 0;  // sched_waking -> the sched_switch that runs the reader
  std::uint64_t to_running_total_ns = 0;
  double mean_us() const { return mean(total_ns, count); }
  double to_running_mean_us() const { return mean(to_running_total_ns, to_running_count); }

 private:
  static double mean(std::uint64_t total, std::uint64_t n) {
    return n == 0 ? 0 : static_cast<double>(total) / static_cast<double>(n) / 1000;
  }
};

struct TraceCounts {
  std::map<std::string, DeviceCounts> devices;  // by interface name
  std::uint64_t consume_skb = 0;
  std::uint64_t kfree_skb = 0;
  std::map<std::string, std::uint64_t> consume_skb_sites;  // by the caller's symbol
  std::map<std::string, std::uint64_t> kfree_skb_sites;
  std::uint64_t copy_datagram_iovec = 0;
  std::uint64_t copy_datagram_iovec_bytes = 0;
  // Allocations with pskb_expand_head on the stack (its new head: one per call), struct sk_buff
  // allocations (the slab allocator called from __alloc_skb, skb_clone, build_skb...), those of
  // them with skb_segment on the stack (one per output segment), and the slab caches' counts.
  std::uint64_t expand_head_allocs = 0;
  std::uint64_t expand_head_bytes = 0;
  std::uint64_t sk_buff_allocs = 0;
  std::uint64_t segment_outputs = 0;
  std::map<std::string, std::uint64_t> slab_cache_allocs;
  std::vector<AllocSite> alloc_sites;  // sorted, most first
  // Whether the allocation fields above were counted at all: false when no allocation probe ran
  // (their tracepoints missing, or the allocations' traced run refused), so that they are left
  // out rather than written as zeros.
  bool allocations_counted = true;
  std::size_t distinct_stacks = 0;
  ProfileSamples profile;  // empty when the program had no profile probe
  // The reader's remote wake-ups, sched_waking -> sched_wakeup and -> running in ns, by how long
  // it had slept: 0 under kWakeSleepShortNs, 1 under kWakeSleepLongNs, 2 longer.
  std::map<int, WakeLatency> wake_latency;
};

// The sleep lengths that bucket the reader's wake-ups: a vCPU halted under 50 us is likely still
// polled by its host (KVM's halt_poll_ns grows to 200 us by default); one halted longer is not.
inline constexpr std::uint64_t kWakeSleepShortNs = 50'000;
inline constexpr std::uint64_t kWakeSleepLongNs = 200'000;

// The buckets of TraceCounts::wake_latency, by index: the measurement file's key, the summary's
// words.
struct WakeBucket {
  const char* key;
  const char* label;
};
inline constexpr std::array<WakeBucket, 3> kWakeBuckets = {{
    {"slept_under_50us", "< 50 us"},
    {"slept_50_to_200us", "50-200 us"},
    {"slept_200us_or_more", ">= 200 us"},
}};

// Calls fn(bucket, latency) for each bucket of `c.wake_latency` that holds a wake-up, in order;
// an index the program does not write is skipped.
template <class F>
void for_each_wake_bucket(const TraceCounts& c, F fn) {
  for (const auto& [index, w] : c.wake_latency) {
    if (index >= 0 && index < static_cast<int>(kWakeBuckets.size()) && w.count != 0) {
      fn(kWakeBuckets[static_cast<std::size_t>(index)], w);
    }
  }
}

// Parses `bpftrace -f json` output (one JSON object per line). A map's entries are read as
// printed, duplicates included: bpftrace keys @prof by address and prints each entry's key as
// the function name (ksym()), so one function can appear several times; they are summed. Throws
// MeasureError on a line that is not JSON.
TraceCounts parse_bpftrace_output(const std::string& text, const Kallsyms& syms);

// Whether `bpftrace -f json` output holds any map: "map" lines, or "stats" lines alone (the
// allocations' program keeps only stats()).
bool printed_maps(const std::string& text);

// The allocation run's counts (its sk_buff and pskb_expand_head allocations, skb_segment's
// outputs, slab caches and sites), moved into `events`, the other traced run's counts, as that
// run's segments would have had them: each scaled by events_segments / allocation_segments and
// rounded, so that a count per segment stays the allocation run's own. Throws MeasureError
// unless both runs sent segments.
void merge_allocation_counts(TraceCounts& events, const TraceCounts& allocations,
                             std::int64_t events_segments, std::int64_t allocation_segments);

// "__alloc_skb+377" -> "__alloc_skb".
std::string frame_function(const std::string& frame);

// skb->ip_summed: CHECKSUM_NONE 0, CHECKSUM_UNNECESSARY 1, CHECKSUM_COMPLETE 2, CHECKSUM_PARTIAL 3.
inline constexpr std::array<const char*, 4> kIpSummedNames = {"none", "unnecessary", "complete",
                                                              "partial"};
// "partial" for 3; the number itself for a state this list does not have.
inline std::string ip_summed_name(int state) {
  return state >= 0 && state < 4 ? kIpSummedNames[static_cast<std::size_t>(state)]
                                 : std::to_string(state);
}

}  // namespace skbsim::sim::measure
