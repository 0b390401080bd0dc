// measure_trace.cpp — tracefs, the bpftrace program, and reading what it printed.

#include "sim/measure_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/measure_process.hpp"

#include <sys/mount.h>

namespace skbsim::sim::measure {
namespace fs = std::filesystem;

namespace {

constexpr const char* kTracefs = "/sys/kernel/tracing";
constexpr const char* kDebugTracing = "/sys/kernel/debug/tracing";

std::uint64_t as_u64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    return v.get<std::uint64_t>();
  }
  if (v.is_number_integer()) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, v.get<std::int64_t>()));
  }
  if (v.is_number_float()) {
    return static_cast<std::uint64_t>(std::max(0.0, v.get<double>()));
  }
  return 0;
}

std::uint64_t parse_address(const std::string& s) {
  try {
    return std::stoull(s, nullptr, s.rfind("0x", 0) == 0 ? 16 : 10);
  } catch (const std::exception&) {
    return 0;
  }
}

// "name,3" -> {"name", "3"}; a key without a comma -> {key, ""}.
std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto c = key.find(',');
  if (c == std::string::npos) {
    return {key, ""};
  }
  return {key.substr(0, c), key.substr(c + 1)};
}

std::vector<std::string> stack_functions(const std::string& stack) {
  std::vector<std::string> out;
  std::istringstream in(stack);
  std::string line;
  while (std::getline(in, line)) {
    const std::string f = frame_function(line);
    if (!f.empty()) {
      out.push_back(f);
    }
  }
  return out;
}

bool is_allocator(const std::string& f) {
  for (const char* p : {"kmem_cache_alloc", "__kmalloc", "kmalloc", "__kvmalloc", "kvmalloc",
                        "__alloc_skb", "alloc_skb", "__netdev_alloc_skb", "__napi_alloc_skb",
                        "napi_alloc_skb", "slab_alloc", "__slab_alloc"}) {
    if (f.rfind(p, 0) == 0) {
      return true;
    }
  }
  return false;
}

struct Stats {
  std::uint64_t count = 0;
  std::uint64_t total = 0;
};

// Frames of the slab allocator itself, below the function that asked for memory.
bool is_slab_frame(const std::string& f) {
  for (const char* p : {"kmem_cache_alloc", "__kmem_cache_alloc", "__kmalloc", "kmalloc_node",
                        "kmalloc_trace", "__kvmalloc", "kvmalloc", "slab_alloc", "__slab_alloc"}) {
    if (f.rfind(p, 0) == 0) {
      return true;
    }
  }
  return false;
}

// The net/core/skbuff.c functions that allocate a struct sk_buff from a slab cache.
bool allocates_sk_buff(const std::string& f) {
  for (const char* n :
       {"__alloc_skb", "skb_clone", "__build_skb", "build_skb", "__napi_build_skb",
        "napi_build_skb", "napi_skb_cache_get", "__napi_alloc_skb", "__netdev_alloc_skb"}) {
    if (f == n) {
      return true;
    }
  }
  return false;
}

Stats stats_of(const nlohmann::json& v) {
  if (v.is_object()) {
    return {as_u64(v.value("count", nlohmann::json(0))),
            as_u64(v.value("total", nlohmann::json(0)))};
  }
  return {as_u64(v), 0};
}

}  // namespace

Tracefs::Tracefs() {
  if (fs::exists(fs::path(kTracefs) / "events")) {
    root_ = kTracefs;
    return;
  }
  if (fs::exists(fs::path(kDebugTracing) / "events")) {
    root_ = kDebugTracing;
    return;
  }
  if (!fs::is_directory(kTracefs)) {
    reason_ = std::string(kTracefs) + " does not exist (kernel without tracefs?)";
    return;
  }
  if (::mount("tracefs", kTracefs, "tracefs", 0, nullptr) != 0) {
    reason_ = std::string("mount -t tracefs ") + kTracefs + ": " + std::strerror(errno);
    return;
  }
  mounted_ = true;
  if (!fs::exists(fs::path(kTracefs) / "events")) {
    reason_ = std::string("tracefs at ") + kTracefs + " has no events/ (no tracepoints)";
    return;
  }
  root_ = kTracefs;
}

