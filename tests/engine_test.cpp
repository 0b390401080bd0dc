// engine_test.cpp — the discrete-event engine (sim/engine.hpp): event ordering, CPU run levels,
// priced task time, hand-offs at their point inside a task, waiting work, busy-time accounting
// and utilisation.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/examples.hpp"
#include "sim/run.hpp"
#include "skbsim/ledger.hpp"

namespace skbsim::sim {
namespace {

// A cost model where every symbol costs `ps` per call and bytes are free unless asked.
CostModel flat_model(std::int64_t ps) {
  CostModel m;
  for (auto& c : m.call_ps) {
    c = ps;
  }
  return m;
}

// Charges `calls` calls of one symbol into ctx's ledger (as a task's kernel work would).
void charge(ExecCtx& ctx, std::uint32_t calls, Sym s = Sym::kIpRcv) {
  for (std::uint32_t i = 0; i < calls; ++i) {
    ctx.ledger().record(Work{.sym = s});
  }
}

// ---- event queue ---------------------------------------------------------------------------------

TEST(EventQueue, OrdersByTimeThenSchedulingOrder) {
  Engine e;
  std::vector<std::string> order;
  e.at(30, [&] { order.push_back("t30"); });
  e.at(10, [&] { order.push_back("t10-a"); });
  e.at(20, [&] { order.push_back("t20"); });
  e.at(10, [&] { order.push_back("t10-b"); });
  e.at(10, [&] { order.push_back("t10-c"); });
  e.at(0, [&] { order.push_back("t0"); });
  e.run_until(100);
  EXPECT_EQ(order, (std::vector<std::string>{"t0", "t10-a", "t10-b", "t10-c", "t20", "t30"}));
  EXPECT_EQ(e.events_run(), 6U);
}

TEST(EventQueue, TiesScheduledDuringAnEventRunAfterThoseAlreadyQueued) {
  Engine e;
  std::vector<std::string> order;
  e.at(5, [&] {
    order.push_back("first");
    // Same time as an event already queued: FIFO by sequence, so it runs after "second".
    e.at(5, [&] { order.push_back("scheduled-by-first"); });
    e.at(e.now(), [&] { order.push_back("scheduled-by-first-now"); });
  });
  e.at(5, [&] { order.push_back("second"); });
  e.run_until(5);
  EXPECT_EQ(order, (std::vector<std::string>{"first", "second", "scheduled-by-first",
                                             "scheduled-by-first-now"}));
}

// The queue keeps callbacks in slots it reuses: a callback that schedules many more (growing the
// slots while it runs) still runs whole, and every event runs once, in (time, order) order.
TEST(EventQueue, ACallbackThatSchedulesManyMoreRunsWholeAndSlotsAreReused) {
  Engine e;
  std::vector<int> order;
  const std::string tag(64, 'x');  // a capture too big for std::function's inline buffer
  e.at(1, [&, tag] {
    for (int i = 0; i < 1000; ++i) {
      e.at(2 + i % 3, [&order, i, tag] { order.push_back(i); });
    }
    order.push_back(tag.size() == 64 ? -1 : -2);  // the callback's own capture is still intact
  });
  e.run_until(10);
  ASSERT_EQ(order.size(), 1001U);
  EXPECT_EQ(order.front(), -1);
  std::vector<int> want;
  for (int r = 0; r < 3; ++r) {
    for (int i = r; i < 1000; i += 3) {
      want.push_back(i);
    }
  }
  EXPECT_EQ(std::vector<int>(order.begin() + 1, order.end()), want);
  // A second round reuses the freed slots and runs the same way.
  order.clear();
  for (int i = 0; i < 5; ++i) {
    e.at(20 - i, [&order, i] { order.push_back(i); });
  }
  e.run_until(30);
  EXPECT_EQ(order, (std::vector<int>{4, 3, 2, 1, 0}));
  EXPECT_EQ(e.events_run(), 1006U);
}

TEST(EventQueue, EventTimeIsNowAndPastTimesAreClampedToNow) {
  Engine e;
  std::vector<Time> seen;
  e.at(100, [&] {
    seen.push_back(e.now());
    e.at(40, [&] { seen.push_back(e.now()); });  // in the past: runs at now, not back in time
  });
  e.run_until(1000);
  EXPECT_EQ(seen, (std::vector<Time>{100, 100}));
}

TEST(EventQueue, RunUntilStopsAtTheHorizonAndResumes) {
  Engine e;
  std::vector<Time> seen;
  for (Time t : {10, 20, 30, 40}) {
    e.at(t, [&] { seen.push_back(e.now()); });
  }
  e.run_until(25);
  EXPECT_EQ(seen, (std::vector<Time>{10, 20}));
  EXPECT_EQ(e.now(), 25);
  e.run_until(30);  // an event exactly at the horizon runs
  EXPECT_EQ(seen, (std::vector<Time>{10, 20, 30}));
  e.run_until(1000);
  EXPECT_EQ(seen, (std::vector<Time>{10, 20, 30, 40}));
  EXPECT_EQ(e.now(), 1000);  // an empty queue advances time to the horizon
}

TEST(EventQueue, AfterTaskOutsideATaskRunsNowInOrder) {
  Engine e;
  std::vector<std::string> order;
  e.at(7, [&] {
    EXPECT_FALSE(e.in_task());
    e.after_task([&] {
      order.push_back("after");
      EXPECT_EQ(e.now(), 7);
    });
    order.push_back("event");
  });
  e.run_until(100);
  EXPECT_EQ(order, (std::vector<std::string>{"event", "after"}));
}

// ---- CPUs and run levels -------------------------------------------------------------------------

struct CpuFixture : ::testing::Test {
  CostModel model = flat_model(100);  // 100 ps per recorded call
  Engine engine;
  Cpu cpu{engine, 0};
  ExecCtx hard{"irq", cpu, Level::kHardIrq, &model};
  ExecCtx soft{"softirq/0", cpu, Level::kSoftIrq, &model};
  ExecCtx proc{"netperf", cpu, Level::kProcess, &model};
  ExecCtx proc2{"netserver", cpu, Level::kProcess, &model};

