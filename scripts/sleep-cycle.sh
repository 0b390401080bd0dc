#!/usr/bin/env bash
# What one sleep-and-wake cycle of iperf3's reader costs its CPU, beside one `skbsim measure
# --trace off`: runs scripts/sleep-cycle.bt (bpftrace: syscall, sched_switch and power:cpu_idle
# tracepoints) and prints, from the stream's first 128 KB write to the first iperf3 exit (the
# stream's end), for the reader (the iperf3 thread that read the most) and its CPU:
# - read(): by size, the count, mean and least time; the slope of the mean time over the size
#   (each step at its reads' mean size, weighted by count) as bytes per ns, what a preset's
#   cpu.copy_to_user_bytes_per_ns is made from (the slope also holds whatever else grows with
#   the bytes a read takes, so the copy itself is at least that fast);
# - select(): the mean time on the CPU of the calls that did not sleep and of those that did
#   (the difference is the two switches, calls.symbols.__schedule; do_select itself is measured
#   untraced by scripts/select-cost.c);
# - idle periods: the idle task's time outside its cpuidle states per period (entering, leaving,
#   and the periods that ended before any state), cpu.idle_period_us; the mean time from the
#   switch to the idle task to its first state, in which a wake-up needs no IPI (the task polls:
#   TIF_POLLING_NRFLAG), cpu.idle_poll_us.
# The probes' own time is in these figures (the docs' section says how much to take out); the
# measure's speed probe reads slower system calls while syscall tracepoints are attached. Root;
# mounts tracefs for the run if it is not mounted (and unmounts it). docs/measure.md, "What a
# sleep costs the reader's CPU".
#
#   bash scripts/sleep-cycle.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/sleep-cycle.sh /tmp/sc --topology direct --variant on --rate unlimited \
#          --runs 1 --duration 3 --congestion-control cubic
#
# Then the model's reader on the scenario the measure wrote, its copying calls timed the same way
# (tcp_reader: docs/results.md), when the model runs it.
#
# OUT_DIR gets the measurement, sleep-cycle.txt (bpftrace's maps), model.json and
# model-timeline.tsv (the model's errors, if any, in model.err). Name one configuration of
# one run: the counting stops at the first stream's end (and the measure redoes no run unless
# --unsteady-retries is given). Exit codes: 0 measured; 1 a tool or the run failed; 2 a bad
# skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: sleep-cycle.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/sleep-cycle.txt"
trace_measure_once sleep-cycle "$out" "$maps" scripts/sleep-cycle.bt 0 "$@"
python3 - "$maps" <<'EOF'
import collections
import re
import sys

# bpftrace's maps: "@name: v", "@name[k]: v", "@name[k1, k2]: v"
one, keyed = {}, collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r"@(\w+)\[(\d+)(?:, (\d+))?\]: (\d+)$", line)
    if m:
        key = int(m.group(2)) if m.group(3) is None else (int(m.group(2)), int(m.group(3)))
        keyed[m.group(1)][key] = int(m.group(4))
        continue
    m = re.match(r"@(\w+): (\d+)$", line)
    if m:
        one[m.group(1)] = int(m.group(2))
if not keyed["read_bytes"]:
    sys.exit("sleep-cycle: no read() of the stream was seen (was the stream iperf3's?)")
if "window_ns" not in one:
    print("sleep-cycle: the stream's end (an iperf3 exit) was not seen: counted to bpftrace's end")
reader = max(keyed["read_bytes"], key=keyed["read_bytes"].get)
cpus = {c: n for (t, c), n in keyed["read_cpu"].items() if t == reader}
cpu = max(cpus, key=cpus.get)
print(f"stream window {one.get('window_ns', 0) / 1e9:.3f} s; the reader, thread {reader}, "
      f"read on CPU {cpu}")


def by_bucket(name):
    return {b: v for (t, b), v in keyed[name].items() if t == reader}


n, ns, least = by_bucket("read_n"), by_bucket("read_ns"), by_bucket("read_min")
size = by_bucket("read_size")
reads = sum(n.values())
empty = keyed["read_empty_n"].get(reader, 0)
print(f"read(): {reads} that copied, {empty} that found nothing "
      f"({keyed['read_empty_ns'].get(reader, 0) / max(empty, 1) / 1e3:.2f} us each)")