Tracefs::~Tracefs() {
  if (!mounted_) {
    return;
  }
  // A plain unmount fails while someone (not us: bpftrace is gone by now) uses it; then detach
  // it lazily rather than pull it from under them.
  if (::umount2(kTracefs, 0) != 0) {
    ::umount2(kTracefs, MNT_DETACH);
  }
}

bool Tracefs::has(const std::string& tracepoint) const {
  const auto c = tracepoint.find(':');
  if (root_.empty() || c == std::string::npos) {
    return false;
  }
  return fs::exists(root_ / "events" / tracepoint.substr(0, c) / tracepoint.substr(c + 1));
}

bool is_allocation_tracepoint(const std::string& tracepoint) {
  return tracepoint.rfind("kmem:", 0) == 0;
}

const std::vector<std::string>& wanted_tracepoints() {
  static const std::vector<std::string> wanted = {
      "net:net_dev_start_xmit",      "net:netif_rx_entry", "skb:consume_skb",       "skb:kfree_skb",
      "skb:skb_copy_datagram_iovec", "kmem:kmalloc",       "kmem:kmem_cache_alloc",
      "sched:sched_switch",          "sched:sched_waking", "sched:sched_wakeup",
  };
  return wanted;
}

std::string profile_ip_register(const std::string& arch) {
  if (arch == "x86_64") {
    return "ip";
  }
  if (arch == "aarch64") {
    return "pc";
  }
  return "";
}