  struct Run {
    std::string name;
    Time start;
  };
  std::vector<Run> runs;
  Time woken_start = -1;  // wake_through's woken task

  // At `at`, a halted CPU woken through the scheduler's switch-in (`sched`, one call), which hands
  // on at once to the woken task (`proc`, one call; its start in woken_start).
  void wake_through(ExecCtx& sched, Time at) {
    engine.at(at, [this, &sched] {
      cpu.submit({&sched, [this, &sched] {
                    charge(sched, 1);
                    engine.after_task([this] {
                      cpu.submit_next({&proc, [this] {
                                         woken_start = engine.now();
                                         charge(proc, 1);
                                       }});
                    });
                  }});
    });
  }

  // A task that records its start and charges `calls` x 100 ps.
  Task task(ExecCtx& ctx, std::string name, std::uint32_t calls) {
    return Task{&ctx, [this, &ctx, name = std::move(name), calls] {
                  EXPECT_TRUE(engine.in_task());
                  EXPECT_EQ(engine.current_ctx(), &ctx);
                  EXPECT_TRUE(cpu.running());
                  runs.push_back({name, engine.now()});
                  charge(ctx, calls);
                }};
  }
};

TEST_F(CpuFixture, WaitingWorkRunsHardIrqThenSoftIrqThenProcess) {
  // Everything submitted at the same instant while the CPU is idle: the CPU starts from the event
  // loop, so it sees all three and picks by level, not by submission order.
  engine.at(0, [&] {
    cpu.submit(task(proc, "proc", 1));
    cpu.submit(task(soft, "soft", 1));
    cpu.submit(task(hard, "hard", 1));
  });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].name, "hard");
  EXPECT_EQ(runs[1].name, "soft");
  EXPECT_EQ(runs[2].name, "proc");
  EXPECT_EQ(runs[0].start, 0);
  EXPECT_EQ(runs[1].start, 100);
  EXPECT_EQ(runs[2].start, 200);
}

TEST_F(CpuFixture, RunningTaskIsNeverPreempted) {
  engine.at(0, [&] { cpu.submit(task(proc, "proc-long", 10)); });  // busy 0..1000
  // Higher-level work arrives while the process task is running: it waits for the task's end.
  engine.at(300, [&] {
    EXPECT_TRUE(cpu.running());
    cpu.submit(task(proc2, "proc-2", 1));
    cpu.submit(task(soft, "soft", 1));
    cpu.submit(task(hard, "hard", 1));
  });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 4U);
  EXPECT_EQ(runs[0].name, "proc-long");
  EXPECT_EQ(runs[0].start, 0);
  EXPECT_EQ(runs[1].name, "hard");
  EXPECT_EQ(runs[1].start, 1000);  // not 300: no preemption
  EXPECT_EQ(runs[2].name, "soft");
  EXPECT_EQ(runs[2].start, 1100);
  EXPECT_EQ(runs[3].name, "proc-2");
  EXPECT_EQ(runs[3].start, 1200);
  EXPECT_EQ(cpu.busy_ps(), 1300);
  EXPECT_FALSE(cpu.running());
}