print("  size (KB)        reads   mean us  least us   (sizes with under 1 % of the reads left out)")
xs, ys, ws = [], [], []
for b in sorted(n):
    if n[b] * 100 < reads:
        continue
    mean = ns[b] / n[b]
    print(f"  {b * 4:4d}-{b * 4 + 4:<4d}  {n[b]:12d}  {mean / 1e3:8.2f}  {least[b] / 1e3:8.2f}")
    xs.append(size[b] / n[b])  # the reads' mean size: a 128 KB read is 131072 bytes exactly
    ys.append(mean)
    ws.append(n[b])
slope = 0.0
if len(xs) >= 2:
    w = sum(ws)
    mx = sum(a * x for a, x in zip(ws, xs)) / w
    my = sum(a * y for a, y in zip(ws, ys)) / w
    sxx = sum(a * (x - mx) ** 2 for a, x in zip(ws, xs))
    slope = sum(a * (x - mx) * (y - my) for a, x, y in zip(ws, xs, ys)) / sxx if sxx else 0
if slope > 0:
    print(f"  slope {slope:.4f} ns per byte: {1 / slope:.2f} bytes per ns "
          f"(intercept {(my - slope * mx) / 1e3:.2f} us)")
else:
    print("  no slope: one size only, or the time does not grow with the size")

for kind in ("awake", "slept"):
    k = keyed[f"select_{kind}_n"].get(reader, 0)
    mean = keyed[f"select_{kind}_ns"].get(reader, 0) / max(k, 1) / 1e3
    label = "did not sleep" if kind == "awake" else "slept"
    print(f"select(): {k} that {label}, {mean:.2f} us on the CPU each")

periods = keyed["periods"].get(cpu, 0)
if periods:
    task = keyed["idle_task_ns"].get(cpu, 0)
    states = keyed["state_ns"].get(cpu, 0)
    entered = keyed["enter_n"].get(cpu, 0)
    stateless = keyed["stateless_n"].get(cpu, 0)
    print(f"idle periods on CPU {cpu}: {periods}, {task / periods / 1e3:.2f} us each, "
          f"{states / periods / 1e3:.2f} of them in cpuidle states")
    print(f"  outside the states: {(task - states) / periods / 1e3:.2f} us per period "
          f"(cpu.idle_period_us)")
    if entered:
        def each(name):
            return keyed[name].get(cpu, 0) / entered / 1e3
        print(f"  {entered} reached a state: entering {each('enter_ns'):.2f} us "
              f"(cpu.idle_poll_us), leaving {each('leave_ns'):.2f} us, "
              f"between states {each('between_ns'):.2f} us")
    if stateless:
        print(f"  {stateless} ended before any state: "
              f"{keyed['stateless_ns'].get(cpu, 0) / stateless / 1e3:.2f} us each")
else:
    print(f"no idle period on CPU {cpu}")
EOF
# The model on the scenario the measure wrote: its reader's copying calls timed the same way
# (tcp_reader in `skbsim run --format json`, every call fitted where the kernel's line above is
# fitted to the 4 KB steps' means).
if trace_measure_scenario sleep-cycle "$out" && trace_measure_model sleep-cycle "$out"; then
  python3 - "$out/model.json" <<'EOF'
import json
import sys

r = json.load(open(sys.argv[1])).get("tcp_reader", {})
if r.get("read_us") is None:
    print("model: no copying call timed (rebuild skbsim, or the scenario's reader copied nothing)")
    sys.exit(0)
print(f"model read(): {r.get('reads_copying') or 0:.4f} that copied per segment, "
      f"{r.get('bytes_per_copying_read') or 0:.0f} bytes and {r['read_us']:.2f} us each")
slope = r.get("read_ns_per_byte")
if slope is not None and slope > 0:
    print(f"  slope {slope:.4f} ns per byte: {1 / slope:.2f} bytes per ns "
          f"(intercept {r['read_intercept_us']:.2f} us)")
else:
    print("  no slope: one size only, or the time does not grow with the size")
EOF
fi