std::string bpftrace_program(const std::vector<std::string>& present,
                             const std::string& device_prefix,
                             const std::vector<std::string>& skb_caches,
                             const std::string& ip_register) {
  const auto has = [&](const char* tp) {
    return std::find(present.begin(), present.end(), tp) != present.end();
  };
  const std::string n = std::to_string(device_prefix.size());
  const std::string dev_filter =
      "/strncmp(str(args->name), \"" + device_prefix + "\", " + n + ") == 0/";
  std::string p = "// skbsim measure: per-segment event counts (sim/measure_trace.hpp)\n";
  if (has("net:net_dev_start_xmit")) {
    p += "tracepoint:net:net_dev_start_xmit " + dev_filter +
         " {\n"
         "  $n = str(args->name);\n"
         "  @xmit[$n, args->ip_summed] = count();\n"
         "  @xmit_len[$n] = sum(args->len);\n"
         "  @xmit_data_len[$n] = sum(args->data_len);\n"
         "  @xmit_segs[$n] = sum(args->gso_segs > 0 ? args->gso_segs : 1);\n"
         "  @xmit_gso[$n] = sum(args->gso_size > 0 ? 1 : 0);\n"
         "}\n";
  }
  if (has("net:netif_rx_entry")) {
    p += "tracepoint:net:netif_rx_entry " + dev_filter +
         " {\n"
         "  $n = str(args->name);\n"
         "  @rx[$n, args->ip_summed] = count();\n"
         "  @rx_len[$n] = sum(args->len);\n"
         "  @rx_data_len[$n] = sum(args->data_len);\n"
         "  @rx_gso[$n] = sum(args->gso_size > 0 ? 1 : 0);\n"
         "}\n";
  }
  if (has("skb:consume_skb")) {
    p += "tracepoint:skb:consume_skb { @consume[args->location] = count(); }\n";
  }
  if (has("skb:kfree_skb")) {
    p += "tracepoint:skb:kfree_skb { @kfree[args->location] = count(); }\n";
  }
  if (has("skb:skb_copy_datagram_iovec")) {
    p += "tracepoint:skb:skb_copy_datagram_iovec {\n"
         "  @copy_iovec = count();\n"
         "  @copy_iovec_bytes = sum(args->len);\n"
         "}\n";
  }
  if (has("kmem:kmalloc")) {
    p += "tracepoint:kmem:kmalloc { @kmalloc[kstack(8)] = stats(args->bytes_req); }\n";
  }
  if (has("kmem:kmem_cache_alloc") && !skb_caches.empty()) {
    std::string cond;
    for (const std::string& c : skb_caches) {
      cond += (cond.empty() ? "" : " || ") + std::string("$c == \"") + c + "\"";
    }
    p += "tracepoint:kmem:kmem_cache_alloc {\n"
         "  $c = str(args->name);\n"
         "  if (" +
         cond +
         ") {\n"
         "    @cache[$c, kstack(8)] = stats(args->bytes_req);\n"
         "  }\n"
         "}\n";
  }
  if (has("sched:sched_switch") && has("sched:sched_waking") && has("sched:sched_wakeup")) {
    // The reader's wake-up latency (bpftrace's $1: the server's pid; iperf3 3.x before 3.16
    // reads in its main thread): from sched_waking on the waker's CPU to sched_wakeup on the
    // reader's, for remote wake-ups after a sleep (a switch-out not in TASK_RUNNING), by how
    // long it slept. A halted vCPU's wake-up goes through the hypervisor, whose polling window
    // decides how long that takes (docs/measure.md, "Wake-up latency"). And, for the same
    // wake-ups, from sched_waking to the switch that runs the reader (@run_ns): the wake-up's
    // latency plus what its CPU does before the reader's code (the rest of the IPI, leaving the
    // idle loop, __schedule).
    p += "tracepoint:sched:sched_switch /args->prev_pid == $1 && args->prev_state != 0/ {\n"
         "  @wk_out = nsecs;\n"
         "}\n"
         "tracepoint:sched:sched_switch /args->next_pid == $1 && @run_t != 0/ {\n"
         "  @run_ns[@run_b] = stats(nsecs - @run_t);\n"
         "  @run_t = 0;\n"
         "}\n"
         "tracepoint:sched:sched_waking /args->pid == $1/ {\n"
         "  if (@wk_out != 0 && cpu != args->target_cpu) {\n"
         "    @wk_t = nsecs;\n"
         "    @wk_slept = nsecs - @wk_out;\n"
         "  }\n"
         "  @wk_out = 0;\n"
         "}\n"
         "tracepoint:sched:sched_wakeup /args->pid == $1 && @wk_t != 0/ {\n"
         "  if (@wk_slept < " + std::to_string(kWakeSleepShortNs) + ") {\n"
         "    @wake_ns[0] = stats(nsecs - @wk_t);\n"
         "    @run_b = 0;\n"
         "  } else if (@wk_slept < " + std::to_string(kWakeSleepLongNs) + ") {\n"
         "    @wake_ns[1] = stats(nsecs - @wk_t);\n"
         "    @run_b = 1;\n"
         "  } else {\n"
         "    @wake_ns[2] = stats(nsecs - @wk_t);\n"
         "    @run_b = 2;\n"
         "  }\n"
         "  @run_t = @wk_t;\n"
         "  @wk_t = 0;\n"
         "}\n";
  }
  if (!ip_register.empty()) {
    // The first and last sample's time give the window (bpftrace 0.17 prints no min());
    // bpftrace's own process (attaching, printing) is tracing cost; the top bit tells kernel
    // from user addresses. @prof's key is the address, printed as its function (ksym).
    const std::string ip = "reg(\"" + ip_register + "\")";
    p += "profile:hz:" + std::to_string(kProfileHz) + " {\n";
    p += "  if (@prof_t0 == 0) {\n"
         "    @prof_t0 = nsecs;\n"
         "  }\n"
         "  @prof_t1 = nsecs;\n"
         "  if (comm == \"bpftrace\") {\n"
         "    @prof_tracer[cpu] = count();\n"
         "  } else {\n"
         "    @prof_comm[comm] = count();\n";
    p += "    if (" + ip + " >> 63) {\n";
    p += "      @prof[cpu, ksym(" + ip + ")] = count();\n";
    p += "      @prof_chain[kstack(" + std::to_string(kProfileChainFrames) + ")] = count();\n";
    p += "    } else {\n"
         "      @prof_user[cpu] = count();\n"
         "    }\n"
         "  }\n"
         "}\n";
  }
  return p;
}

