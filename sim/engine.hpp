#pragma once
// engine.hpp — the discrete-event engine: integer simulated time, an event queue ordered by
// (time, sequence) so runs are deterministic, CPUs, and the execution contexts that run on them.
//
// A task runs in an execution context (the sending process, the NET_RX softirq of a CPU, a NIC's
// interrupt) bound to one CPU. The task's kernel work is recorded in the context's Ledger, priced
// by the CostModel; when the task returns, the priced time keeps that CPU busy. What the task
// hands on (a packet to the next hop, a wake-up) happens at its point inside the task: the time
// the work priced before the hand-off has passed. Work that finds its CPU busy waits: each CPU runs
// hard interrupts before softirqs before processes, FIFO within a level, never preempting a
// running task. CPU utilisation = busy / (CPUs x elapsed), as netperf computes it from /proc/stat.
//
// The downside: a task's state changes all happen at its start (a reader empties its receive
// queue at once, the time of copying it passes afterwards); tasks are one call's or one packet's
// worth of work. Where another CPU must not see a change before the work ahead of it has passed
// (tcp_v4_rcv's owner check, when the socket's process is on another CPU), the rest goes on in
// a task of its own (Cpu::submit_next).

#include <cstdint>
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "skbsim/ledger.hpp"

namespace skbsim::sim {

using Time = std::int64_t;  // picoseconds
inline constexpr Time kPsPerUs = 1'000'000;
inline constexpr Time kPsPerSec = 1'000'000'000'000;

class Engine;
class Cpu;

// Run levels, highest first.
enum class Level : std::uint8_t { kHardIrq = 0, kSoftIrq = 1, kProcess = 2 };
constexpr std::string_view level_name(Level l) noexcept {
  return l == Level::kHardIrq ? "hardirq" : l == Level::kSoftIrq ? "softirq" : "process";
}

// An execution context: a ledger bound to a CPU at a run level.
class ExecCtx {
 public:
  ExecCtx(std::string name, Cpu& cpu, Level level, const CostModel* model)
      : name_(std::move(name)), cpu_(&cpu), level_(level), ledger_(model) {}
  const std::string& name() const noexcept { return name_; }
  Cpu& cpu() const noexcept { return *cpu_; }
  Level level() const noexcept { return level_; }
  Ledger& ledger() noexcept { return ledger_; }
  const Ledger& ledger() const noexcept { return ledger_; }
  // The host (or other owner) this context belongs to, set by whoever builds it.
  void* owner() const noexcept { return owner_; }
  void set_owner(void* o) noexcept { owner_ = o; }
  // The scheduler's switch-in on its CPU (the wake-up's IPI, __schedule): it hands the CPU to
  // the woken task at once, and that task pays for leaving the idle loop (Cpu, below).
  bool switches_in() const noexcept { return switches_in_; }
  void set_switches_in(bool v) noexcept { switches_in_ = v; }

 private:
  void* owner_ = nullptr;
  bool switches_in_ = false;
  std::string name_;
  Cpu* cpu_;
  Level level_;
  Ledger ledger_;
};

// Work for a CPU. `run` does the kernel work (recording into ctx's ledger) and may call
// Engine::after_task() to hand things on once the CPU time it charged so far has passed.
struct Task {
  ExecCtx* ctx = nullptr;
  std::function<void()> run;
  // What an IPI from another CPU brought (a wake-up's switch-in, a remote function call): when it
  // ends a halt, the work after that halt's exit is slowed at the IPI's rate
  // (Cpu::slow_after_idle_exits).
  bool by_ipi = false;
};

class Cpu {
 public:
  Cpu(Engine& engine, std::uint32_t index) : engine_(&engine), index_(index) {}
  std::uint32_t index() const noexcept { return index_; }
  // Busy time up to now: the running task's time counts as it passes, as /proc/stat sees it.
  Time busy_ps() const noexcept;
  bool running() const noexcept { return running_; }
  // The context whose task holds the CPU now (its time has not passed yet); null when idle.
  const ExecCtx* running_ctx() const noexcept { return running_ ? running_ctx_ : nullptr; }
  // The running task is the exit from the CPU's last halt (charged after the work that halt's
  // end ran: charge_idle_exits_after, charge_idle_periods), no call of the context it bills.
  bool leaving_idle() const noexcept { return running_ && leaving_idle_; }
  // Nothing running and nothing queued: the CPU sits in its idle loop.
  bool idle() const noexcept {
    return !running_ && queues_[0].empty() && queues_[1].empty() && queues_[2].empty();
  }

