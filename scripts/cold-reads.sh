#!/usr/bin/env bash
# How much slower iperf3's reader works right after its CPU leaves a long halt, beside one `skbsim
# measure --trace off`: runs scripts/cold-reads.bt (bpftrace: syscall and sched_switch tracepoints)
# and prints, from the stream's first 128 KB write to the first iperf3 exit, the read() calls that
# copied more than 1000 bytes by kind: the first after their CPU left an idle period into iperf3,
# the second, and the rest, the first two by the idle period's length (under 20 us, 20-200 us, 200
# us or more: a halt past KVM's polling window). Per kind: the count, the mean bytes and time, the
# least-squares line of time over bytes, and how long after the idle period's end the call started.
# The probes' own time is in these figures, alike for every kind. Root; mounts tracefs for the run
# if it is not mounted (and unmounts it). docs/measure.md, "Work after a long halt, slowed", says
# how cpu.idle_exit_slowdown is made from two such runs.
#
#   bash scripts/cold-reads.sh OUT_DIR [skbsim measure options...]
#   bash scripts/cold-reads.sh --compare COLD_OUTPUT WARM_OUTPUT
#   e.g. bash scripts/cold-reads.sh /tmp/cr --topology direct --variant on --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# --compare takes two such printed outputs (each run's summary.txt), a run at a fixed rate (its
# reader halts long between writes) and one unlimited (it seldom does), and prints how much longer
# the first call after a long halt took than the unlimited run's warm line gives for its size.
# OUT_DIR gets the measurement, cold-reads.txt (bpftrace's maps) and summary.txt (what is
# printed). Name one configuration of one run: the counting stops at the first stream's end.
# Exit codes: 0 measured (or compared); 1 a tool or the run failed, or an output without the
# lines --compare needs; 2 a usage error or a bad skbsim measure flag.
set -euo pipefail
usage() {
  echo "usage: cold-reads.sh OUT_DIR [skbsim measure options...]" >&2
  echo "       cold-reads.sh --compare COLD_OUTPUT WARM_OUTPUT" >&2
  exit 2
}
# Paths as given, before the cd to the checkout.
abs() { realpath -m -- "$1"; }
if [[ ${1:-} == --compare ]]; then
  [[ $# -eq 3 ]] || usage
  cold=$(abs "$2")
  warm=$(abs "$3")
  for f in "$cold" "$warm"; do
    if [[ ! -r $f ]]; then
      echo "cold-reads: cannot read $f" >&2
      exit 1
    fi
  done
  cd "$(dirname "$0")/.."
  awk -v cold="$cold" '
    FILENAME == cold && /^first after a long halt:/ { bytes = $8; us = $10; seen = 1 }
    FILENAME != cold && /^warm line:/ { slope = $3; intercept = $6; line = 1 }
    END {
      if (!seen || !line) {
        print "cold-reads: expected a \"first after a long halt\" line in the first output and a " \
          "\"warm line\" in the second" > "/dev/stderr"
        exit 1
      }
      warm_us = intercept + slope * bytes / 1000
      printf "the first call after a long halt, %d bytes: %.3f us against the warm line'"'"'s %.3f us: " \
        "%.3f times (cpu.idle_exit_slowdown %.3f)\n", bytes, us, warm_us, us / warm_us, us / warm_us - 1
    }' "$cold" "$warm"
  exit
fi
[[ $# -ge 1 && $1 != -* ]] || usage
out=$(abs "$1")
shift
cd "$(dirname "$0")/.."
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/cold-reads.txt"
trace_measure_once cold-reads "$out" "$maps" scripts/cold-reads.bt 0 "$@"
python3 - "$maps" <<'PY' | tee "$out/summary.txt"
import collections
import re
import sys

maps = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    m = re.match(r"@(\w+)\[(\d+)\]: (-?\d+)$", line.strip())
    if m:
        maps[m.group(1)][int(m.group(2))] = int(m.group(3))
if not maps["n"]:
    sys.exit("cold-reads: no read() of the stream was seen (was the stream iperf3's?)")
lengths = {0: "under 20 us", 1: "20-200 us", 2: "200 us or more"}
print("read() calls that copied more than 1000 bytes, by kind (the idle period before them):")
print("  kind                           calls     bytes   mean us  ns/byte  slope ns/B  "
      "intercept us  after idle us")
for k in sorted(maps["n"]):
    n = maps["n"][k]
    kind = "the rest" if k == 0 else ("first" if k < 20 else "second") + ", " + lengths[k % 10]
    mb = maps["bytes"][k] / n
    mt = maps["ns"][k] / n
    vb = maps["bytes2"][k] / n - mb * mb
    # A line needs sizes that differ: three calls at least, spread over a thousandth of their size.
    spread = n >= 3 and vb > (mb * 1e-3) ** 2
    slope = (maps["bytes_ns"][k] / n - mb * mt) / vb if spread else None
    if slope is not None:
        line = f"{slope:10.4f}  {(mt - slope * mb) / 1e3:12.2f}"
    else:
        line = f"{'-':>10}  {'-':>12}"
    since = f"{maps['since_ns'][k] / n / 1e3:13.1f}" if k != 0 else f"{'-':>13}"
    print(f"  {kind:28s} {n:7d} {mb:9.0f} {mt / 1e3:9.2f} {mt / mb:8.4f}  {line}  {since}")

# The calls the model prices without a slowdown (all but the first and second after a halt of 200
# us or more), pooled into one line; the first two after such a halt against that line.
warm = [k for k in maps["n"] if k not in (12, 22)]
sums = {name: sum(maps[name][k] for k in warm) for name in ("n", "bytes", "ns", "bytes2", "bytes_ns")}
slope = intercept = None
if sums["n"] >= 2:
    n = sums["n"]
    mb, mt = sums["bytes"] / n, sums["ns"] / n
    vb = sums["bytes2"] / n - mb * mb
    if vb > 0:
        slope = (sums["bytes_ns"] / n - mb * mt) / vb
        intercept = mt - slope * mb
        print(f"warm line: {slope:.4f} ns/B, intercept {intercept / 1e3:.3f} us, over {n} calls")
for k, which in ((12, "first"), (22, "second")):
    if k not in maps["n"]:
        continue
    size = maps["bytes"][k] / maps["n"][k]
    took = maps["ns"][k] / maps["n"][k]
    against = ""
    if slope is not None:
        against = f": {took / (intercept + slope * size):.3f} times the warm line at its size"
    print(f"{which} after a long halt: {maps['n'][k]} calls, {size:.0f} bytes, {took / 1e3:.3f} us"
          f"{against}")
PY