TEST_F(CpuFixture, SameLevelWorkIsFifo) {
  engine.at(0, [&] {
    cpu.submit(task(soft, "s1", 1));
    cpu.submit(task(soft, "s2", 2));
    cpu.submit(task(soft, "s3", 1));
  });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].name, "s1");
  EXPECT_EQ(runs[1].name, "s2");
  EXPECT_EQ(runs[2].name, "s3");
  EXPECT_EQ(runs[1].start, 100);
  EXPECT_EQ(runs[2].start, 300);
}

// submit_next queues a task's continuations ahead of the work already waiting at their level, in
// the order the task queued them, and a continuation's own continuation before its sibling's:
// a NAPI poll that hands on the rest of each frame's way up (tcp_v4_rcv's owner check) delivers
// the frames in order, as the kernel's poll loop does.
TEST_F(CpuFixture, ContinuationsRunBeforeWaitingWorkInTheOrderQueued) {
  engine.at(0, [&] {
    cpu.submit({&soft, [&] {
                  runs.push_back({"poll", engine.now()});
                  charge(soft, 1);
                  cpu.submit(task(soft, "waiting", 1));  // the next packet's run, say
                  cpu.submit_next({&soft, [&] {
                                     runs.push_back({"frame-1", engine.now()});
                                     charge(soft, 1);
                                     cpu.submit_next(task(soft, "frame-1-more", 1));
                                   }});
                  cpu.submit_next(task(soft, "frame-2", 1));
                  cpu.submit_next(task(soft, "frame-3", 1));
                  EXPECT_TRUE(cpu.queued_next(Level::kSoftIrq));
                  EXPECT_FALSE(cpu.queued_next(Level::kProcess));
                }});
  });
  engine.run_until(10'000);
  std::vector<std::string> order;
  for (const Run& r : runs) {
    order.push_back(r.name);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"poll", "frame-1", "frame-1-more", "frame-2",
                                             "frame-3", "waiting"}));
  ASSERT_EQ(runs.size(), 6U);
  EXPECT_EQ(runs[5].start, 500);
  EXPECT_FALSE(cpu.queued_next(Level::kSoftIrq));
}

