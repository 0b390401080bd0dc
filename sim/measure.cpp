// measure.cpp — `skbsim measure`: the real kernel in the loop. Builds its own network namespaces
// joined by veth (sim/measure_net.hpp), runs iperf3 streams between them, reads CPU time and TCP
// counters, counts per-segment events through bpftrace (sim/measure_trace.hpp), and writes a
// measurement file and a scenario with a reference per configuration (sim/measure_report.hpp).
//
// Clean-up is by RAII: processes (Process), namespaces (Lab), the tracefs mount (Tracefs), the
// scratch directory and the lock all undo themselves when their scope ends, which an exception
// — MeasureError, or Interrupted when SIGINT/SIGTERM/SIGHUP arrived — makes happen on every exit
// path. An interrupted run removes what it made, writes nothing, and then dies of the same signal
// so that a calling shell sees it.

#include <algorithm>
#include <chrono>
#include <cctype>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include <boost/program_options.hpp>

#include "sim/cli_args.hpp"
#include "sim/commands.hpp"
#include "sim/input_error.hpp"
#include "sim/measure_host.hpp"
#include "sim/measure_net.hpp"
#include "sim/measure_process.hpp"
#include "sim/measure_report.hpp"
#include "sim/measure_speed.hpp"
#include "sim/measure_trace.hpp"
#include "sim/output_dir.hpp"
#include "sim/scenario.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

namespace skbsim::sim {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using measure::Completed;
using measure::ConfigResult;
using measure::Configuration;
using measure::CpuTicks;
using measure::Interrupted;
using measure::Lab;
using measure::MeasureContext;
using measure::MeasureError;
using measure::Process;
using measure::Role;
using measure::RunFigures;
using measure::ScratchDir;
using measure::Tools;
using measure::Topology;
using measure::Variant;
using std::chrono::milliseconds;

constexpr int kExitUsage = 2;
constexpr const char* kPort = "5201";
constexpr const char* kDevicePrefix = "skbm-";
constexpr int kFirstProbes = 5;  // speed probes before the first run
constexpr auto kSettleLimit = std::chrono::seconds(120);  // the longest wait for normal speed
constexpr auto kSettleStep = milliseconds(500);

// A bad flag or an unusable machine: "FLAG: expected ..., got ..." (no JSON pointer).
class FlagError : public InputError {
 public:
  FlagError(const std::string& flag, const std::string& message)
      : InputError(flag, "", message), line_(flag + ": " + message) {}
  const char* what() const noexcept override { return line_.c_str(); }

 private:
  std::string line_;
};

enum class TraceMode : std::uint8_t { kAuto, kOn, kOff };

struct Settings {
  std::vector<Topology> topologies;
  std::vector<Variant> variants;
  std::vector<std::optional<double>> rates;
  int runs = 5;
  int duration_s = 10;
  std::optional<fs::path> out;
  fs::path shared = "scenarios/shared";
  std::optional<fs::path> preset;  // the scenarios' preset instead of the shared piece's
  TraceMode trace = TraceMode::kAuto;
  std::optional<fs::path> compare;  // a measured set to reproduce (its scenarios' references)
  bool at_set_speed = false;        // --at-set-speed: judge the comparison at the set's speed
  int unsteady_retries = -1;        // runs to redo per configuration; -1: as many as `runs`
  bool interleave = true;           // --order interleaved (else grouped)
  // --congestion-control. Not the machine's default: a pacing algorithm (BBR) holds the tail of
  // a write back (tcp_pacing_check) until the next write fills it, so the kernel sends fewer,
  // larger skbs than the model, which does not pace (docs/measure.md, "Congestion control").
  // Pinned on the routes (NetPlan::congestion_control) as well as passed to iperf3 -C.
  std::string congestion_control = "cubic";
};

constexpr std::string_view kAbout =
    "Measures this machine's kernel on the paths the scenarios model. As root, it builds network\n"
    "namespaces of its own (skbsim-<pid>-client|host|server) joined by veth pairs, in one of "
    "three\n"
    "topologies: direct (client - server), forward (client - host with ip_forward - server),\n"
    "bridge (client - host with a Linux bridge - server); sets the veth features of a variant "
    "with\n"
    "ethtool -K on every veth end: on (the defaults), off (tx rx sg tso gso gro off), tso-off,\n"
    "sg-off, csum-off (tx rx off); and runs iperf3 TCP streams client -> server, unlimited or at "
    "a\n"
    "fixed rate, --runs times each. Per run it records throughput, CPU time from /proc/stat (as\n"
    "non-idle time and as the tick-sampled busy fields), service demand in us/KB and TCP segments\n"
    "sent; then two more, traced runs count per-segment events through bpftrace tracepoints\n"
    "(when bpftrace is installed and the kernel lets it trace): the allocations' stacks in one,\n"
    "everything else in the other. The runs are interleaved (one of\n"
    "every configuration per pass) unless --order grouped, and each is bracketed by a speed probe\n"
    "(fixed work timed on each CPU): it waits for the machine's normal speed before a run and\n"
    "redoes a run the probe says ran slow (--unsteady-retries).\n"
    "\n"
    "It never touches the root namespace's interfaces or routes, and removes everything it made\n"
    "on exit, on error and on SIGINT/SIGTERM. With --out it writes DIR/<config>.json (a scenario\n"
    "with the measured reference; `skbsim validate DIR` compares it with the model),\n"
    "DIR/measurements/<config>.json and DIR/summary.txt, replacing DIR whole, at the end, or\n"
    "nothing at all. See docs/measure.md.\n"
    "\n"
    "Exit codes: 0 done; 1 a measurement step failed (one line on stderr, nothing written);\n"
    "2 bad flags or an unusable machine (not root, a tool missing, its namespaces exist); killed\n"
    "by the signal it received after cleaning up.\n";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) {
    s.pop_back();
  }
  const auto b = s.find_first_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b);
}

std::string first_line(const std::string& s) {
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    if (!trimmed(line).empty()) {
      return trimmed(line);
    }
  }
  return "";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::array<char, 32> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf.data();
}

// ---- flags --------------------------------------------------------------------------------------

std::vector<std::string> split_words(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    std::string w;
    for (char c : v + ",") {
      if (c == ',' || c == ' ') {
        if (!w.empty()) {
          out.push_back(w);
        }
        w.clear();
      } else {
        w += c;
      }
    }
  }
  return out;
}

template <typename T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) {
    v.push_back(x);
  }
}

std::vector<std::string> words_of(const po::variables_map& vm, const char* key) {
  return vm.count(key) != 0 ? split_words(vm[key].as<std::vector<std::string>>())
                            : std::vector<std::string>{};
}

std::vector<Topology> topologies_from(const po::variables_map& vm, bool smoke) {
  std::vector<Topology> out;
  for (const std::string& w : words_of(vm, "topology")) {
    const auto t = measure::topology_from_name(w);
    if (!t) {
      throw FlagError("--topology", "expected direct, forward or bridge, got \"" + w + "\"");
    }
    add_unique(out, *t);
  }
  if (out.empty() && smoke) {
    return {Topology::kDirect};
  }
  return out.empty()
             ? std::vector<Topology>{Topology::kDirect, Topology::kForward, Topology::kBridge}
             : out;
}

