#pragma once
// ledger.hpp — the one cost-recording mechanism.
//
// Model code records *what a kernel function did itself* as a Work (its symbol, bytes copied,
// bytes run through a software checksum, bytes copied-and-summed in one fused pass, page
// references taken or dropped, bytes allocated or freed). A Ledger, owned by one execution context
// (a process, a softirq, an interrupt), accumulates Works per symbol; nothing else in skbsim
// counts. Where a CostModel is attached the ledger also prices each Work and keeps the priced
// total pending until the engine turns it into CPU busy time (take_pending_ps()).
//
// A fused copy-and-checksum (csum_partial_copy_generic) is recorded in `fused` only; reports add
// it to both "bytes copied" and "bytes checksummed". One Work per kernel function call: skb_cow
// that calls pskb_expand_head records a kSkbCow Work with no bytes and pskb_expand_head records
// the copy, as a profiler's self time would show them.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "skbsim/symbols.hpp"

namespace skbsim {

struct Work {
  Sym sym = Sym::kCount;
  std::uint32_t copied = 0;       // bytes memcpy'd / copied from or to user space
  std::uint32_t summed = 0;       // bytes run through a software 1's-complement sum
  std::uint32_t fused = 0;        // bytes copied and summed in one pass
  std::uint32_t page_refs = 0;    // get_page / put_page operations done inline
  std::uint32_t alloc_bytes = 0;  // size of the object allocated (slab object size); >0 = 1 alloc
  std::uint32_t free_bytes = 0;   // size of the object freed; >0 = 1 free
};

// What a symbol has accumulated. Plain sums; `cost_ps` only when a CostModel is attached.
struct LedgerCell {
  std::uint64_t calls = 0;
  std::uint64_t copied = 0;
  std::uint64_t summed = 0;
  std::uint64_t fused = 0;
  std::uint64_t page_refs = 0;
  std::uint64_t allocs = 0;
  std::uint64_t alloc_bytes = 0;
  std::uint64_t frees = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t handovers = 0;
  std::int64_t cost_ps = 0;

  void add(const LedgerCell& o) noexcept;
  void subtract(const LedgerCell& o) noexcept;  // o must be an earlier snapshot of this cell
  // bytes_copied / bytes_checksummed as the reports define them (fused counts in both).
  std::uint64_t bytes_copied() const noexcept { return copied + fused; }
  std::uint64_t bytes_checksummed() const noexcept { return summed + fused; }
  // The bytes that symbol handled: copied + summed + fused (what `<symbol>_bytes` reports).
  std::uint64_t bytes() const noexcept { return copied + summed + fused; }
};

// Prices a Work in integer picoseconds, so equal inputs give bit-identical totals. Filled from a
// preset (scenarios/models/*.json) by sim/; the model never holds a number of its own.
struct CostModel {
  // Fixed cost of one call, per symbol, in picoseconds (from cycles at the preset's clock).
  std::array<std::int64_t, kSymCount> call_ps{};
  // Per-byte costs in femtoseconds per byte (1e-3 ps), a property of the CPU's memory system.
  std::int64_t copy_fs_per_byte = 0;
  // The reader's copy out of an skb into its buffer (copies_to_user below), where it differs:
  // 0 = copy_fs_per_byte.
  std::int64_t copy_to_user_fs_per_byte = 0;
  std::int64_t csum_fs_per_byte = 0;
  std::int64_t fused_fs_per_byte = 0;
  // One inline page reference (atomic increment or decrement).
  std::int64_t page_ref_ps = 0;
  // Time an idle CPU takes to start running after a wake-up's IPI that no CPU spends: a halted
  // virtual CPU waits for its host to run it. Latency, not cost: it is never charged. With
  // halt_poll_max_ps set, the host polls a halted vCPU for an adaptive window first (KVM's
  // halt_poll_ns): an IPI within it costs idle_wake_ps, one after it idle_wake_blocked_ps.
  std::int64_t idle_wake_ps = 0;
  std::int64_t idle_wake_blocked_ps = 0;
  // What the sending CPU spends, beyond smp_send_reschedule, on an IPI to a vCPU the host has
  // blocked (past the polling window): charged as kSendIpiBlocked. 0: nothing more.
  std::int64_t ipi_send_blocked_ps = 0;
  std::int64_t halt_poll_max_ps = 0;
  // The spread of those latencies: each wake-up's is drawn from a log-normal distribution of
  // this standard deviation of its logarithm, with the latency above as its mean. 0: every
  // wake-up takes exactly that.
  double idle_wake_spread = 0;
  // The spread of idle_wake_blocked_ps alone, where the preset measured it apart (a wake-up
  // after the host blocked the vCPU goes through the host's scheduler, the others do not).
  // Negative: idle_wake_spread.
  double idle_wake_blocked_spread = -1;
  // How long a CPU that has just gone idle polls before it halts (do_idle keeps
  // TIF_POLLING_NRFLAG set through the governor's choice and the tick's stop): a wake-up or
  // function call aimed at it meanwhile sets need_resched without an IPI (set_nr_if_polling).
  // 0: every remote wake-up of an idle CPU sends an IPI.
  std::int64_t idle_poll_ps = 0;
  // The time such a wake-up takes, no IPI sent, until the woken task runs (latency, never
  // charged; spread as the others are). 0: it runs at once.
  std::int64_t idle_poll_wake_ps = 0;
  // A system call's entry and exit, measured as time (a null call in a loop), not scaled as
  // cycles are; call_ps[kSyscall] holds it too. 0: the model charges none (the syscall symbols'
  // cycles then include their entry, as the 2007 presets have it).
  std::int64_t syscall_ps = 0;
  // Leaving the idle loop after a halt longer than halt_poll_max_ps (any halt without it), as
  // time (call_ps[kIdleExit] holds it too): what such an end of an idle period costs the CPU
  // beyond the work that ended it. 0: not priced.
  std::int64_t idle_exit_blocked_ps = 0;
  // Every idle period's own work outside its cpuidle state, as time (call_ps[kScheduleIdle]
  // holds it too): entering the idle loop and leaving it, whatever the halt's length. 0: not
  // priced.
  std::int64_t idle_period_ps = 0;
  // What a CPU spends, beyond the work itself, the first time it works on an sk_buff another CPU
  // worked on last (Ledger::record with `handover`): the sk_buff's and its shared info's cache
  // lines come over from that CPU. As time. 0: not priced.
  std::int64_t skb_handover_ps = 0;
  // How much slower a CPU works after a halt longer than halt_poll_max_ps, until it has spent
  // idle_exit_blocked_ps more than the work itself: each call's price times (1 + this), the
  // excess charged to the call. What is left of idle_exit_blocked_ps when the CPU halts again is
  // charged then, as kIdleExit. 0: all of it then, none slows the work (the default).
  double idle_exit_slowdown = 0;
  // The same after a long halt that no IPI ended (the CPU's own timer; a device's interrupt,
  // unmeasured, too): the work a wake-up from another CPU brings and the work a CPU's own timer
  // starts were measured slowed apart. Negative: idle_exit_slowdown.
  double idle_exit_local_slowdown = -1;
  // With it above 0 that slowdown fades as the CPU works: the rate is the one above times
  // exp(-w / this), w the slowed work (at its price) done since the exit, so a call priced p
  // after w costs rate * this * exp(-w / this) * (1 - exp(-p / this)) more, until the exit's
  // cost is paid; 0: the rate holds until then (the default).
  std::int64_t idle_exit_slowdown_decay_ps = 0;