TracePrograms bpftrace_programs(const std::vector<std::string>& present,
                                const std::string& device_prefix,
                                const std::vector<std::string>& skb_caches,
                                const std::string& ip_register) {
  std::vector<std::string> events;
  std::vector<std::string> allocations;
  for (const std::string& tp : present) {
    (is_allocation_tracepoint(tp) ? allocations : events).push_back(tp);
  }
  // Decided on the probes written, not on the names: a part may write none.
  const auto has_probe = [](const std::string& program) {
    return program.find("\ntracepoint:") != std::string::npos ||
           program.find("\nprofile:") != std::string::npos;
  };
  std::string main = bpftrace_program(events, device_prefix, skb_caches, ip_register);
  std::string allocs = bpftrace_program(allocations, device_prefix, skb_caches, "");
  const bool counts_allocations = has_probe(allocs);
  if (!has_probe(main) || !counts_allocations) {
    return {.main = bpftrace_program(present, device_prefix, skb_caches, ip_register),
            .allocations = "",
            .counts_allocations = counts_allocations};
  }
  return {.main = std::move(main), .allocations = std::move(allocs), .counts_allocations = true};
}

namespace {

// Every cache name in `slab_dir`, grouped by the cache it is (a merged cache's id, ":0000512", or
// its own name).
std::map<std::string, std::vector<std::string>> slab_groups(const fs::path& slab_dir) {
  std::map<std::string, std::vector<std::string>> by_target;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(slab_dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string target =
        e.is_symlink(ec) ? fs::read_symlink(e.path(), ec).filename().string() : name;
    by_target[target].push_back(name);
  }
  for (auto& [t, names] : by_target) {
    std::sort(names.begin(), names.end());
  }
  return by_target;
}

bool is_skb_cache(const std::string& name) {
  return name.rfind("skbuff_", 0) == 0 && name != "skbuff_ext_cache";
}

}  // namespace

std::map<std::string, std::vector<std::string>> skb_cache_merges(const fs::path& slab_dir) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [target, names] : slab_groups(slab_dir)) {
    for (const std::string& n : names) {
      if (!is_skb_cache(n) || names.size() < 2) {
        continue;
      }
      for (const std::string& other : names) {
        if (other != n && other[0] != ':') {
          out[n].push_back(other);
        }
      }
    }
  }
  return out;
}