std::vector<Variant> variants_from(const po::variables_map& vm, bool smoke) {
  std::vector<Variant> out;
  for (const std::string& w : words_of(vm, "variant")) {
    const auto v = measure::variant_from_name(w);
    if (!v) {
      throw FlagError("--variant",
                      "expected on, off, tso-off, sg-off or csum-off, got \"" + w + "\"");
    }
    add_unique(out, *v);
  }
  if (out.empty() && smoke) {
    return {Variant::kOn};
  }
  return out.empty() ? std::vector<Variant>{Variant::kOn, Variant::kOff, Variant::kTsoOff,
                                            Variant::kSgOff, Variant::kCsumOff}
                     : out;
}

std::vector<std::optional<double>> rates_from(const po::variables_map& vm, bool smoke) {
  std::vector<std::optional<double>> out;
  for (const std::string& w : words_of(vm, "rate")) {
    if (w == "unlimited") {
      add_unique(out, std::optional<double>());
      continue;
    }
    const double mbps = parse_double(w).value_or(0);
    if (!(mbps >= 1 && mbps <= 1e6)) {
      throw FlagError("--rate",
                      "expected \"unlimited\" or Mbit/s in [1, 1000000], got \"" + w + "\"");
    }
    add_unique(out, std::optional<double>(mbps));
  }
  if (out.empty()) {
    out.emplace_back();  // unlimited
    if (!smoke) {
      out.emplace_back(1000.0);
    }
  }
  return out;
}

int int_from(const po::variables_map& vm, const char* key, int lo, int hi, int fallback) {
  if (vm.count(key) == 0) {
    return fallback;
  }
  const std::string w = vm[key].as<std::string>();
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(w, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != w.size() || v < lo || v > hi) {
    throw FlagError(std::string("--") + key, "expected an integer in [" + std::to_string(lo) +
                                                 ", " + std::to_string(hi) + "], got \"" + w +
                                                 "\"");
  }
  return static_cast<int>(v);
}

TraceMode trace_from(const po::variables_map& vm) {
  const std::string w = vm.count("trace") != 0 ? vm["trace"].as<std::string>() : "auto";
  if (w == "on") {
    return TraceMode::kOn;
  }
  if (w == "off") {
    return TraceMode::kOff;
  }
  if (w != "auto") {
    throw FlagError("--trace", "expected auto, on or off, got \"" + w + "\"");
  }
  return TraceMode::kAuto;
}

fs::path shared_piece(const fs::path& shared, Topology t) {
  return shared / ("measure-" + std::string(measure::topology_name(t)) + ".json");
}

Settings settings_from(const po::variables_map& vm) {
  Settings s;
  const bool smoke = vm.count("smoke") != 0;
  s.topologies = topologies_from(vm, smoke);
  s.variants = variants_from(vm, smoke);
  s.rates = rates_from(vm, smoke);
  s.runs = int_from(vm, "runs", 1, 1000, smoke ? 1 : 5);
  s.duration_s = int_from(vm, "duration", 1, 3600, smoke ? 1 : 10);
  s.trace = trace_from(vm);
  s.unsteady_retries = int_from(vm, "unsteady-retries", 0, 1000, smoke ? 0 : s.runs);
  if (vm.count("order") != 0) {
    const std::string w = vm["order"].as<std::string>();
    if (w != "interleaved" && w != "grouped") {
      throw FlagError("--order", "expected interleaved or grouped, got \"" + w + "\"");
    }
    s.interleave = w == "interleaved";
  }
  if (vm.count("shared") != 0) {
    s.shared = vm["shared"].as<std::string>();
  }
  if (vm.count("preset") != 0) {
    s.preset = vm["preset"].as<std::string>();
    if (!fs::is_regular_file(*s.preset)) {
      throw FlagError("--preset",
                      "expected a cost preset file, got no such file " + s.preset->string());
    }
  }
  if (vm.count("congestion-control") != 0) {
    s.congestion_control = vm["congestion-control"].as<std::string>();
    const bool word = !s.congestion_control.empty() &&
                      std::all_of(s.congestion_control.begin(), s.congestion_control.end(),
                                  [](char c) { return std::islower(static_cast<unsigned char>(c)) ||
                                                      std::isdigit(static_cast<unsigned char>(c)) ||
                                                      c == '_'; });
    if (!word) {
      throw FlagError("--congestion-control",
                      "expected an algorithm name (cubic, reno, bbr, ...), got \"" +
                          s.congestion_control + "\"");
    }
  }
  if (vm.count("compare") != 0) {
    s.compare = vm["compare"].as<std::string>();
    if (!fs::is_directory(*s.compare)) {
      throw FlagError("--compare", "expected a directory of measured scenarios, got no such "
                                   "directory " + s.compare->string());
    }
  }
  if (vm.count("at-set-speed") != 0) {
    if (!s.compare) {
      throw FlagError("--at-set-speed", "expected --compare DIR with it, got none");
    }
    s.at_set_speed = true;
  }
  if (vm.count("out") == 0) {
    return s;
  }
  s.out = vm["out"].as<std::string>();
  if (s.out->empty()) {
    throw FlagError("--out", "expected a directory, got \"\"");
  }
  if (fs::exists(*s.out) && !fs::is_directory(*s.out)) {
    throw FlagError("--out", "expected a directory to (re)create, got the file " + s.out->string());
  }
  for (Topology t : s.topologies) {
    if (!fs::is_regular_file(shared_piece(s.shared, t))) {
      throw FlagError("--shared", "expected " + shared_piece(s.shared, t).string() +
                                      " (the shared piece the scenarios extend), got no such file");
    }
  }
  return s;
}

// ---- the machine --------------------------------------------------------------------------------

Tools find_tools(const Settings& s) {
  Tools t;
  const auto need = [](const char* name, const char* package) {
    std::string p = measure::find_program(name);
    if (p.empty()) {
      throw FlagError("skbsim measure", std::string("expected ") + name +
                                            " installed (Debian: apt-get install " + package +
                                            "), found none in PATH, /usr/sbin or /sbin");
    }
    return p;
  };
  t.ip = need("ip", "iproute2");
  t.ss = need("ss", "iproute2");
  t.ethtool = need("ethtool", "ethtool");
  t.sysctl = need("sysctl", "procps");
  t.iperf3 = need("iperf3", "iperf3");
  t.bpftrace = measure::find_program("bpftrace");
  if (s.trace == TraceMode::kOn && t.bpftrace.empty()) {
    throw FlagError("--trace",
                    "expected bpftrace installed for --trace on (Debian: apt-get "
                    "install bpftrace), found none");
  }
  return t;
}