  // Queues a task; it runs as soon as the CPU is free and nothing of a higher level waits.
  void submit(Task t);
  // Queues a task ahead of the others of its level: the running task's own continuation. Those
  // one task queues run in the order it queued them (a NIC's poll hands on each frame's rest).
  void submit_next(Task t);
  // Inside a task's run(): it has queued continuations at `level` (submit_next).
  bool queued_next(Level level) const noexcept {
    return running_ && next_at_[static_cast<std::size_t>(level)] != 0;
  }
  // When the CPU last went idle (meaningful while idle()).
  Time idle_since() const noexcept { return idle_since_; }
  // The host's halt-polling window for this (virtual) CPU, adapted after each halt.
  Time& halt_poll_ps() noexcept { return halt_poll_ps_; }
  // Times the CPU left its idle loop after a halt of some time (not the zero-length gaps between
  // two events at one instant), since the start.
  std::uint64_t idle_exits() const noexcept { return idle_exits_; }
  // From then on, each exit after a halt longer than `min_halt` records one tick_nohz_idle_exit
  // call (the preset prices it: cpu.idle_exit_blocked_us) in the ledger of the first task the
  // halt's end runs (the woken task, when the scheduler's switch-in ends it), in a task of its
  // own once the CPU has nothing more queued, before it halts again. The kernel runs a task woken
  // from a long halt about 5 us after sched_wakeup (docs/measure.md, "Wake-up latency"): what
  // leaving idle costs beyond that (caches refilled, the tick restarted) slows the work that
  // follows rather than delaying it; the model keeps that work's timing and the CPU's busy time
  // whole (slow_after_idle_exits: the work slowed instead). Negative: none (default).
  void charge_idle_exits_after(Time min_halt) noexcept { charge_after_ = min_halt; }
  // With a slowdown above 0, such an exit's cost (`exit_ps`, the preset's
  // cpu.idle_exit_blocked_us) slows the work that follows instead: every call the CPU runs after
  // the exit costs `slowdown` times its price more until the excess adds up to `exit_ps`
  // (CostModel::idle_exit_slowdown, but for the calls it leaves out and the scheduler's context,
  // whose switch-ins the measured wake-up latencies hold; the rare frees Net::defer_free runs in
  // that context go unslowed with them); the tick_nohz_idle_exit charged before the next
  // halt holds what is left. An exit not charged before the next halt (a switch-in alone ran) is
  // one debt with the next, as the charge is one. The CPU's busy time is the same; the work's
  // timing is not.
  // `slowdown` after a halt an IPI ended (Task::by_ipi: a wake-up from another CPU),
  // `local_slowdown` after one anything else ended (measured: the CPU's own timer; a device's
  // interrupt takes it too, unmeasured); at 0 that exit is charged whole before the next halt, as
  // without a slowdown. The first task the CPU takes after the halt decides: of those queued at
  // that instant, the highest level's.
  void slow_after_idle_exits(Time exit_ps, double slowdown, double local_slowdown) noexcept {
    exit_ps_ = exit_ps;
    slowdown_ = slowdown;
    local_slowdown_ = local_slowdown;
  }
  // From then on, every exit from the idle loop records one schedule_idle call
  // (cpu.idle_period_us: the idle period's own work), charged as a long halt's
  // tick_nohz_idle_exit is, and with it when both are owed (exits whose halts ended in
  // switch-ins alone are charged with the next, one call each).
  void charge_idle_periods() noexcept { charge_periods_ = true; }