TEST_F(CpuFixture, PricedLedgerTimeKeepsTheCpuBusyAndHandOffsAtTheEndFireAtTheEnd) {
  Time cont_at = -1;
  int conts = 0;
  engine.at(1000, [&] {
    cpu.submit({&proc, [&] {
                  charge(proc, 3);                                   // 300 ps
                  proc.ledger().record(Work{.sym = Sym::kMemcpy});   // 100 ps
                  engine.after_task([&] {
                    cont_at = engine.now();
                    ++conts;
                    EXPECT_FALSE(engine.in_task());
                  });
                  engine.after_task([&] { ++conts; });
                  // Nothing handed on has happened yet.
                  EXPECT_EQ(conts, 0);
                }});
  });
  // Mid-task: the CPU is busy.
  std::vector<bool> running_at;
  for (Time t : {1001, 1200, 1399}) {
    engine.at(t, [&] { running_at.push_back(cpu.running()); });
  }
  engine.run_until(10'000);
  EXPECT_EQ(cont_at, 1400);  // 1000 + 4 x 100 ps of priced ledger time
  EXPECT_EQ(conts, 2);
  EXPECT_EQ(running_at, (std::vector<bool>{true, true, true}));
  EXPECT_FALSE(cpu.running());
  EXPECT_EQ(cpu.busy_ps(), 400);
  EXPECT_EQ(proc.ledger().total().cost_ps, 400);
  EXPECT_EQ(proc.ledger().pending_ps(), 0);  // the engine took it
}

// A hand-off happens once the work priced before it has passed, not when the whole task ends: a
// packet handed on after the first of three steps reaches the next CPU a third of the way in.
TEST_F(CpuFixture, HandOffsHappenAtTheirPointInsideTheTask) {
  std::vector<Time> handed;
  std::vector<bool> busy_then;
  engine.at(1000, [&] {
    cpu.submit({&proc, [&] {
                  charge(proc, 1);  // 100 ps
                  engine.after_task([&] {
                    handed.push_back(engine.now());
                    busy_then.push_back(cpu.running());
                  });
                  charge(proc, 2);  // 200 ps more
                  engine.after_task([&] {
                    handed.push_back(engine.now());
                    busy_then.push_back(cpu.running());
                  });
                }});
  });
  engine.run_until(10'000);
  EXPECT_EQ(handed, (std::vector<Time>{1100, 1300}));
  // The CPU is still busy with the task at the first hand-off; the last one, at the end, runs
  // before the CPU is released (so what it submits there runs next, as below).
  EXPECT_EQ(busy_then, (std::vector<bool>{true, true}));
  EXPECT_EQ(cpu.busy_ps(), 300);
}

TEST_F(CpuFixture, PerByteCostsArePricedIntoBusyTime) {
  model.copy_fs_per_byte = 500;   // 2 bytes per ns
  model.csum_fs_per_byte = 250;   // 4 bytes per ns
  model.fused_fs_per_byte = 1000;  // 1 byte per ns
  model.page_ref_ps = 7;
  Time cont_at = -1;
  engine.at(0, [&] {
    cpu.submit({&soft, [&] {
                  soft.ledger().record(Work{.sym = Sym::kPskbExpandHead, .copied = 1804});
                  soft.ledger().record(Work{.sym = Sym::kCsumPartial, .summed = 20});
                  soft.ledger().record(
                      Work{.sym = Sym::kCsumPartialCopyGeneric, .fused = 1448, .page_refs = 2});
                  engine.after_task([&] { cont_at = engine.now(); });
                }});
  });
  engine.run_until(kPsPerSec);
  // 3 calls x 100 + 1804 x 0.5 + 20 x 0.25 + 1448 x 1 + 2 x 7 ps.
  const Time expect = 300 + 902 + 5 + 1448 + 14;
  EXPECT_EQ(cont_at, expect);
  EXPECT_EQ(cpu.busy_ps(), expect);
  EXPECT_EQ(soft.ledger().total().cost_ps, expect);
}

TEST_F(CpuFixture, ContinuationSubmittingHigherLevelWorkRunsItNext) {
  engine.at(0, [&] {
    cpu.submit(task(proc2, "proc-queued", 1));
    cpu.submit({&proc, [&] {
                  runs.push_back({"proc", engine.now()});
                  charge(proc, 2);
                  engine.after_task([&] { cpu.submit(task(soft, "soft-from-cont", 1)); });
                }});
    cpu.submit(task(proc2, "proc-after", 1));
  });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 4U);
  EXPECT_EQ(runs[0].name, "proc-queued");
  EXPECT_EQ(runs[1].name, "proc");
  EXPECT_EQ(runs[1].start, 100);
  // Submitted by the continuation at the end of "proc" (300): it runs before the process task
  // that was queued earlier.
  EXPECT_EQ(runs[2].name, "soft-from-cont");
  EXPECT_EQ(runs[2].start, 300);
  EXPECT_EQ(runs[3].name, "proc-after");
  EXPECT_EQ(runs[3].start, 400);
}

TEST_F(CpuFixture, WorkThatFindsItsCpuBusyWaits) {
  engine.at(0, [&] { cpu.submit(task(soft, "first", 5)); });       // busy 0..500
  engine.at(120, [&] { cpu.submit(task(proc, "second", 1)); });    // waits until 500
  engine.at(2000, [&] { cpu.submit(task(proc, "idle-start", 1)); });  // idle CPU: starts at once
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[1].name, "second");
  EXPECT_EQ(runs[1].start, 500);
  EXPECT_EQ(runs[2].name, "idle-start");
  EXPECT_EQ(runs[2].start, 2000);
  EXPECT_EQ(cpu.busy_ps(), 700);
}

TEST_F(CpuFixture, ZeroCostTaskFiresItsContinuationAtTheSameTime) {
  Time cont_at = -1;
  engine.at(50, [&] {
    cpu.submit({&proc, [&] { engine.after_task([&] { cont_at = engine.now(); }); }});
  });
  engine.run_until(1000);
  EXPECT_EQ(cont_at, 50);
  EXPECT_EQ(cpu.busy_ps(), 0);
}