measure::Machine describe_machine(ScratchDir& scratch) {
  measure::Machine m;
  struct utsname u {};
  if (::uname(&u) == 0) {
    m.kernel = u.release;
    m.kernel_version = u.version;
    m.arch = u.machine;
  }
  measure::parse_cpuinfo(read_text("/proc/cpuinfo"), m);
  m.cpus = static_cast<std::uint32_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  m.clk_tck = ::sysconf(_SC_CLK_TCK);
  if (const std::string sdv = measure::find_program("systemd-detect-virt"); !sdv.empty()) {
    m.systemd_detect_vm = first_line(measure::run({sdv, "--vm"}, scratch, milliseconds(10000)).out);
    m.systemd_detect_container =
        first_line(measure::run({sdv, "--container"}, scratch, milliseconds(10000)).out);
  }
  if (const std::string dmesg = measure::find_program("dmesg"); !dmesg.empty()) {
    m.kernel_hypervisor = measure::hypervisor_from_kernel_log(
        measure::run({dmesg}, scratch, milliseconds(10000)).out);
  }
  m.cpuid_signature = measure::read_cpuid_signature();
  m.dmi_vendor = first_line(read_text("/sys/class/dmi/id/sys_vendor"));
  m.dmi_product = first_line(read_text("/sys/class/dmi/id/product_name"));
  const std::string small = first_line(read_text("/sys/kernel/slab/skbuff_small_head/object_size"));
  if (!small.empty() && small.find_first_not_of("0123456789") == std::string::npos &&
      small.size() < 7) {
    m.small_head_bytes = static_cast<std::uint32_t>(std::stoul(small));
  }
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/sys/devices/system/cpu/vulnerabilities", ec)) {
    m.cpu_vulnerabilities.emplace_back(e.path().filename().string(),
                                       first_line(read_text(e.path().string())));
  }
  std::sort(m.cpu_vulnerabilities.begin(), m.cpu_vulnerabilities.end());
  m.kernel_parameters = measure::kernel_parameters_of_note(first_line(read_text("/proc/cmdline")));
  return m;
}

std::map<std::string, std::string> tool_versions(const Tools& t, ScratchDir& scratch) {
  std::map<std::string, std::string> v;
  const auto version = [&](const std::string& key, const std::vector<std::string>& argv) {
    const Completed c = measure::run(argv, scratch, milliseconds(10000));
    v[key] = first_line(c.out.empty() ? c.err : c.out);
  };
  version("iperf3", {t.iperf3, "--version"});
  version("ethtool", {t.ethtool, "--version"});
  version("ip", {t.ip, "-V"});
  if (!t.bpftrace.empty()) {
    version("bpftrace", {t.bpftrace, "--version"});
  }
  return v;
}

// A lock so that two measurements never run at once (they would spoil each other's figures and
// share the tracefs mount).
class RunLock {
 public:
  RunLock() {
    const fs::path dir = fs::is_directory("/run/lock") ? "/run/lock" : "/run";
    path_ = dir / "skbsim-measure.lock";
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw FlagError("skbsim measure",
                      "expected to create " + path_.string() + ", got " + std::strerror(errno));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw FlagError("skbsim measure",
                      "expected no other skbsim measure running, found one "
                      "holding " +
                          path_.string());
    }
  }
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

CpuTicks proc_stat() {
  return measure::parse_proc_stat(read_text("/proc/stat"));
}

// /proc/stat, /proc/softirqs and /proc/interrupts now; the last two are empty when unreadable.
measure::ActivitySnapshot activity_snapshot() {
  measure::ActivitySnapshot a;
  a.softirqs = measure::parse_proc_softirqs(read_text("/proc/softirqs"));
  a.interrupts = measure::parse_proc_interrupts(read_text("/proc/interrupts"));
  a.stat = proc_stat();
  return a;
}

// ---- one stream ---------------------------------------------------------------------------------

struct Session {
  Settings settings;
  Tools tools;
  ScratchDir scratch;
  MeasureContext ctx;
  std::optional<measure::Tracefs> tracefs;
  measure::Kallsyms syms;
  std::vector<std::string> tracepoints;  // present
  std::vector<std::string> missing_tracepoints;
  std::vector<std::string> skb_caches;  // slab caches traced (sk_buff, its small head)
  std::string trace_unavailable;        // why not, "" when tracing can be tried
  std::string trace_refused;            // set when bpftrace refused once: not tried again
  fs::path program;                     // the bpftrace program file: all but the allocations
  fs::path alloc_program;     // the allocation tracepoints' program, empty when there are none
  std::string alloc_refused;  // why the allocations' run was refused, "" when it was not
  bool allocations_traced = false;      // an allocation probe is in one of the programs
  std::vector<std::uint32_t> all_cpus;  // 0 .. machine.cpus − 1, for the speed probe
  measure::SpeedYardstick best_speed;   // the fastest the probes have seen the machine
};

// bpftrace could not trace: its reason.
struct TraceRefused {
  std::string reason;
};

std::string bpftrace_reason(const Process& p) {
  std::istringstream in(p.err());
  std::string line;
  std::string reason;
  while (std::getline(in, line)) {
    line = trimmed(line);
    if (line.empty() || line.find("RLIMIT_MEMLOCK") != std::string::npos ||
        line.find("__BPFTRACE_NOTIFY_PROBES_ATTACHED") != std::string::npos) {
      continue;  // bpftrace 0.17 warns about it on every start, harmlessly
    }
    reason += (reason.empty() ? "" : " ") + line;
    if (reason.size() > 200) {
      break;
    }
  }
  return reason.empty() ? "bpftrace exited with status " + std::to_string(p.status().value_or(-1))
                        : "bpftrace: " + reason;
}

// Starts bpftrace and waits until every probe is attached: bpftrace prints its "attached_probes"
// line before attaching, so we ask for the line its own test harness waits for
// (__BPFTRACE_NOTIFY_PROBES_ATTACHED, printed once all probes are attached). A bpftrace without it
// gets 30 s after "attached_probes", with a warning.
// `reader`: the iperf3 server's pid, the program's $1 (its wake-up probes follow it).
Process start_tracer(Session& ss, const fs::path& program, pid_t reader) {
  Process bt = Process::start(
      {ss.tools.bpftrace, "-f", "json", program.string(), std::to_string(reader)}, ss.scratch,
      {"BPFTRACE_MAP_KEYS_MAX=65536", "__BPFTRACE_NOTIFY_PROBES_ATTACHED=1"});
  const auto start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> announced;
  while (true) {
    const std::string out = bt.out();
    const std::string err = bt.err();
    if (out.find("__BPFTRACE_NOTIFY_PROBES_ATTACHED") != std::string::npos ||
        err.find("__BPFTRACE_NOTIFY_PROBES_ATTACHED") != std::string::npos) {
      return bt;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!announced && out.find("\"attached_probes\"") != std::string::npos) {
      announced = now;
    }
    if (announced && now - *announced > std::chrono::seconds(30)) {
      std::cerr << "skbsim measure: warning: bpftrace did not confirm that every probe is "
                   "attached; tracing from 30 s after it began\n";
      return bt;
    }
    if (!bt.running()) {
      throw TraceRefused{bpftrace_reason(bt)};
    }
    if (now - start > std::chrono::seconds(180)) {
      bt.stop();
      throw TraceRefused{"bpftrace did not attach its probes within 180 s"};
    }
    measure::interruptible_sleep(milliseconds(20));
  }
}

// ss in the server's namespace on the test's port: `ss -N <server> <options...> sport = :<port>`.
std::vector<std::string> server_ss(Lab& lab, Session& ss, std::vector<std::string> options) {
  std::vector<std::string> argv = {ss.tools.ss, "-N", lab.ns(Role::kServer)};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {"sport", "=", std::string(":") + kPort});
  return argv;
}

// The stream's sk_rcvbuf at the server now (measure::parse_ss_rcvbuf); nullopt when ss fails,
// takes more than 2 s or shows none: the run goes on without it.
std::optional<std::int64_t> read_server_rcvbuf(Lab& lab, Session& ss) {
  try {
    const Completed c = measure::run(server_ss(lab, ss, {"-Htmi", "state", "established"}),
                                     ss.scratch, milliseconds(2000));
    return c.exit_code == 0 ? measure::parse_ss_rcvbuf(c.out) : std::nullopt;
  } catch (const MeasureError&) {
    return std::nullopt;
  }
}