 private:
  friend class Engine;
  void kick();  // an idle CPU takes its next task from the event loop
  // Runs the next task, if any; `after_halt`: the CPU sat halted until now (a kick), rather than
  // finishing a task this instant.
  void dispatch(bool after_halt = false);
  void finished();

  Engine* engine_;
  std::uint32_t index_;
  std::array<std::deque<Task>, 3> queues_;
  std::array<std::size_t, 3> next_at_{};  // where the running task's next submit_next goes
  bool running_ = false;
  const ExecCtx* running_ctx_ = nullptr;
  bool kick_pending_ = false;
  std::vector<std::function<void()>> conts_;          // the running task's hand-offs at its end
  std::vector<std::function<void()>> running_conts_;  // being run at its completion
  Time busy_ps_ = 0;      // including the whole of the running task
  Time task_end_ = 0;     // when the running task's time ends
  Time idle_since_ = 0;
  Time halt_poll_ps_ = 0;
  Time charge_after_ = -1;
  bool charge_periods_ = false;
  bool leaving_idle_ = false;
  bool idle_exit_owed_ = false;    // a long halt ended; charged before the CPU halts again
  std::uint32_t idle_periods_owed_ = 0;  // idle periods ended since the last charge; likewise
  ExecCtx* exit_ctx_ = nullptr;  // to the first task (not a switch-in) that the halt's end ran
  Time exit_ps_ = 0;             // slow_after_idle_exits
  double slowdown_ = 0;
  double local_slowdown_ = 0;
  double exit_rate_ = 0;        // the last long halt's: slowdown_ or local_slowdown_
  std::int64_t exit_debt_ = 0;  // what the last long halt's exit has still to cost
  std::int64_t exit_work_ = 0;  // the slowed work since it, at its price (the rate's fading)
  std::uint64_t idle_exits_ = 0;
};

class Engine {
 public:
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Time now() const noexcept { return now_; }
  // Schedules `fn` at absolute time `t` (>= now); ties run in scheduling order.
  void at(Time t, std::function<void()> fn);
  // Inside a task: runs `fn` once the CPU time the task has charged so far has elapsed (its
  // hand-off point; a hand-off at the end runs before the CPU takes its next task). Outside a
  // task: now.
  void after_task(std::function<void()> fn);
  // Runs events until the queue is empty or time passes `until`.
  void run_until(Time until);
  std::uint64_t events_run() const noexcept { return events_run_; }
  // Busy time recorded by all CPUs, and the priced time all ledgers charged: equal by construction
  // (the conservation tests check it).
  bool in_task() const noexcept { return current_ != nullptr; }
  // Inside a task: the time its work has reached, now plus what it has charged so far (where a
  // kernel's tracepoint in the middle of the task would stamp its event). Outside: now.
  Time task_clock() const noexcept;
  ExecCtx* current_ctx() const noexcept { return current_; }

 private:
  friend class Cpu;
  // The heap orders small plain records; the callbacks wait in slots of their own, so sifting
  // the heap moves 24 bytes per step and never a type-erased callable.
  struct Event {
    Time time;
    std::uint64_t seq;
    std::uint32_t slot;  // in fns_
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const noexcept {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<std::function<void()>> fns_;  // the queued events' callbacks, by slot
  std::vector<std::uint32_t> free_slots_;
  Time now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t events_run_ = 0;
  ExecCtx* current_ = nullptr;
  // The running task's hand-offs, each with the priced time before it (ps into the task).
  struct HandOff {
    Time at_ps;
    std::function<void()> fn;
  };
  std::vector<HandOff> hand_offs_;
};

}  // namespace skbsim::sim