// ---- leaving the idle loop (cpu.idle_exit_blocked_us) ---------------------------------------------

// A CPU counts each end of a halt that lasted some time: one at 1000 ps (idle since the start),
// one at 3000 (idle since 1100); work submitted at the instant the CPU went idle (two events at
// one time, not a halt) ends none.
TEST_F(CpuFixture, IdleExitsCountHaltsOfSomeTimeOnly) {
  engine.at(1000, [&] {
    cpu.submit({&proc, [&] {
                  charge(proc, 1);
                  engine.after_task([&] {
                    // After the task's end event: the CPU has just gone idle at 1100.
                    engine.at(engine.now(), [&] { cpu.submit(task(soft, "at-once", 0)); });
                  });
                }});
  });
  engine.at(3000, [&] { cpu.submit(task(proc, "later", 1)); });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[0].name, "at-once");
  EXPECT_EQ(runs[0].start, 1100);
  EXPECT_EQ(cpu.idle_exits(), 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 0U);  // counted, not charged by default
  EXPECT_EQ(cpu.busy_ps(), 200);
}

// With charging on, an exit after a halt longer than the threshold records one
// tick_nohz_idle_exit in the ledger of the task that ends it, once the CPU has run what it had
// queued: the task's hand-off keeps its place, what it queued runs first, and the CPU's busy
// time holds the exit before it halts again. A shorter halt is counted and costs nothing.
TEST_F(CpuFixture, IdleExitAfterALongHaltIsChargedToTheTaskEndingItAfterItsWork) {
  cpu.charge_idle_exits_after(500);
  Time handed = -1;
  Time next = -1;
  engine.at(1000, [&] {  // halted 1000 ps: charged
    cpu.submit({&proc, [&] {
                  charge(proc, 2);
                  engine.after_task([&] {
                    handed = engine.now();
                    cpu.submit({&proc2, [&] { next = engine.now(); }});
                  });
                }});
  });
  engine.at(1600, [&] { cpu.submit(task(soft, "short halt", 1)); });  // halted 300 ps (1300..1600)
  engine.run_until(10'000);
  EXPECT_EQ(handed, 1200);  // 1000 + two calls of 100 ps; the exit's 100 ps come after
  EXPECT_EQ(next, 1200);    // what the task queued runs before the exit
  EXPECT_EQ(cpu.idle_exits(), 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(soft.ledger().cell(Sym::kIdleExit).calls, 0U);
  EXPECT_EQ(cpu.busy_ps(), 400);
  EXPECT_EQ(proc.ledger().total().cost_ps + soft.ledger().total().cost_ps, cpu.busy_ps());
}

// With a slowdown (cpu.idle_exit_slowdown), a long halt's exit slows the work after it instead of
// following it: each call costs `slowdown` times its price more, the excess charged to that call,
// until the excess reaches the exit's price. The CPU's busy time is what it was without the
// slowdown; the work's timing is not (the hand-off comes later, the halt no later).
TEST_F(CpuFixture, ALongHaltsExitSlowsTheWorkAfterItUntilItsCostIsPaid) {
  cpu.charge_idle_exits_after(500);
  cpu.slow_after_idle_exits(/*exit_ps=*/150, /*slowdown=*/1.0, /*local_slowdown=*/1.0);
  Time handed = -1;
  Time second_start = -1;
  engine.at(1000, [&] {  // halted 1000 ps
    cpu.submit({&proc, [&] {
                  charge(proc, 1);  // 100 ps at twice: 200, 50 left to pay
                  engine.after_task([&] {
                    handed = engine.now();
                    cpu.submit({&soft, [&] {
                                  second_start = engine.now();
                                  charge(soft, 2);  // 150 and 100: the last 50 paid
                                }});
                  });
                }});
  });
  engine.at(1800, [&] { cpu.submit(task(proc2, "after a short halt", 1)); });  // 1450..1800
  engine.run_until(10'000);
  EXPECT_EQ(handed, 1200);
  EXPECT_EQ(second_start, 1200);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].start, 1800);
  EXPECT_EQ(proc.ledger().cell(Sym::kIpRcv).cost_ps, 200);
  EXPECT_EQ(soft.ledger().cell(Sym::kIpRcv).cost_ps, 250);
  EXPECT_EQ(proc2.ledger().cell(Sym::kIpRcv).cost_ps, 100);  // a short halt slows nothing
  // The exit is still counted, with nothing left to charge.
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).cost_ps, 0);
  EXPECT_EQ(cpu.busy_ps(), 550);  // three calls at 100, the exit's 150, one call after 1800
  EXPECT_EQ(proc.ledger().total().cost_ps + soft.ledger().total().cost_ps +
                proc2.ledger().total().cost_ps,
            cpu.busy_ps());
}