std::vector<std::string> skb_cache_names(const fs::path& slab_dir) {
  std::error_code ec;
  if (!fs::is_directory(slab_dir, ec)) {
    return {"skbuff_fclone_cache", "skbuff_head_cache", "skbuff_small_head"};
  }
  std::vector<std::string> out;
  for (const auto& [target, names] : slab_groups(slab_dir)) {
    if (std::none_of(names.begin(), names.end(), is_skb_cache)) {
      continue;
    }
    for (const std::string& n : names) {
      // ":0000512" is sysfs's id, not a name; a quote or backslash would break the program.
      if (!n.empty() && n[0] != ':' && n.find_first_of("\"\\") == std::string::npos) {
        out.push_back(n);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Kallsyms Kallsyms::load() {
  std::ifstream in("/proc/kallsyms");
  std::ostringstream s;
  s << in.rdbuf();
  return parse(s.str());
}

Kallsyms Kallsyms::parse(const std::string& text) {
  Kallsyms k;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string addr;
    std::string type;
    std::string name;
    if (!(f >> addr >> type >> name) || type.size() != 1) {
      continue;
    }
    const char t = type[0];
    if (t != 't' && t != 'T' && t != 'w' && t != 'W') {
      continue;
    }
    const std::uint64_t a = parse_address(addr.rfind("0x", 0) == 0 ? addr : "0x" + addr);
    if (a != 0) {
      k.syms_.emplace_back(a, name);
    }
  }
  std::sort(k.syms_.begin(), k.syms_.end());
  return k;
}

std::string Kallsyms::name_of(std::uint64_t addr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), addr,
                             [](std::uint64_t a, const auto& s) { return a < s.first; });
  if (it == syms_.begin()) {
    std::ostringstream s;
    s << "0x" << std::hex << addr;
    return s.str();
  }
  return std::prev(it)->second;
}

std::string frame_function(const std::string& frame) {
  const auto b = frame.find_first_not_of(" \t");
  if (b == std::string::npos) {
    return "";
  }
  const auto e = frame.find_first_of("+ \t\r", b);
  return frame.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

namespace {

// Accumulates the maps of one bpftrace output into TraceCounts.
class TraceReader {
 public:
  explicit TraceReader(const Kallsyms& syms) : syms_(syms) {}

  // A map without keys: @copy_iovec.
  void keyless(const std::string& name, const nlohmann::json& value) {
    if (name == "@copy_iovec") {
      t_.copy_datagram_iovec = as_u64(value);
    } else if (name == "@copy_iovec_bytes") {
      t_.copy_datagram_iovec_bytes = as_u64(value);
    } else if (name == "@prof_t0") {
      t_.profile.first_ns = as_u64(value);
    } else if (name == "@prof_t1") {
      t_.profile.last_ns = as_u64(value);
    }
  }

  // One entry of a map, as printed (a key may come more than once).
  void entry(const std::string& name, const std::string& key, const nlohmann::json& v) {
    if (name.rfind("@prof", 0) == 0) {
      profile(name, key, as_u64(v));
    } else {
      counts(name, key, v);
    }
  }

  TraceCounts finish() {
    for (auto& [k, a] : sites_) {
      t_.alloc_sites.push_back(a);
    }
    std::stable_sort(t_.alloc_sites.begin(), t_.alloc_sites.end(),
                     [](const AllocSite& a, const AllocSite& b) { return a.count > b.count; });
    return std::move(t_);
  }

 private:
  void profile(const std::string& name, const std::string& key, std::uint64_t n) {
    ProfileSamples& p = t_.profile;
    const auto [k1, k2] = split_key(key);
    const auto cpu = static_cast<std::uint32_t>(std::strtoul(k1.c_str(), nullptr, 10));
    if (name == "@prof") {
      if (k2.rfind("0x", 0) != 0) {
        p.kernel[cpu][k2] += n;
      } else if ((parse_address(k2) >> 63) != 0) {
        p.kernel[cpu]["[unknown]"] += n;  // kallsyms does not name it
      } else {
        p.user[cpu] += n;
      }
    } else if (name == "@prof_user") {
      p.user[cpu] += n;
    } else if (name == "@prof_tracer") {
      p.tracer[cpu] += n;
    } else if (name == "@prof_comm") {
      p.processes[key] += n;
    } else if (name == "@prof_chain") {
      p.chains[stack_functions(key)] += n;
    }
  }

  void counts(const std::string& name, const std::string& key, const nlohmann::json& v) {
    const auto [k1, k2] = split_key(key);
    if (name == "@xmit" || name == "@rx") {
      const int summed = k2.empty() ? -1 : std::atoi(k2.c_str());
      DeviceCounts& d = t_.devices[k1];
      (name == "@xmit" ? d.xmit_ip_summed : d.rx_ip_summed)[summed] += as_u64(v);
      (name == "@xmit" ? d.xmit_skbs : d.rx_skbs) += as_u64(v);
    } else if (std::uint64_t* field = device_field(name, k1)) {
      *field = as_u64(v);
    } else if (name == "@consume" || name == "@kfree") {
      const std::string site = syms_.name_of(parse_address(k1));
      const bool consume = name == "@consume";
      (consume ? t_.consume_skb : t_.kfree_skb) += as_u64(v);
      (consume ? t_.consume_skb_sites : t_.kfree_skb_sites)[site] += as_u64(v);
    } else if (name == "@wake_ns" || name == "@run_ns") {  // to sched_wakeup, to running
      const Stats s = stats_of(v);
      WakeLatency& w = t_.wake_latency[std::atoi(k1.c_str())];
      const bool woken = name == "@wake_ns";
      (woken ? w.count : w.to_running_count) += s.count;
      (woken ? w.total_ns : w.to_running_total_ns) += s.total;
    } else if (name == "@kmalloc") {
      alloc("kmalloc", key, stats_of(v));
    } else if (name == "@cache") {
      alloc(k1, k2, stats_of(v));
    }
  }

  std::uint64_t* device_field(const std::string& name, const std::string& dev) {
    static const std::map<std::string, std::uint64_t DeviceCounts::*> fields = {
        {"@xmit_len", &DeviceCounts::xmit_len_bytes},
        {"@xmit_data_len", &DeviceCounts::xmit_data_len_bytes},
        {"@xmit_segs", &DeviceCounts::xmit_segments},
        {"@xmit_gso", &DeviceCounts::xmit_gso_skbs},
        {"@rx_len", &DeviceCounts::rx_len_bytes},
        {"@rx_data_len", &DeviceCounts::rx_data_len_bytes},
        {"@rx_gso", &DeviceCounts::rx_gso_skbs},
    };
    const auto it = fields.find(name);
    return it == fields.end() ? nullptr : &(t_.devices[dev].*(it->second));
  }

  void alloc(const std::string& cache, const std::string& stack, Stats s) {
    ++t_.distinct_stacks;
    const std::vector<std::string> fns = stack_functions(stack);
    const auto on_stack = [&fns](const char* f) {
      return std::find(fns.begin(), fns.end(), f) != fns.end();
    };
    if (on_stack("pskb_expand_head")) {
      t_.expand_head_allocs += s.count;
      t_.expand_head_bytes += s.total;
    }
    const auto below = std::find_if_not(fns.begin(), fns.end(), is_slab_frame);
    if (cache != "kmalloc") {
      t_.slab_cache_allocs[cache] += s.count;
      if (below != fns.end() && allocates_sk_buff(*below)) {
        t_.sk_buff_allocs += s.count;
        if (on_stack("skb_segment")) {
          t_.segment_outputs += s.count;
        }
      }
    }
    const auto caller = std::find_if_not(fns.begin(), fns.end(), is_allocator);
    const std::string site = caller == fns.end() ? "?" : *caller;
    AllocSite& a = sites_[{site, cache}];
    a.site = site;
    a.cache = cache;
    a.count += s.count;
    a.bytes += s.total;
  }

  const Kallsyms& syms_;
  TraceCounts t_;
  std::map<std::pair<std::string, std::string>, AllocSite> sites_;
};

}  // namespace

namespace {

// The entries of the maps in one line's "data", in the order printed, duplicate keys included
// (a parsed object keeps only the last of them).
struct MapEntry {
  std::string map;
  std::optional<std::string> key;  // nullopt: a map without keys
  nlohmann::json value;
};

// Collects MapEntry with a SAX handler: bpftrace prints one key several times in an object
// (ksym() keys), and a DOM would keep only the last. Depths count the open containers: keys of the
// line's object at 1, map names inside "data" at 2, a map's entry keys at 3; a keyless map's value
// arrives at 2. Entry values (scalars or whole arrays and objects) are built here; nothing else of
// the line is kept but its "type".
class EntrySax {
 public:
  using json = nlohmann::json;
  std::vector<MapEntry> entries;
  std::string type;
  bool data_object = false;

  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(json::number_integer_t v) { return scalar(v); }
  bool number_unsigned(json::number_unsigned_t v) { return scalar(v); }
  bool number_float(json::number_float_t v, const std::string& /*text*/) { return scalar(v); }
  bool string(std::string& v) {
    if (stack_.empty() && depth_ == 1 && key1_ == "type") {
      type = v;
    }
    return scalar(v);
  }
  bool binary(json::binary_t& /*v*/) { return scalar(nullptr); }
  bool start_object(std::size_t /*n*/) { return open(json::object()); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*n*/) { return open(json::array()); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (!stack_.empty()) {
      keys_.back() = k;
    } else if (depth_ == 1) {
      key1_ = k;
    } else if (depth_ == 2) {
      map_ = k;
    } else if (depth_ == 3) {
      key3_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t /*pos*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*e*/) {
    failed = true;
    return false;
  }
  bool failed = false;

 private:
  bool in_data() const { return key1_ == "data"; }
  bool open(json v) {
    if (!stack_.empty() || (depth_ == 3 && in_data())) {
      stack_.push_back(std::move(v));
      keys_.emplace_back();
    } else if (depth_ == 1 && in_data() && v.is_object()) {
      data_object = true;
    }
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    if (stack_.empty()) {
      return true;
    }
    json v = std::move(stack_.back());
    stack_.pop_back();
    keys_.pop_back();
    if (stack_.empty()) {
      entries.push_back({map_, key3_, std::move(v)});
    } else {
      insert(std::move(v));
    }
    return true;
  }
  bool scalar(json v) {
    if (!stack_.empty()) {
      insert(std::move(v));
    } else if (in_data() && depth_ == 3) {
      entries.push_back({map_, key3_, std::move(v)});
    } else if (in_data() && depth_ == 2) {
      entries.push_back({map_, std::nullopt, std::move(v)});
    }
    return true;
  }
  void insert(json v) {
    json& parent = stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
    } else {
      parent[keys_.back()] = std::move(v);
    }
  }

  int depth_ = 0;
  std::string key1_;
  std::string map_;
  std::string key3_;
  std::vector<json> stack_;        // entry values being built, outermost first
  std::vector<std::string> keys_;  // the current key of each object on the stack
};

}  // namespace

TraceCounts parse_bpftrace_output(const std::string& text, const Kallsyms& syms) {
  TraceReader reader(syms);
  std::istringstream in(text);
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      continue;
    }
    EntrySax sax;
    const bool ok = nlohmann::json::sax_parse(line, &sax, nlohmann::json::input_format_t::json,
                                              /*strict=*/true, /*ignore_comments=*/false);
    if (!ok || sax.failed) {
      throw MeasureError("bpftrace output line " + std::to_string(line_no) +
                         ": expected a JSON object, got " + line.substr(0, 80));
    }
    if ((sax.type != "map" && sax.type != "stats") || !sax.data_object) {
      continue;
    }
    for (const MapEntry& e : sax.entries) {
      if (e.key) {
        reader.entry(e.map, *e.key, e.value);
      } else if (!e.value.is_object()) {
        reader.keyless(e.map, e.value);
      }
    }
  }
  return reader.finish();
}

