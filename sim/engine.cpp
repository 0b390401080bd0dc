#include "sim/engine.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace skbsim::sim {

void Engine::at(Time t, std::function<void()> fn) {
  std::uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(fns_.size());
    fns_.push_back(std::move(fn));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    fns_[slot] = std::move(fn);
  }
  queue_.push(Event{t < now_ ? now_ : t, seq_++, slot});
}

Time Engine::task_clock() const noexcept {
  return current_ == nullptr ? now_ : now_ + current_->ledger().pending_ps();
}

void Engine::after_task(std::function<void()> fn) {
  if (current_ == nullptr) {
    at(now_, std::move(fn));
    return;
  }
  hand_offs_.push_back({current_->ledger().pending_ps(), std::move(fn)});
}

void Engine::run_until(Time until) {
  while (!queue_.empty() && queue_.top().time <= until) {
    const Event ev = queue_.top();
    queue_.pop();
    now_ = ev.time;
    ++events_run_;
    // Out of its slot first: the callback may schedule events, which may grow fns_.
    std::function<void()> fn = std::move(fns_[ev.slot]);
    free_slots_.push_back(ev.slot);
    fn();
  }
  if (now_ < until && queue_.empty()) {
    now_ = until;
  } else if (now_ < until) {
    now_ = until;
  }
}

void Cpu::submit(Task t) {
  queues_[static_cast<std::size_t>(t.ctx->level())].push_back(std::move(t));
  kick();
}

void Cpu::submit_next(Task t) {
  const auto level = static_cast<std::size_t>(t.ctx->level());
  std::deque<Task>& q = queues_[level];
  const std::size_t at = std::min<std::size_t>(next_at_[level]++, q.size());
  q.insert(q.begin() + static_cast<std::ptrdiff_t>(at), std::move(t));
  kick();
}

void Cpu::kick() {
  if (!running_ && !kick_pending_) {
    // Start it from the event loop, never nested inside another CPU's running task.
    kick_pending_ = true;
    engine_->at(engine_->now(), [this] {
      kick_pending_ = false;
      if (!running_) {
        dispatch(/*after_halt=*/true);  // not running outside finished(): halted
      }
    });
  }
}

void Cpu::dispatch(bool after_halt) {
  for (auto& q : queues_) {
    if (q.empty()) {
      continue;
    }
    Task t = std::move(q.front());
    q.pop_front();
    running_ = true;
    running_ctx_ = t.ctx;
    leaving_idle_ = false;
    next_at_.fill(0);
    Engine& e = *engine_;
    if (after_halt && e.now_ > idle_since_) {
      ++idle_exits_;
      idle_periods_owed_ += charge_periods_ ? 1U : 0U;
      if (charge_after_ >= 0 && e.now_ - idle_since_ > charge_after_) {
        idle_exit_owed_ = true;
        exit_rate_ = t.by_ipi ? slowdown_ : local_slowdown_;
        exit_debt_ = exit_rate_ > 0 ? exit_ps_ : 0;
        exit_work_ = 0;
      }
    }
    if ((idle_exit_owed_ || idle_periods_owed_ > 0) && exit_ctx_ == nullptr &&
        !t.ctx->switches_in()) {
      exit_ctx_ = t.ctx;  // the first task the halt's end runs pays, once the CPU has no more
    }
    e.current_ = t.ctx;
    // The switch-in that ends the halt is not slowed: the wake-up latencies measured to the
    // woken task's start hold it as it ran (its charges are taken off them at their price).
    const bool slowed = exit_debt_ > 0 && !t.ctx->switches_in();
    if (slowed) {
      t.ctx->ledger().set_slowdown(&exit_debt_, exit_rate_, &exit_work_);
    }
    t.run();
    if (slowed) {
      t.ctx->ledger().clear_slowdown();
    }
    e.current_ = nullptr;
    const Time cost = t.ctx->ledger().take_pending_ps();
    busy_ps_ += cost;
    task_end_ = e.now_ + cost;
    // A hand-off inside the task is an event at its point; those at the end (most: the next
    // call, the next packet) run in order in the completion event before the CPU takes its next
    // task. That event captures only `this`, so scheduling it allocates nothing.
    for (Engine::HandOff& h : e.hand_offs_) {
      if (h.at_ps < cost) {
        e.at(e.now_ + h.at_ps, std::move(h.fn));
      } else {
        conts_.push_back(std::move(h.fn));
      }
    }
    e.hand_offs_.clear();
    e.at(task_end_, [this] {
      running_conts_.swap(conts_);
      for (auto& c : running_conts_) {
        c();
      }
      running_conts_.clear();
      finished();
    });
    return;
  }
  if ((idle_exit_owed_ || idle_periods_owed_ > 0) && exit_ctx_ != nullptr) {
    // Leaving the last halt, charged before the CPU halts again: to the first task that halt's
    // end ran, in a task of its own after everything queued meanwhile.
    ExecCtx* ctx = exit_ctx_;
    const std::uint32_t periods = std::exchange(idle_periods_owed_, 0U);
    const bool blocked = std::exchange(idle_exit_owed_, false);
    exit_ctx_ = nullptr;
    queues_[static_cast<std::size_t>(ctx->level())].push_back(
        {ctx, [this, ctx, periods, blocked] {
           leaving_idle_ = true;
           // What the work since the exit has not already paid in slowing down (this task's own
           // records are not slowed: it runs with the debt taken).
           const std::int64_t rest = std::exchange(exit_debt_, 0);
           for (std::uint32_t i = 0; i < periods; ++i) {
             ctx->ledger().record(Work{.sym = Sym::kScheduleIdle});
           }
           if (blocked && exit_rate_ > 0) {
             ctx->ledger().record_priced(Work{.sym = Sym::kIdleExit}, rest);
           } else if (blocked) {
             ctx->ledger().record(Work{.sym = Sym::kIdleExit});
           }
         }});
    dispatch();
    return;
  }
  running_ = false;  // reached only when the CPU's last task has finished: it halts now
  idle_since_ = engine_->now_;
}

Time Cpu::busy_ps() const noexcept {
  const Time now = engine_->now();
  return running_ && task_end_ > now ? busy_ps_ - (task_end_ - now) : busy_ps_;
}

void Cpu::finished() {
  running_ = false;
  dispatch();
}

}  // namespace skbsim::sim