// What the work has not paid when the CPU halts again is charged then, as the exit.
TEST_F(CpuFixture, WhatTheSlowedWorkLeftOfTheExitIsChargedBeforeTheNextHalt) {
  cpu.charge_idle_exits_after(500);
  cpu.slow_after_idle_exits(/*exit_ps=*/500, /*slowdown=*/0.5, /*local_slowdown=*/0.5);
  engine.at(1000, [&] { cpu.submit(task(proc, "after a long halt", 2)); });  // 2 x 150
  engine.at(5000, [&] { cpu.submit(task(proc, "after another", 1)); });
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(runs[1].start, 5000);
  EXPECT_EQ(proc.ledger().cell(Sym::kIpRcv).cost_ps, 300 + 150);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).cost_ps, 400 + 450);  // the rest of each exit
  EXPECT_EQ(cpu.busy_ps(), 300 + 2 * 500);  // the same as without the slowdown
}

// The rate depends on what ended the halt: an IPI from another CPU (Task::by_ipi: the reader's
// wake-up) slows the work after it at `slowdown`, anything else (the paced sender's own timer) at
// `local_slowdown`; at 0 that exit is charged whole before the next halt, as unslowed.
TEST_F(CpuFixture, TheSlowdownIsTheIpisOrTheLocalOnesByWhatEndedTheHalt) {
  cpu.charge_idle_exits_after(500);
  cpu.slow_after_idle_exits(/*exit_ps=*/400, /*slowdown=*/1.0, /*local_slowdown=*/0.0);
  engine.at(1000, [&] {
    Task t = task(proc, "an IPI's", 2);  // 2 x 200: 200 of the exit paid, 200 left
    t.by_ipi = true;
    cpu.submit(std::move(t));
  });
  engine.at(5000, [&] { cpu.submit(task(proc2, "the timer's", 2)); });  // unslowed
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIpRcv).cost_ps, 400);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).cost_ps, 200);
  EXPECT_EQ(proc2.ledger().cell(Sym::kIpRcv).cost_ps, 200);
  EXPECT_EQ(proc2.ledger().cell(Sym::kIdleExit).cost_ps, 100);  // whole, at the model's price
  EXPECT_EQ(cpu.busy_ps(), 400 + 200 + 200 + 100);
  // And the other way round: the local rate applies where no IPI ended the halt.
  Engine e2;
  Cpu c2(e2, 0);
  ExecCtx p2{"p", c2, Level::kProcess, &model};
  c2.charge_idle_exits_after(500);
  c2.slow_after_idle_exits(/*exit_ps=*/400, /*slowdown=*/0.0, /*local_slowdown=*/1.0);
  e2.at(1000, [&] { c2.submit({&p2, [&] { charge(p2, 2); }}); });
  e2.run_until(10'000);
  EXPECT_EQ(p2.ledger().cell(Sym::kIpRcv).cost_ps, 400);
  EXPECT_EQ(p2.ledger().cell(Sym::kIdleExit).cost_ps, 200);
}

// The scheduler's switch-in that ends a long halt runs at its price (the measured wake-up
// latencies hold it as it ran); the woken task it hands to is slowed. The task that charges what is
// left of the exit does not slow its own idle period (a time measured in that state).
TEST_F(CpuFixture, TheSwitchInIsNotSlowedTheWokenTaskIs) {
  cpu.charge_idle_exits_after(500);
  cpu.charge_idle_periods();
  cpu.slow_after_idle_exits(/*exit_ps=*/400, /*slowdown=*/1.0, /*local_slowdown=*/1.0);
  ExecCtx sched{"sched", cpu, Level::kProcess, &model};
  sched.set_switches_in(true);
  wake_through(sched, 1000);
  engine.run_until(10'000);
  EXPECT_EQ(woken_start, 1100);
  EXPECT_EQ(sched.ledger().cell(Sym::kIpRcv).cost_ps, 100);
  EXPECT_EQ(proc.ledger().cell(Sym::kIpRcv).cost_ps, 200);
  EXPECT_EQ(proc.ledger().cell(Sym::kScheduleIdle).cost_ps, 100);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).cost_ps, 300);
  EXPECT_EQ(cpu.busy_ps(), 100 + 200 + 100 + 300);  // the same as unslowed: 3 calls, 1 exit
}