bool printed_maps(const std::string& text) {
  return text.find("\"type\": \"map\"") != std::string::npos ||
         text.find("\"type\": \"stats\"") != std::string::npos;
}

void merge_allocation_counts(TraceCounts& events, const TraceCounts& allocations,
                             std::int64_t events_segments, std::int64_t allocation_segments) {
  if (events_segments <= 0 || allocation_segments <= 0) {
    throw MeasureError("traced runs: expected segments in both, got " +
                       std::to_string(events_segments) + " and " +
                       std::to_string(allocation_segments));
  }
  const double scale =
      static_cast<double>(events_segments) / static_cast<double>(allocation_segments);
  const auto scaled = [scale](std::uint64_t n) {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * scale));
  };
  events.expand_head_allocs = scaled(allocations.expand_head_allocs);
  events.expand_head_bytes = scaled(allocations.expand_head_bytes);
  events.sk_buff_allocs = scaled(allocations.sk_buff_allocs);
  events.segment_outputs = scaled(allocations.segment_outputs);
  events.slab_cache_allocs.clear();
  for (const auto& [cache, n] : allocations.slab_cache_allocs) {
    events.slab_cache_allocs[cache] = scaled(n);
  }
  events.alloc_sites.clear();
  for (const AllocSite& a : allocations.alloc_sites) {
    events.alloc_sites.push_back(
        {.site = a.site, .cache = a.cache, .count = scaled(a.count), .bytes = scaled(a.bytes)});
  }
  events.distinct_stacks = allocations.distinct_stacks;
}

}  // namespace skbsim::sim::measure