void wait_listening(Lab& lab, Session& ss, Process& server) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    const Completed c = measure::run(server_ss(lab, ss, {"-Hltn"}), ss.scratch);
    if (c.exit_code == 0 && !trimmed(c.out).empty()) {
      return;
    }
    if (!server.running()) {
      throw MeasureError("iperf3 server: exited before listening: " + server.first_error_line());
    }
    if (std::chrono::steady_clock::now() > until) {
      throw MeasureError("iperf3 server: not listening on port " + std::string(kPort) +
                         " within 10 s");
    }
    measure::interruptible_sleep(milliseconds(20));
  }
}

double number_at(const nlohmann::json& j, const nlohmann::json::json_pointer& p) {
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

// A traced run's program, and where its counts go.
struct Tracing {
  const fs::path& program;
  std::optional<measure::TraceCounts>& counts;
};

// `before`: the speed probe taken just before (wait_for_normal_speed's last); `traced`: the
// program to trace the run with, none for an untraced run.
RunFigures stream(Lab& lab, Session& ss, const Configuration& cfg, measure::SpeedProbe before,
                  const Tracing* traced) {
  const Tools& t = ss.tools;
  std::vector<std::string> server = lab.in(Role::kServer);
  server.insert(server.end(), {t.iperf3, "-s", "-1", "-p", kPort, "-J"});
  if (ss.ctx.server_cpu >= 0) {
    server.insert(server.end(), {"-A", std::to_string(ss.ctx.server_cpu)});
  }
  Process srv = Process::start(server, ss.scratch);
  wait_listening(lab, ss, srv);

  // No segment flows before the client starts, so the counters are read before bpftrace starts
  // and after it is told to stop: the `ip netns exec cat` that reads them stays out of the traced
  // run's counts and profile.
  measure::RunSpeed speed;
  speed.before = std::move(before);
  const auto client0 = lab.tcp_counters(Role::kClient);
  const auto server0 = lab.tcp_counters(Role::kServer);
  std::optional<Process> tracer;
  if (traced != nullptr) {
    tracer.emplace(start_tracer(ss, traced->program, srv.pid()));
  }

  std::vector<std::string> client = lab.in(Role::kClient);
  client.insert(client.end(), {t.iperf3, "-c", lab.plan().server_address, "-p", kPort, "-t",
                               std::to_string(ss.settings.duration_s), "-J"});
  if (ss.ctx.client_cpu >= 0) {
    client.insert(client.end(), {"-A", std::to_string(ss.ctx.client_cpu)});
  }
  if (cfg.rate_mbps) {
    std::ostringstream rate;
    rate << *cfg.rate_mbps << "M";
    client.insert(client.end(), {"-b", rate.str()});
  }
  // TCP_CONGESTION on the test's sockets (both ends: the client passes it to the server): no
  // sysctl to change, and as root any algorithm the kernel has or can load. A namespace's
  // default can only be one of tcp_allowed_congestion_control, which is the root namespace's.
  // iperf3 sets it once connected; the Lab's routes have given the sockets the same algorithm
  // from their SYN on (Lab::pin_congestion_control), so this changes nothing but is kept for
  // iperf3's report of it.
  client.insert(client.end(), {"-C", ss.settings.congestion_control});
  const measure::ActivitySnapshot snap0 = activity_snapshot();
  const auto t0 = std::chrono::steady_clock::now();
  Process cl = Process::start(client, ss.scratch);
  // Four fifths into an untraced stream, the server socket's sk_rcvbuf (one ss call, a few
  // milliseconds of CPU in the run's window): the buffer autotuning (or tcp_clamp_window) has
  // left it with, which the scenario's flow takes as its rcvbuf (flow_json). Not in the traced
  // run, whose buffer nothing uses: its counts and profile stay without ss.
  const auto probe_at = milliseconds(ss.settings.duration_s * 800);
  const auto deadline = t0 + std::chrono::seconds(ss.settings.duration_s + 30);
  std::optional<int> status;
  std::optional<std::int64_t> server_rcvbuf;
  if (traced == nullptr) {
    status = cl.wait_for(probe_at);
    if (!status) {
      server_rcvbuf = read_server_rcvbuf(lab, ss);
    }
  }
  if (!status) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    status = cl.wait_for(std::max(left, milliseconds(0)));
  }
  const auto t1 = std::chrono::steady_clock::now();
  const measure::ActivitySnapshot snap1 = activity_snapshot();
  if (!status) {
    throw MeasureError("iperf3 client: no exit within " +
                       std::to_string(ss.settings.duration_s + 30) + " s");
  }
  if (tracer) {
    tracer->signal(SIGINT);
  }
  const auto client1 = lab.tcp_counters(Role::kClient);
  const auto server1 = lab.tcp_counters(Role::kServer);

  if (tracer) {
    // bpftrace prints its maps and exits on SIGINT (a second after 60 s, for one that slept on).
    // A tracer that fails here costs the traced run only: the untraced runs stand.
    const auto resend = [] {
      std::cerr << "skbsim measure: bpftrace did not exit 60 s after SIGINT: sending another\n";
    };
    if (!measure::wait_signalling_again(*tracer, SIGINT, std::chrono::seconds(60),
                                        std::chrono::seconds(60), resend)) {
      throw TraceRefused{"bpftrace did not print its maps within 120 s of SIGINT (two sent)"};
    }
    const std::string out = tracer->out();
    if (!measure::printed_maps(out)) {
      throw TraceRefused{"bpftrace printed no maps: " + bpftrace_reason(*tracer)};
    }
    try {
      traced->counts = measure::parse_bpftrace_output(out, ss.syms);
    } catch (const MeasureError& e) {
      throw TraceRefused{e.what()};
    }
  }
  if (!srv.wait_for(std::chrono::seconds(10))) {
    srv.stop();
  }
  speed.after = measure::probe_speed(ss.all_cpus);

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(cl.out());
  } catch (const nlohmann::json::exception&) {
    throw MeasureError("iperf3 client: expected its JSON report, got: " + cl.first_error_line());
  }
  if (j.contains("error")) {
    const std::string error =
        j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    if (error.find("TCP_CONGESTION") != std::string::npos) {
      throw measure::refused_congestion_control(ss.settings.congestion_control, "iperf3: " + error);
    }
    throw MeasureError("iperf3 client: " + j["error"].dump());
  }
  if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    throw MeasureError("iperf3 client: exit status " + std::to_string(*status));
  }
  using P = nlohmann::json::json_pointer;
  RunFigures f;
  f.wall_s = std::chrono::duration<double>(t1 - t0).count();
  f.bytes_sent = static_cast<std::uint64_t>(number_at(j, P("/end/sum_sent/bytes")));
  f.bytes_received = static_cast<std::uint64_t>(number_at(j, P("/end/sum_received/bytes")));
  f.stream_s = number_at(j, P("/end/sum_received/seconds"));
  f.throughput_mbps = number_at(j, P("/end/sum_received/bits_per_second")) / 1e6;
  f.sender_throughput_mbps = number_at(j, P("/end/sum_sent/bits_per_second")) / 1e6;
  f.retransmits = static_cast<std::int64_t>(number_at(j, P("/end/sum_sent/retransmits")));
  f.mss = static_cast<int>(number_at(j, P("/start/tcp_mss_default")));
  for (auto [field, key] : {std::pair{&f.sender_congestion, "/end/sender_tcp_congestion"},
                            std::pair{&f.receiver_congestion, "/end/receiver_tcp_congestion"}}) {
    if (j.contains(P(key)) && j.at(P(key)).is_string()) {
      *field = j.at(P(key)).get<std::string>();
    }
  }
  if (j.contains(P("/end/cpu_utilization_percent"))) {
    f.iperf3_cpu = j.at(P("/end/cpu_utilization_percent"));
  }
  f.speed = std::move(speed);
  f.cpu = measure::cpu_usage(snap0.stat, snap1.stat, f.wall_s, ss.ctx.machine.clk_tck);
  f.activity = measure::activity(snap0, snap1, f.wall_s, ss.ctx.machine.clk_tck);
  const double kb = static_cast<double>(f.bytes_received) / 1024.0;
  if (kb <= 0) {
    throw MeasureError("iperf3 client: the server received nothing");
  }
  f.service_demand_us_per_kb = f.cpu.non_idle_us / kb;
  f.service_demand_ticks_us_per_kb = f.cpu.ticks_busy_us / kb;
  const auto delta = [](const auto& a, const auto& b, const char* k) {
    const auto ia = a.find(k);
    const auto ib = b.find(k);
    return ia == a.end() || ib == b.end() ? std::int64_t{0} : ib->second - ia->second;
  };
  f.client_out_segs = delta(client0.tcp, client1.tcp, "OutSegs");
  f.client_retrans_segs = delta(client0.tcp, client1.tcp, "RetransSegs");
  f.server_in_segs = delta(server0.tcp, server1.tcp, "InSegs");
  f.server_out_segs = delta(server0.tcp, server1.tcp, "OutSegs");
  f.server_rcvbuf = server_rcvbuf;
  // The recorded TcpExt counters that both snapshots have.
  const auto ext_deltas = [&delta](const measure::TcpCounters& a, const measure::TcpCounters& b) {
    std::map<std::string, std::int64_t> out;
    for (const char* name : measure::kRecordedTcpExt) {
      if (a.ext.count(name) != 0 && b.ext.count(name) != 0) {
        out[name] = delta(a.ext, b.ext, name);
      }
    }
    return out;
  };
  f.client_tcpext = ext_deltas(client0, client1);
  f.server_tcpext = ext_deltas(server0, server1);
  return f;
}