  // Whether a call of `s` is slowed after a long halt's exit (idle_exit_slowdown): not the
  // costs a preset gives as time measured in that state already (the IPI to a blocked vCPU, an
  // idle period's own work) or that are the exit itself.
  static constexpr bool slowed_after_exit(Sym s) noexcept {
    return s != Sym::kSendIpiBlocked && s != Sym::kScheduleIdle && s != Sym::kIdleExit;
  }

  // The symbols whose `copied` bytes go from an skb into a reader's buffer: 6.x
  // skb_copy_datagram_iter's _copy_to_iter (2.6.20 memcpy_toiovec).
  static constexpr bool copies_to_user(Sym s) noexcept {
    return s == Sym::kSkbCopyDatagramIovec || s == Sym::kCopyToUser;
  }

  std::int64_t price(const Work& w) const noexcept {
    const std::int64_t copy_fs = copy_to_user_fs_per_byte != 0 && copies_to_user(w.sym)
                                     ? copy_to_user_fs_per_byte
                                     : copy_fs_per_byte;
    const std::int64_t bytes_fs = static_cast<std::int64_t>(w.copied) * copy_fs +
                                  static_cast<std::int64_t>(w.summed) * csum_fs_per_byte +
                                  static_cast<std::int64_t>(w.fused) * fused_fs_per_byte;
    return call_ps[index(w.sym)] + static_cast<std::int64_t>(w.page_refs) * page_ref_ps +
           bytes_fs / 1000;
  }
};

// Receives every Work recorded for a traced skb (see Skb::traced()).
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_work(const Work& w, std::int64_t cost_ps, std::uint64_t skb_id) = 0;
};

class Ledger {
 public:
  Ledger() = default;
  explicit Ledger(const CostModel* model) noexcept : model_(model) {}

  void set_cost_model(const CostModel* model) noexcept { model_ = model; }
  void set_trace_sink(TraceSink* sink) noexcept { trace_ = sink; }

