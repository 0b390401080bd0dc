// measure_process.cpp — posix_spawn with files for output, process groups, signal flag.

#include "sim/measure_process.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX

namespace skbsim::sim::measure {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

// The one piece of global state: what a signal handler may touch (style.md §6 allows no other).
volatile std::sig_atomic_t g_signal =
    0;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void record_signal(int signo) {
  if (g_signal == 0) {
    g_signal = signo;
  }
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_line_of(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b != std::string::npos) {
      return line.substr(b);
    }
  }
  return "";
}

}  // namespace

SignalGuard::SignalGuard() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking call returns EINTR and we look at the flag
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGHUP, &sa, &old_hup_);
}

SignalGuard::~SignalGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGHUP, &old_hup_, nullptr);
}

int pending_signal() noexcept {
  return g_signal;
}

void throw_if_interrupted() {
  if (g_signal != 0) {
    throw Interrupted{g_signal};
  }
}

void interruptible_sleep(milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    throw_if_interrupted();
    std::this_thread::sleep_for(std::min(milliseconds(20), d));
  }
  throw_if_interrupted();
}

std::string find_program(std::string_view name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    std::string d;
    while (std::getline(in, d, ':')) {
      if (!d.empty()) {
        dirs.push_back(d);
      }
    }
  }
  for (const char* d : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    dirs.emplace_back(d);
  }
  for (const std::string& d : dirs) {
    const fs::path p = fs::path(d) / std::string(name);
    if (::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p)) {
      return p.string();
    }
  }
  return "";
}

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/skbsim-measure-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw MeasureError("mkdtemp " + templ + ": " + std::strerror(errno));
  }
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

fs::path ScratchDir::next(std::string_view stem, std::string_view ext) {
  return path_ / (std::string(stem) + "-" + std::to_string(counter_++) + "." + std::string(ext));
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) {
    s += (s.empty() ? "" : " ") + a;
  }
  return s;
}

Process Process::start(const std::vector<std::string>& argv, ScratchDir& scratch,
                       const std::vector<std::string>& extra_env) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    throw MeasureError("internal: a command needs an absolute program path, got \"" +
                       join_argv(argv) + "\"");
  }
  Process p;
  p.command_ = join_argv(argv);
  const std::string stem = fs::path(argv[0]).filename().string();
  p.out_path_ = scratch.next(stem, "out");
  p.err_path_ = scratch.next(stem, "err");

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, p.out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, p.err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
    sigaddset(&defaults, s);
  }
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a terminal's Ctrl-C reaches only us
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env;
  const std::string marker_prefix = std::string(kMarkerVariable) + "=";
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::string_view(*e).substr(0, marker_prefix.size()) != marker_prefix) {
      env.emplace_back(*e);
    }
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  env.push_back(marker_prefix + std::to_string(::getpid()));
  std::vector<char*> envp;
  for (std::string& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp;
  for (std::string& a : args) {
    argvp.push_back(a.data());
  }
  argvp.push_back(nullptr);

  const int rc = posix_spawn(&p.pid_, args[0].c_str(), &fa, &attr, argvp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    p.pid_ = -1;
    throw MeasureError(p.command_ + ": cannot start: " + std::strerror(rc));
  }
  return p;
}

Process::Process(Process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      status_(o.status_),
      command_(std::move(o.command_)),
      out_path_(std::move(o.out_path_)),
      err_path_(std::move(o.err_path_)) {}

Process::~Process() {
  stop();
}

bool Process::running() {
  if (pid_ <= 0 || status_) {
    return false;
  }
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    return false;
  }
  return r == 0;
}

std::optional<int> Process::wait_for(milliseconds timeout, bool interruptible) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  // Short commands finish in a few ms; a 10 s stream should not cost the machine we measure
  // hundreds of wake-ups a second: the poll interval grows from 1 ms to 25 ms.
  auto step = milliseconds(1);
  while (true) {
    if (!running()) {
      return status_;
    }
    if (interruptible) {
      throw_if_interrupted();
    }
    if (std::chrono::steady_clock::now() >= until) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, milliseconds(25));
  }
}

void Process::signal(int sig) noexcept {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, sig);
  }
}

void Process::stop(milliseconds grace) noexcept {
  if (pid_ <= 0 || status_) {
    return;
  }
  ::kill(-pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < until) {
    siginfo_t si{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        si.si_pid == pid_) {
      break;  // exited, not yet reaped
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  // The leader is not reaped yet (alive or a zombie), so the group id is still ours: anything
  // left in the group goes too.
  ::kill(-pid_, SIGKILL);
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  status_ = st;
}

std::string Process::out() const {
  return slurp(out_path_);
}
std::string Process::err() const {
  return slurp(err_path_);
}

std::string Process::first_error_line() const {
  std::string line = first_line_of(err());
  return line.empty() ? first_line_of(out()) : line;
}

namespace {

Completed finish(Process& p, milliseconds timeout, bool interruptible) {
  const std::optional<int> st = p.wait_for(timeout, interruptible);
  if (!st) {
    p.stop();
    throw MeasureError(p.command() + ": no exit within " + std::to_string(timeout.count()) + " ms");
  }
  Completed c;
  c.exit_code = WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  c.out = p.out();
  c.err = p.err();
  return c;
}

}  // namespace

Completed run(const std::vector<std::string>& argv, ScratchDir& scratch, milliseconds timeout) {
  Process p = Process::start(argv, scratch);
  return finish(p, timeout, true);
}

Completed run_checked(const std::vector<std::string>& argv, ScratchDir& scratch,
                      milliseconds timeout) {
  Process p = Process::start(argv, scratch);
  Completed c = finish(p, timeout, true);
  if (c.exit_code != 0) {
    throw MeasureError(p.command() + ": exit " + std::to_string(c.exit_code) + ": " +
                       p.first_error_line());
  }
  return c;
}

std::optional<int> wait_signalling_again(Process& p, int sig, milliseconds first,
                                         milliseconds second,
                                         const std::function<void()>& on_resend) {
  if (const std::optional<int> st = p.wait_for(first)) {
    return st;
  }
  p.signal(sig);
  on_resend();
  return p.wait_for(second);
}

bool run_quietly(const std::vector<std::string>& argv, ScratchDir& scratch) noexcept {
  try {
    Process p = Process::start(argv, scratch);
    return finish(p, milliseconds(10000), false).exit_code == 0;
  } catch (...) {
    return false;
  }
}

}  // namespace skbsim::sim::measure