std::string run_line(const Configuration& cfg, const std::string& which, const RunFigures& f) {
  std::ostringstream s;
  s << std::fixed << "skbsim measure: " << cfg.name() << " " << which << ": "
    << std::setprecision(1) << f.throughput_mbps << " Mbit/s, CPU " << f.cpu.non_idle_pct
    << "% (ticks " << f.cpu.ticks_busy_pct << "%), " << std::setprecision(4)
    << f.service_demand_us_per_kb << " us/KB, " << f.client_out_segs << " segments";
  const double segs = static_cast<double>(std::max<std::int64_t>(1, f.client_out_segs));
  if (f.activity.interrupts) {
    s << ", " << static_cast<double>(f.activity.wakeup_ipis()) / segs << " IPI/seg";
  }
  if (f.activity.context_switches) {
    s << ", " << static_cast<double>(*f.activity.context_switches) / segs << " cs/seg";
  }
  s << "\n";
  return s.str();
}

// ---- one configuration --------------------------------------------------------------------------

// Whether a run counts: its speed probes against the best seen (measure_speed.hpp). An unsteady
// run is set aside in `r.unsteady_runs` while `retries` lasts and redone; after that it counts,
// marked. Returns true when the run counts. A traced run is judged by its `before` probe only:
// the one after it runs while the kernel is still tearing down bpftrace's programs and perf
// events, and reads several times slower.
bool keep_run(Session& ss, ConfigResult& r, RunFigures& f, int& retries, const std::string& which,
              bool traced) {
  if (f.speed) {
    ss.best_speed.add(f.speed->before);
    measure::RunSpeed judged = *f.speed;
    if (traced) {
      judged.after = {};
    } else {
      ss.best_speed.add(f.speed->after);
    }
    f.unsteady = measure::unsteady_reason(judged, ss.best_speed);
  }
  std::cerr << run_line(r.config, which, f);
  if (f.unsteady.empty()) {
    return true;
  }
  if (retries > 0) {
    --retries;
    std::cerr << "skbsim measure: " << r.config.name() << " " << which
              << ": the machine ran slow (" << f.unsteady << "): set aside, run again\n";
    r.unsteady_runs.push_back(std::move(f));
    return false;
  }
  std::cerr << "skbsim measure: " << r.config.name() << " " << which << ": the machine ran slow ("
            << f.unsteady << ") and no retry is left: it counts, marked unsteady\n";
  return true;
}