  // Records one call. Hot path: a dense array update and, with a model, one price().
  void record(const Work& w) noexcept {
    LedgerCell& c = cells_[index(w.sym)];
    ++c.calls;
    c.copied += w.copied;
    c.summed += w.summed;
    c.fused += w.fused;
    c.page_refs += w.page_refs;
    c.allocs += w.alloc_bytes > 0 ? 1U : 0U;
    c.alloc_bytes += w.alloc_bytes;
    c.frees += w.free_bytes > 0 ? 1U : 0U;
    c.free_bytes += w.free_bytes;
    if (model_ != nullptr) {
      std::int64_t ps = model_->price(w);
      if (slow_debt_ != nullptr && CostModel::slowed_after_exit(w.sym)) [[unlikely]] {
        ps += slowed(ps);
      }
      c.cost_ps += ps;
      pending_ps_ += ps;
      last_ps_ = ps;
    }
  }
  // One call of `w.sym` at the price `ps` (its bytes are counted, not priced): what is left of a
  // cost spread over other calls.
  void record_priced(const Work& w, std::int64_t ps) noexcept {
    const CostModel* m = std::exchange(model_, nullptr);
    record(w);
    model_ = m;
    if (model_ != nullptr) {
      cells_[index(w.sym)].cost_ps += ps;
      pending_ps_ += ps;
      last_ps_ = ps;
    }
  }
  // From now until clear_slowdown(), every call costs `slowdown` times its price more, taken out
  // of `*debt` (above 0) until that is spent (the CPU's owed exit after a halt: CostModel's
  // idle_exit_slowdown; not the calls CostModel::slowed_after_exit leaves out). With `*work`
  // (the slowed work since the exit, which each slowed call adds its price to) and
  // CostModel::idle_exit_slowdown_decay_ps, the rate fades with that work.
  void set_slowdown(std::int64_t* debt, double slowdown, std::int64_t* work = nullptr) noexcept {
    slow_debt_ = debt;
    slowdown_ = slowdown;
    slow_work_ = work;
  }
  void clear_slowdown() noexcept { slow_debt_ = nullptr; }
  // The same, and forwards it to the trace sink when the skb it acted on is traced. With
  // `handover` the work is the first on its skb since another CPU's: the work's cell counts a
  // hand-over and, with a model, carries CostModel::skb_handover_ps on top of the work's price.
  // (Not a Work field: a larger Work slows every record.)
  void record(const Work& w, bool traced, std::uint64_t skb_id, bool handover = false) noexcept {
    record(w);
    if (handover) {
      LedgerCell& c = cells_[index(w.sym)];
      ++c.handovers;
      if (model_ != nullptr) {
        std::int64_t ps = model_->skb_handover_ps;
        if (slow_debt_ != nullptr) [[unlikely]] {
          ps += slowed(ps);
        }
        c.cost_ps += ps;
        pending_ps_ += ps;
        last_ps_ += ps;
      }
    }
    if (traced && trace_ != nullptr) {
      trace_->on_work(w, model_ != nullptr ? last_ps_ : 0, skb_id);
    }
  }

  const LedgerCell& cell(Sym s) const noexcept { return cells_[index(s)]; }
  const std::array<LedgerCell, kSymCount>& cells() const noexcept { return cells_; }
  LedgerCell total() const noexcept;

  // Priced time recorded since the last call: the engine turns it into CPU busy time.
  std::int64_t take_pending_ps() noexcept {
    const std::int64_t p = pending_ps_;
    pending_ps_ = 0;
    return p;
  }
  std::int64_t pending_ps() const noexcept { return pending_ps_; }

  void add(const Ledger& other) noexcept;
  void clear() noexcept;

 private:
  // The excess of a call priced `ps` while slowed (the integral of the fading rate over the call's
  // work, where it fades), taken out of the debt; once that is paid the ledger stops looking.
  std::int64_t slowed(std::int64_t ps) noexcept {
    double x = static_cast<double>(ps) * slowdown_;
    if (slow_work_ != nullptr && model_->idle_exit_slowdown_decay_ps > 0) {
      const double tau = static_cast<double>(model_->idle_exit_slowdown_decay_ps);
      const double w = static_cast<double>(*slow_work_);
      x = slowdown_ * tau * std::exp(-w / tau) * -std::expm1(-static_cast<double>(ps) / tau);
      *slow_work_ += ps;
    }
    const std::int64_t extra = std::min(*slow_debt_, static_cast<std::int64_t>(x));
    *slow_debt_ -= extra;
    if (*slow_debt_ <= 0) {
      slow_debt_ = nullptr;
    }
    return extra;
  }

  std::array<LedgerCell, kSymCount> cells_{};
  const CostModel* model_ = nullptr;
  TraceSink* trace_ = nullptr;
  std::int64_t pending_ps_ = 0;
  std::int64_t last_ps_ = 0;
  std::int64_t* slow_debt_ = nullptr;
  std::int64_t* slow_work_ = nullptr;
  double slowdown_ = 0;
};

}  // namespace skbsim
