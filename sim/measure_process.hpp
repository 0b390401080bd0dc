#pragma once
// measure_process.hpp — the processes `skbsim measure` starts (ip, ethtool, iperf3, bpftrace,
// sysctl, ss), started with posix_spawn from an argv vector — never through a shell — each in a
// process group of its own, with stdout and stderr going to files in a private scratch directory
// (no pipes, so no child can block on a full pipe while we wait for another).
//
// Ownership: a Process owns its child. Destroying a Process whose child still runs stops the
// whole group (SIGTERM, then SIGKILL after a grace period) and reaps it, so unwinding an
// exception — including Interrupted, thrown when SIGINT/SIGTERM/SIGHUP arrived — leaves no child
// behind. Every child carries SKBSIM_MEASURE_PID=<our pid> in its environment, so a test (or a
// user) can find anything a run left.
//
// The downside of files instead of pipes: output is read after the fact (or polled, for
// bpftrace's "attached" line), which is all the harness needs.

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace skbsim::sim::measure {

// A measurement step failed on this machine (a tool exited non-zero, timed out, printed what we
// could not read). The command line prints what() as one line and exits 1, having cleaned up.
class MeasureError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A flag's value this machine does not take, found only once the measurement has started (a
// congestion control the kernel does not have): the command line prints what() alone and exits
// 2, as for any bad flag, having cleaned up.
class RefusedFlag : public MeasureError {
 public:
  RefusedFlag(const std::string& flag, const std::string& message)
      : MeasureError(flag + ": " + message) {}
};

// SIGINT, SIGTERM or SIGHUP arrived; thrown at the next wait so that unwinding cleans up.
struct Interrupted {
  int signo;
};

// Installs handlers for SIGINT, SIGTERM and SIGHUP that only record the signal, for the lifetime
// of the object; restores the previous handlers on destruction. One at a time.
class SignalGuard {
 public:
  SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  ~SignalGuard();

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
};

// The signal recorded since the guard was installed, or 0.
int pending_signal() noexcept;
// Throws Interrupted when a signal is pending.
void throw_if_interrupted();
// Sleeps `d`, waking early (and throwing Interrupted) when a signal arrives.
void interruptible_sleep(std::chrono::milliseconds d);

// The environment variable every child carries, and its value for this process.
inline constexpr std::string_view kMarkerVariable = "SKBSIM_MEASURE_PID";

// The absolute path of `name` found in $PATH, /usr/sbin, /sbin, /usr/bin, /bin; "" if none.
std::string find_program(std::string_view name);

// A private scratch directory (mkdtemp under $TMPDIR or /tmp), removed with the object.
class ScratchDir {
 public:
  ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir();
  const std::filesystem::path& path() const { return path_; }
  // A fresh file name inside, "<stem>-<n>.<ext>".
  std::filesystem::path next(std::string_view stem, std::string_view ext);

 private:
  std::filesystem::path path_;
  unsigned counter_ = 0;
};

class Process {
 public:
  // Starts argv[0] (an absolute path) with argv, stdin from /dev/null, stdout and stderr into
  // files of `scratch`, our environment plus `extra_env` ("NAME=value") and the marker. Throws
  // MeasureError when posix_spawn fails.
  static Process start(const std::vector<std::string>& argv, ScratchDir& scratch,
                       const std::vector<std::string>& extra_env = {});

  Process(Process&& o) noexcept;
  Process& operator=(Process&&) = delete;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // stop(): no child outlives its Process

  pid_t pid() const { return pid_; }
  const std::string& command() const { return command_; }  // argv joined, for messages
  bool running();
  // Waits up to `timeout` for the child to exit; its wait status, or nullopt on timeout.
  // With `interruptible`, throws Interrupted when a signal arrives meanwhile (the child keeps
  // running until the Process is destroyed); clean-up waits pass false.
  std::optional<int> wait_for(std::chrono::milliseconds timeout, bool interruptible = true);
  // Sends `sig` to the child alone (not its group).
  void signal(int sig) noexcept;
  // Stops the whole group: SIGTERM, up to `grace` to exit, then SIGKILL; reaps. Never throws.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000)) noexcept;

  std::string out() const;  // what it wrote so far
  std::string err() const;
  // The first non-empty line of stderr (else of stdout), for one-line error messages.
  std::string first_error_line() const;
  std::optional<int> status() const { return status_; }

 private:
  Process() = default;
  pid_t pid_ = -1;
  std::optional<int> status_;  // the wait status once reaped
  std::string command_;
  std::filesystem::path out_path_;
  std::filesystem::path err_path_;
};

struct Completed {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv to completion within `timeout` (then stops it and throws MeasureError). Throws
// Interrupted on a signal. Does not look at the exit code.
Completed run(const std::vector<std::string>& argv, ScratchDir& scratch,
              std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));
// The same, and throws MeasureError "<command>: exit N: <first error line>" on a non-zero exit.
Completed run_checked(const std::vector<std::string>& argv, ScratchDir& scratch,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(30000));
// For clean-up: runs argv ignoring signals and every failure; true when it exited 0.
bool run_quietly(const std::vector<std::string>& argv, ScratchDir& scratch) noexcept;

std::string join_argv(const std::vector<std::string>& argv);

// Waits up to `first` for `p` to exit after `sig` was sent to it; if it still runs, sends `sig`
// once more, calls `on_resend` and waits up to `second`. The wait status, or nullopt. bpftrace
// prints its maps and exits on SIGINT, but once (2026-12-07) slept on after the first and printed
// them on a second (scripts/trace-measure.sh stops it the same way). Throws Interrupted as
// Process::wait_for does.
std::optional<int> wait_signalling_again(Process& p, int sig, std::chrono::milliseconds first,
                                         std::chrono::milliseconds second,
                                         const std::function<void()>& on_resend);

}  // namespace skbsim::sim::measure