// Before each run: probes every kSettleStep until one is within the slacks of the best seen (the
// machine is at its normal speed), for at most kSettleLimit; then the run starts either way. The
// wait is added to `r.settle_wait_s`. Returns the last probe: the run's `before`. With
// --unsteady-retries 0 (every run counts, as --smoke has it) it probes once and does not wait.
measure::SpeedProbe wait_for_normal_speed(Session& ss, ConfigResult& r) {
  if (ss.settings.unsteady_retries == 0) {
    measure::SpeedProbe p = measure::probe_speed(ss.all_cpus);
    ss.best_speed.add(p);
    return p;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  measure::SpeedProbe p;
  while (true) {
    p = measure::probe_speed(ss.all_cpus);
    ss.best_speed.add(p);
    why = measure::unsteady_reason({.before = p, .after = {}}, ss.best_speed);
    if (why.empty() || std::chrono::steady_clock::now() - t0 > kSettleLimit) {
      break;
    }
    measure::interruptible_sleep(kSettleStep);
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.settle_wait_s += waited;
  if (!why.empty()) {
    std::cerr << "skbsim measure: " << r.config.name() << ": still slow after "
              << measure::rounded(waited, 0) << " s (" << why << "): running anyway\n";
  } else if (waited > 1) {
    std::cerr << "skbsim measure: " << r.config.name() << ": waited "
              << measure::rounded(waited, 1) << " s for the machine's normal speed\n";
  }
  return p;
}

// One run that counts: waits for the machine's normal speed, runs, and redoes a slow run while
// `retries` lasts.
void counted_run(Lab& lab, Session& ss, ConfigResult& r, int& retries) {
  if (r.date.empty()) {
    r.date = utc_now();
  }
  const std::string which =
      "run " + std::to_string(r.runs.size() + 1) + "/" + std::to_string(ss.settings.runs);
  while (true) {
    RunFigures f = stream(lab, ss, r.config, wait_for_normal_speed(ss, r), nullptr);
    if (keep_run(ss, r, f, retries, which, false)) {
      r.runs.push_back(std::move(f));
      return;
    }
  }
}

// The allocations' traced run could not be made: says so, and drops their program for the rest of
// the campaign (with --trace on, fails as a refused main run does).
void refused_allocations(Session& ss, const std::string& reason) {
  const std::string why = "allocations' program: " + reason;
  if (ss.settings.trace == TraceMode::kOn) {
    throw MeasureError("tracing refused: " + why);
  }
  std::cerr << "skbsim measure: tracing refused for the allocations, counting the rest: " << why
            << "\n";
  ss.alloc_refused = why;
  ss.alloc_program.clear();
}

// One traced run with `program`, redone while the machine runs slow and `retries` lasts.
RunFigures traced_stream(Lab& lab, Session& ss, ConfigResult& r, int& retries,
                         const fs::path& program, const std::string& which,
                         std::optional<measure::TraceCounts>& counts) {
  const Tracing tracing{.program = program, .counts = counts};
  RunFigures f = stream(lab, ss, r.config, wait_for_normal_speed(ss, r), &tracing);
  while (!keep_run(ss, r, f, retries, which, true)) {
    counts.reset();
    f = stream(lab, ss, r.config, wait_for_normal_speed(ss, r), &tracing);
  }
  return f;
}

// The allocations' stacks in a traced run of their own (is_allocation_tracepoint), merged into
// `counts`, the other run's of `segments` segments, as counted per segment in that run. Refused,
// `counts` stands without them, and later configurations are not traced for them again.
std::optional<RunFigures> allocations_run(Lab& lab, Session& ss, ConfigResult& r, int& retries,
                                          measure::TraceCounts& counts, std::int64_t segments) {
  std::string refused;
  try {
    std::optional<measure::TraceCounts> allocs;
    RunFigures a =
        traced_stream(lab, ss, r, retries, ss.alloc_program, "traced run (allocations)", allocs);
    try {
      measure::merge_allocation_counts(counts, *allocs, segments, a.client_out_segs);
      return a;
    } catch (const MeasureError& e) {  // a run without segments counted
      refused = e.what();
    }
  } catch (const TraceRefused& e) {
    refused = e.reason;
  }
  refused_allocations(ss, refused);
  return std::nullopt;
}

// The traced run, or why there is none.
void traced_run(Lab& lab, Session& ss, ConfigResult& r, int& retries) {
  r.trace.missing_tracepoints = ss.missing_tracepoints;
  if (ss.settings.trace == TraceMode::kOff) {
    r.trace.status = "off";
    r.trace.reason = "--trace off";
    return;
  }
  if (!ss.trace_unavailable.empty()) {
    r.trace.status = "unavailable";
    r.trace.reason = ss.trace_unavailable;
    return;
  }
  if (!ss.trace_refused.empty()) {
    r.trace.status = "refused";
    r.trace.reason = ss.trace_refused;
    return;
  }
  try {
    std::optional<measure::TraceCounts> counts;
    RunFigures f = traced_stream(lab, ss, r, retries, ss.program, "traced run", counts);
    std::optional<RunFigures> alloc_run;
    if (!ss.alloc_program.empty()) {
      alloc_run = allocations_run(lab, ss, r, retries, *counts, f.client_out_segs);
    }
    // In the one program or in the second run's; not when refused, now or for an earlier
    // configuration.
    counts->allocations_counted = ss.allocations_traced && ss.alloc_refused.empty();
    if (!ss.alloc_refused.empty()) {
      r.trace.allocations_refused = ss.alloc_refused;
    }
    r.trace.status = "ok";
    r.trace.slab_caches = ss.skb_caches;
    r.trace.slab_merges = measure::skb_cache_merges();
    r.trace.run = std::move(f);
    r.trace.alloc_run = std::move(alloc_run);
    r.trace.counts = std::move(counts);
  } catch (const TraceRefused& e) {
    if (ss.settings.trace == TraceMode::kOn) {
      throw MeasureError("tracing refused: " + e.reason);
    }
    std::cerr << "skbsim measure: tracing refused, measuring the rest: " << e.reason << "\n";
    ss.trace_refused = e.reason;
    r.trace.status = "refused";
    r.trace.reason = e.reason;
  }
}

void prepare_tracing(Session& ss) {
  if (ss.settings.trace == TraceMode::kOff) {
    return;
  }
  if (ss.tools.bpftrace.empty()) {
    ss.trace_unavailable = "bpftrace not installed (Debian: apt-get install bpftrace)";
    return;
  }
  ss.tracefs.emplace();
  if (!ss.tracefs->available()) {
    ss.trace_unavailable = ss.tracefs->reason();
  } else {
    for (const std::string& tp : measure::wanted_tracepoints()) {
      (ss.tracefs->has(tp) ? ss.tracepoints : ss.missing_tracepoints).push_back(tp);
    }
    if (ss.tracepoints.empty()) {
      ss.trace_unavailable = "none of the tracepoints exists in " + ss.tracefs->root().string();
    }
  }
  if (!ss.trace_unavailable.empty()) {
    if (ss.settings.trace == TraceMode::kOn) {
      throw MeasureError("tracing unavailable: " + ss.trace_unavailable);
    }
    std::cerr << "skbsim measure: tracing unavailable, measuring the rest: " << ss.trace_unavailable
              << "\n";
    return;
  }
  ss.syms = measure::Kallsyms::load();
  ss.skb_caches = measure::skb_cache_names();
  const measure::TracePrograms programs =
      measure::bpftrace_programs(ss.tracepoints, kDevicePrefix, ss.skb_caches,
                                 measure::profile_ip_register(ss.ctx.machine.arch));
  ss.allocations_traced = programs.counts_allocations;
  ss.program = ss.scratch.path() / "skbsim-measure.bt";
  std::ofstream(ss.program) << programs.main;
  if (!programs.allocations.empty()) {
    ss.alloc_program = ss.scratch.path() / "skbsim-measure-allocations.bt";
    std::ofstream(ss.alloc_program) << programs.allocations;
  }
}

// The scenario as `skbsim validate` will read it: "" when accepted, else the reader's line.
std::string check_scenario(Session& ss, const nlohmann::ordered_json& scenario,
                           const fs::path& shared_piece, const std::string& name) {
  nlohmann::ordered_json copy = scenario;
  copy["extends"] = fs::absolute(shared_piece).string();
  if (ss.settings.preset) {
    copy["preset"] = fs::absolute(*ss.settings.preset).string();
  }
  const fs::path file = ss.scratch.path() / name;
  std::ofstream(file) << copy.dump(2) << "\n";
  try {
    (void)load_scenario(file.string());
  } catch (const InputError& e) {
    std::string what = e.what();
    const std::string prefix = file.string() + ": ";
    if (what.rfind(prefix, 0) == 0) {
      what = what.substr(prefix.size());
    }
    return what;
  }
  return "";
}

// Refuses to start unless root and unless the namespaces it would create are free; notes the
// skbsim-* namespaces an earlier run killed without clean-up left.
void check_machine() {
  if (::geteuid() != 0) {
    throw FlagError("skbsim measure",
                    "expected to run as root (network namespaces, ethtool, bpftrace), got uid " +
                        std::to_string(::geteuid()));
  }
  if (measure::in_chroot()) {
    throw FlagError("skbsim measure",
                    "expected a machine of its own, got a chroot or a root without /proc (network "
                    "namespaces cannot be entered from one; run it on the host)");
  }
  const int pid = static_cast<int>(::getpid());
  for (Role r : {Role::kClient, Role::kHost, Role::kServer}) {
    const std::string n = measure::namespace_name(pid, r);
    if (fs::exists(fs::path("/run/netns") / n)) {
      throw FlagError("skbsim measure",
                      "expected no namespace " + n + ", found one (ip netns del " + n + ")");
    }
  }
  for (const std::string& n : measure::existing_skbsim_namespaces()) {
    std::cerr << "skbsim measure: note: namespace " << n
              << " exists, left by an earlier run killed without clean-up? (ip netns del " << n
              << ")\n";
  }
}

// The machine's own load over one second, before we add ours.
void background_load(Session& ss) {
  const CpuTicks a = proc_stat();
  const auto t0 = std::chrono::steady_clock::now();
  measure::interruptible_sleep(milliseconds(1000));
  const CpuTicks b = proc_stat();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const measure::CpuUsage u = measure::cpu_usage(a, b, wall, ss.ctx.machine.clk_tck);
  ss.ctx.background_non_idle_pct = u.non_idle_pct;
  ss.ctx.background_wall_s = wall;
  if (u.non_idle_pct > 5) {
    std::cerr << "skbsim measure: warning: the machine was " << measure::rounded(u.non_idle_pct, 1)
              << "% busy before the first run; every CPU figure includes that load\n";
  }
}

// The speed probe a few times before the first run, so the first run is judged against more than
// its own probes.
void first_yardstick(Session& ss) {
  for (int i = 0; i < kFirstProbes; ++i) {
    ss.best_speed.add(measure::probe_speed(ss.all_cpus));
    measure::interruptible_sleep(milliseconds(100));
  }
  ss.ctx.first_speed = ss.best_speed;
}

// The sysctls a configuration's files record, by "<role>/<name>".
std::map<std::string, std::string> recorded_sysctls(Lab& lab) {
  std::map<std::string, std::string> out;
  const auto& used = lab.plan().namespaces;
  for (const auto& [role, key] : std::vector<std::pair<Role, std::string>>{
           {Role::kClient, "net.ipv4.tcp_wmem"},
           {Role::kClient, "net.ipv4.tcp_congestion_control"},
           {Role::kServer, "net.ipv4.tcp_rmem"},
           {Role::kServer, "net.ipv4.tcp_backlog_ack_defer"},
           {Role::kHost, "net.ipv4.ip_forward"},
           {Role::kHost, "net.bridge.bridge-nf-call-iptables"}}) {
    if (std::find(used.begin(), used.end(), role) != used.end()) {
      const std::string v = lab.sysctl(role, key);
      out[std::string(measure::role_name(role)) + "/" + key] = v.empty() ? "(absent)" : v;
    }
  }
  if (!lab.bridge_nf_default().empty()) {
    out["host/net.bridge.bridge-nf-call-iptables before (set to 0)"] = lab.bridge_nf_default();
  }
  // Global, read (not set) in the root namespace: whether a reader's CPU hands the skbs it has
  // copied back to the CPU that allocated them (skb_attempt_defer_free; 0 frees them at once).
  const std::string defer = first_line(read_text("/proc/sys/net/core/skb_defer_max"));
  out["net.core.skb_defer_max"] = defer.empty() ? "(absent)" : defer;
  return out;
}

// Every configuration, in a fresh Lab per topology and variant with the rates in it. Grouped: all
// runs of one Lab's configurations, then the next. Interleaved: one run of every configuration per
// pass, --runs passes (a Lab made again for each), so each configuration's runs are spread over
// the whole invocation and a slow stretch of the machine touches one of them, not all. The traced
// runs come last, one Lab at a time.
std::vector<ConfigResult> measure_all(Session& ss) {
  struct Group {
    Topology topo;
    Variant variant;
    std::size_t first = 0;  // its configurations in `results`, one per rate
  };
  std::vector<Group> groups;
  std::vector<ConfigResult> results;
  for (Topology topo : ss.settings.topologies) {
    for (Variant variant : ss.settings.variants) {
      groups.push_back({topo, variant, results.size()});
      for (const std::optional<double>& rate : ss.settings.rates) {
        results.emplace_back().config = {topo, variant, rate};
      }
    }
  }
  std::vector<int> retries(results.size(), ss.settings.unsteady_retries);
  const std::size_t rates = ss.settings.rates.size();
  // Runs `fn(lab, config index)` for each configuration of group `g` in a fresh Lab.
  const auto in_lab = [&](const Group& g, const auto& fn) {
    measure::NetPlan plan = measure::plan_for(g.topo);
    plan.congestion_control = ss.settings.congestion_control;
    Lab lab(std::move(plan), ss.tools, ss.scratch);
    lab.apply(g.variant);
    if (const double waited = lab.wait_until_connected(); waited > 0.5) {
      std::cerr << "skbsim measure: " << results[g.first].config.name() << ": the path answered after "
                << measure::rounded(waited, 1) << " s\n";
    }
    if (results[g.first].features.empty()) {
      const auto features = lab.features();
      const auto sysctls = recorded_sysctls(lab);
      for (std::size_t i = g.first; i < g.first + rates; ++i) {
        results[i].features = features;
        results[i].sysctls = sysctls;
      }
    }
    for (std::size_t i = g.first; i < g.first + rates; ++i) {
      fn(lab, i);
    }
  };
  const auto one_run = [&](Lab& lab, std::size_t i) {
    counted_run(lab, ss, results[i], retries[i]);
  };
  if (ss.settings.interleave) {
    for (int pass = 0; pass < ss.settings.runs; ++pass) {
      for (const Group& g : groups) {
        in_lab(g, one_run);
      }
    }
  }
  for (const Group& g : groups) {
    in_lab(g, [&](Lab& lab, std::size_t i) {
      while (std::ssize(results[i].runs) < ss.settings.runs) {
        one_run(lab, i);
      }
      traced_run(lab, ss, results[i], retries[i]);
    });
  }
  return results;
}

std::string summary_of(const Session& ss, const std::vector<ConfigResult>& results) {
  std::string summary = "skbsim measure on " + measure::machine_line(ss.ctx.machine) + "\n";
  summary += "runs of " + std::to_string(ss.settings.duration_s) +
             " s; cpu% = non-idle time of all CPUs, ticks% = tick-sampled busy fields; us/KB = "
             "non-idle service demand (median, MAD); line ns = the speed probe's ns per cache line "
             "right after a 1 ms sleep (the vCPU halted)\n";
  summary += measure::summary_header();
  for (const ConfigResult& r : results) {
    summary += measure::summary_row(r);
  }
  for (const ConfigResult& r : results) {
    summary += measure::trace_summary(r);
  }
  return summary;
}

// `file` as a path relative to the directory `dir` (which need not exist yet).
std::string relative_to(const fs::path& file, const fs::path& dir) {
  return fs::relative(fs::weakly_canonical(fs::absolute(file)),
                      fs::weakly_canonical(fs::absolute(dir)))
      .generic_string();
}

// Writes DIR/<config>.json, DIR/measurements/<config>.json and DIR/summary.txt, all or nothing;
// adds to `summary` what it found wrong with a scenario and what it wrote.
void write_outputs(Session& ss, const std::vector<ConfigResult>& results, const fs::path& out,
                   std::string& summary) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const ConfigResult& r : results) {
    const std::string name = r.config.name();
    const fs::path piece = shared_piece(ss.settings.shared, r.config.topology);
    const std::string meas_file = "measurements/" + name + ".json";
    nlohmann::ordered_json scenario =
        measure::scenario_json(ss.ctx, r, relative_to(piece, out), meas_file);
    if (ss.settings.preset) {
      scenario["preset"] = relative_to(*ss.settings.preset, out);
    }
    const std::string problem = check_scenario(ss, scenario, piece, name + ".json");
    if (!problem.empty()) {
      std::cerr << "skbsim measure: warning: " << name
                << ".json is not accepted by this skbsim's scenario reader (written anyway): "
                << problem << "\n";
      summary += "  " + name + ".json: not accepted by this skbsim: " + problem + "\n";
    }
    files.emplace_back(name + ".json", scenario.dump(2) + "\n");
    files.emplace_back(meas_file, measure::measurement_json(ss.ctx, r).dump(2) + "\n");
  }
  files.emplace_back("summary.txt", summary);
  write_atomically(out, files);
  summary += "wrote " + out.string() + ": " + std::to_string(results.size()) +
             " scenarios, their measurements/ and summary.txt\n";
}