// A halt ended by the scheduler switching a woken task in: the switch-in (IPI, __schedule)
// hands over at once and pays nothing for the exit; the woken task pays, after its work, so it
// starts when the kernel's would (about 5 us after sched_wakeup; docs/measure.md).
TEST_F(CpuFixture, IdleExitEndedBySwitchingInIsPaidByTheWokenTask) {
  cpu.charge_idle_exits_after(500);
  ExecCtx sched{"sched", cpu, Level::kProcess, &model};
  sched.set_switches_in(true);
  wake_through(sched, 1000);
  engine.run_until(10'000);
  EXPECT_EQ(woken_start, 1100);  // right after the switch-in's one call
  EXPECT_EQ(sched.ledger().cell(Sym::kIdleExit).calls, 0U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(cpu.busy_ps(), 300);  // two calls and the exit
}

// With idle periods charged (cpu.idle_period_us), every halt's end records one schedule_idle,
// the short halt's as well as the long one's, which records its tick_nohz_idle_exit beside it;
// a gap of no time is not a period.
TEST_F(CpuFixture, EveryIdlePeriodIsChargedOnceToTheTaskEndingIt) {
  cpu.charge_idle_exits_after(500);
  cpu.charge_idle_periods();
  // 1000..1100 the task that ends a 1000 ps halt; 1100..1200 the task it handed on, queued
  // ahead of what the halt costs; 1200..1400 that cost, a period and a long exit; then halted.
  engine.at(1000, [&] {
    cpu.submit({&proc, [&] {
                  charge(proc, 1);
                  engine.after_task([&] { cpu.submit(task(proc2, "handed on", 1)); });
                }});
  });
  // At 1400, the instant the CPU halts, after it (an event of that time put in later than the
  // exit's end): a gap of no time, not a period.
  engine.at(1300, [&] { engine.at(1400, [&] { cpu.submit(task(soft, "at-once", 1)); }); });
  engine.at(1700, [&] { cpu.submit(task(proc, "short halt", 1)); });  // halted 1500..1700
  engine.run_until(10'000);
  ASSERT_EQ(runs.size(), 3U);
  EXPECT_EQ(runs[0].start, 1100);
  EXPECT_EQ(runs[1].start, 1400);
  EXPECT_EQ(cpu.idle_exits(), 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kScheduleIdle).calls, 2U);
  EXPECT_EQ(proc.ledger().cell(Sym::kIdleExit).calls, 1U);
  EXPECT_EQ(proc2.ledger().cell(Sym::kScheduleIdle).calls, 0U);
  EXPECT_EQ(soft.ledger().cell(Sym::kScheduleIdle).calls, 0U);
  EXPECT_EQ(cpu.busy_ps(), 700);  // four tasks, two periods and one long exit at 100 ps each
}

// Halts ended by switch-ins alone (the woken task not yet run) are each charged, with the next
// task that is not one.
TEST_F(CpuFixture, IdlePeriodsEndedBySwitchInsAreChargedWithTheNextTask) {
  cpu.charge_idle_periods();
  ExecCtx sched{"sched", cpu, Level::kProcess, &model};
  sched.set_switches_in(true);
  engine.at(1000, [&] { cpu.submit(task(sched, "switch-in", 1)); });
  engine.at(2000, [&] { cpu.submit(task(sched, "switch-in", 1)); });
  engine.at(3000, [&] { cpu.submit(task(proc, "woken", 1)); });
  engine.run_until(10'000);
  EXPECT_EQ(cpu.idle_exits(), 3U);
  EXPECT_EQ(sched.ledger().cell(Sym::kScheduleIdle).calls, 0U);
  EXPECT_EQ(proc.ledger().cell(Sym::kScheduleIdle).calls, 3U);
}

TEST(Cpus, EachCpuIsIndependent) {
  CostModel model = flat_model(100);
  Engine engine;
  Cpu c0{engine, 0};
  Cpu c1{engine, 1};
  ExecCtx p0{"p0", c0, Level::kProcess, &model};
  ExecCtx p1{"p1", c1, Level::kProcess, &model};
  std::vector<std::pair<std::string, Time>> starts;
  engine.at(0, [&] {
    c0.submit({&p0, [&] {
                 starts.emplace_back("c0", engine.now());
                 charge(p0, 10);
               }});
    c1.submit({&p1, [&] {
                 starts.emplace_back("c1", engine.now());
                 charge(p1, 3);
               }});
  });
  engine.run_until(10'000);
  ASSERT_EQ(starts.size(), 2U);
  EXPECT_EQ(starts[0].second, 0);
  EXPECT_EQ(starts[1].second, 0);  // CPU 1 does not wait for CPU 0
  EXPECT_EQ(c0.busy_ps(), 1000);
  EXPECT_EQ(c1.busy_ps(), 300);
  // Utilisation = busy / (CPUs x elapsed): 1300 ps over 2 CPUs x 10'000 ps.
  const double util = static_cast<double>(c0.busy_ps() + c1.busy_ps()) / (2.0 * 10'000.0);
  EXPECT_DOUBLE_EQ(util, 0.065);
}

// ---- accounting over a whole run -----------------------------------------------------------------

TEST(EngineAccounting, BusyTimeEqualsTheLedgersPricedTotal) {
  CostModel model = flat_model(37);
  model.copy_fs_per_byte = 333;
  Engine engine;
  Cpu c0{engine, 0};
  Cpu c1{engine, 1};
  ExecCtx a{"a", c0, Level::kProcess, &model};
  ExecCtx b{"b", c0, Level::kSoftIrq, &model};
  ExecCtx c{"c", c1, Level::kHardIrq, &model};
  // A chain of tasks handing work to each other through continuations.
  int left = 50;
  std::function<void(ExecCtx&)> step = [&](ExecCtx& ctx) {
    ctx.ledger().record(Work{.sym = Sym::kMemcpy, .copied = static_cast<std::uint32_t>(left * 7)});
    charge(ctx, static_cast<std::uint32_t>(left % 4));
    if (--left > 0) {
      ExecCtx* next = left % 3 == 0 ? &a : (left % 3 == 1 ? &b : &c);
      engine.after_task([&, next] { next->cpu().submit({next, [&, next] { step(*next); }}); });
    }
  };
  engine.at(0, [&] { c0.submit({&a, [&] { step(a); }}); });
  engine.run_until(kPsPerSec);
  EXPECT_EQ(left, 0);
  const std::int64_t ledgers =
      a.ledger().total().cost_ps + b.ledger().total().cost_ps + c.ledger().total().cost_ps;
  EXPECT_GT(ledgers, 0);
  EXPECT_EQ(c0.busy_ps() + c1.busy_ps(), ledgers);
  EXPECT_EQ(a.ledger().pending_ps() + b.ledger().pending_ps() + c.ledger().pending_ps(), 0);
}

TEST(EngineAccounting, ScenarioUtilisationIsBusyOverCpusTimesElapsed) {
  ScenarioSpec s = thread2007(Thread2007::kContainer, uniform_cost(2.0, 100, 2.0, 2.0, 1.5));
  s.duration_s = 0.02;
  s.warmup_s = 0.01;
  const RunResult r = run_scenario(s);
  ASSERT_EQ(r.hosts.size(), 2U);
  for (const HostResult& h : r.hosts) {
    SCOPED_TRACE(h.name);
    EXPECT_EQ(h.cpus_counted, 2U);
    EXPECT_GT(h.busy_ps, 0);
    const double expect = 100.0 * static_cast<double>(h.busy_ps) /
                          (static_cast<double>(h.cpus_counted) * s.duration_s *
                           static_cast<double>(kPsPerSec));
    EXPECT_NEAR(h.cpu_util_pct, expect, 1e-9 * expect);
    EXPECT_GT(h.cpu_util_pct, 0.0);
    EXPECT_LE(h.cpu_util_pct, 100.0);
    // Busy time in the window is the window's priced ledger total on that host, up to the tasks
    // straddling the window's edges (busy time counts them as their time passes, /proc/stat
    // style; the ledger when they run): at most one per CPU per edge, well under 1% here.
    EXPECT_NEAR(static_cast<double>(h.busy_ps), static_cast<double>(h.total.cost_ps),
                0.01 * static_cast<double>(h.total.cost_ps));
  }
  // Over the whole run, busy time and priced ledger time agree.
  EXPECT_EQ(r.total_busy_ps, r.total_ledger_ps);
}

}  // namespace
}  // namespace skbsim::sim