// --compare: a set is reproduced when every median is within this of the committed one.
constexpr double kReproduceTolerancePct = 15;

int measure_main(const Settings& settings, const std::string& command) {
  check_machine();
  Session ss;
  ss.settings = settings;
  ss.tools = find_tools(settings);
  const RunLock lock;
  ss.ctx.command = command;
  ss.ctx.route_congestion_control = ss.settings.congestion_control;
  if (settings.out) {
    fs::path o = fs::absolute(*settings.out).lexically_normal();
    if (o.filename().empty()) {
      o = o.parent_path();  // "DIR/"
    }
    if (!o.filename().empty()) {
      ss.ctx.set_name = o.filename().string();
    }
  }
  ss.ctx.duration_s = settings.duration_s;
  ss.ctx.runs = settings.runs;
  ss.ctx.unsteady_retries = settings.unsteady_retries;
  ss.ctx.order = settings.interleave ? "interleaved" : "grouped";
  ss.ctx.machine = describe_machine(ss.scratch);
  ss.ctx.tool_versions = tool_versions(ss.tools, ss.scratch);
  for (std::uint32_t cpu = 0; cpu < ss.ctx.machine.cpus; ++cpu) {
    ss.all_cpus.push_back(cpu);
  }
  if (ss.ctx.machine.cpus >= 2) {
    ss.ctx.client_cpu = 0;
    ss.ctx.server_cpu = 1;
  }
  std::optional<fs::path> compare_dir;
  if (settings.compare) {
    try {
      compare_dir = measure::resolve_compare_dir(*settings.compare, ss.ctx.machine);
    } catch (const std::runtime_error& e) {
      throw FlagError("--compare", e.what());
    }
  }
  prepare_tracing(ss);
  background_load(ss);
  first_yardstick(ss);
  const std::vector<ConfigResult> results = measure_all(ss);
  ss.ctx.best_speed = ss.best_speed;
  measure::throw_if_interrupted();
  std::string summary = summary_of(ss, results);
  bool reproduced = true;
  if (compare_dir) {
    summary += measure::compare_text(results, *compare_dir, ss.ctx.machine, kReproduceTolerancePct,
                                     reproduced, settings.at_set_speed);
  }
  if (settings.out) {
    write_outputs(ss, results, *settings.out, summary);
  } else {
    summary += "(no --out: nothing written)\n";
  }
  std::cout << summary << std::flush;
  return reproduced ? 0 : 1;
}

}  // namespace

int run_measure(const std::vector<std::string>& args) {
  const std::string usage =
      "skbsim measure [--topology direct|forward|bridge ...] [--variant "
      "on|off|tso-off|sg-off|csum-off ...] [--runs N] [--duration S] [--rate MBPS|unlimited ...] "
      "[--out DIR] [--trace auto|on|off] [--shared DIR] [--preset FILE] [--smoke] "
      "[--order interleaved|grouped] [--unsteady-retries N] [--compare DIR [--at-set-speed]]";
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "topology", po::value<std::vector<std::string>>()->composing()->multitoken(),
      "direct, forward, bridge (default: all three)")(
      "variant", po::value<std::vector<std::string>>()->composing()->multitoken(),
      "on, off, tso-off, sg-off, csum-off (default: all five)")(
      "runs", po::value<std::string>(), "untraced runs per configuration, 1..1000 (default 5)")(
      "duration", po::value<std::string>(), "seconds per run, 1..3600 (default 10)")(
      "rate", po::value<std::vector<std::string>>()->composing()->multitoken(),
      "unlimited or Mbit/s for iperf3 -b (default: unlimited 1000)")(
      "out,o", po::value<std::string>(),
      "write DIR/<config>.json scenarios, DIR/measurements/, DIR/summary.txt (DIR replaced)")(
      "trace", po::value<std::string>(),
      "auto (trace when possible), on (fail when not), off (default auto)")(
      "shared", po::value<std::string>(),
      "the directory with measure-<topology>.json, the pieces the scenarios extend (default "
      "scenarios/shared)")("preset", po::value<std::string>(),
                           "the cost preset the scenarios name (default: the shared piece's, "
                           "scenarios/models/modern-2core.json)")(
      "smoke", "defaults for a quick check: direct, on, 1 run of 1 s, unlimited")(
      "order", po::value<std::string>(),
      "interleaved (one run of every configuration per pass, --runs passes) or grouped (all runs "
      "of one configuration, then the next); default interleaved")(
      "unsteady-retries", po::value<std::string>(),
      "runs per configuration to redo when the speed probe says the machine ran slow, 0..1000 "
      "(default: as many as --runs; --smoke 0); 0 also runs without waiting for normal speed")(
      "compare", po::value<std::string>(),
      "compare the medians with a committed set's references: DIR itself when it is a set "
      "(it has measurements/), else the one set under DIR (scenarios/measured) measured on this "
      "machine's class; says when the machines differ; exit 1 when a median is more than 15% "
      "off")("at-set-speed",
             "with --compare: judge (and exit on) the medians adjusted to the set's speed by each "
             "configuration's speed probe (service demand, and CPU at a fixed rate or throughput "
             "unlimited, scaled by the ALU step's ratio), not the medians as measured")(
      "congestion-control", po::value<std::string>(),
      "the TCP congestion control of the test's sockets (iperf3 -C; default cubic, whatever "
      "the machine's net.ipv4.tcp_congestion_control: the model does not pace, and bbr does)");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(visible).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "skbsim measure: " << e.what() << "\n\nUsage: " << usage << "\n\n" << visible;
    return kExitUsage;
  }
  if (vm.count("help") != 0) {
    std::cout << "Usage: " << usage << "\n\n" << kAbout << '\n' << visible;
    return 0;
  }
  std::string command = "skbsim measure";
  for (const std::string& a : args) {
    command += " " + a;
  }
  int signo = 0;
  try {
    const Settings settings = settings_from(vm);
    const measure::SignalGuard guard;
    try {
      return measure_main(settings, command);
    } catch (const Interrupted& i) {
      signo = i.signo;
    }
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const measure::RefusedFlag& e) {
    std::cerr << e.what() << "\n";
    return kExitUsage;
  } catch (const MeasureError& e) {
    std::cerr << "skbsim measure: " << e.what() << " (cleaned up, nothing written)\n";
    return 1;
  } catch (const fs::filesystem_error& e) {
    std::cerr << "skbsim measure: " << e.what() << "\n";
    return 1;
  }
  // Everything it made is gone by now (the scopes above have ended): die of the same signal.
  std::cerr << "skbsim measure: interrupted by " << strsignal(signo)
            << "; removed its namespaces and processes, wrote nothing\n";
  std::signal(signo, SIG_DFL);
  std::raise(signo);
  return 128 + signo;
}

}  // namespace skbsim::sim
