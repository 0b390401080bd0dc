#!/usr/bin/env bash
# How fast the sender copies a write into its skbs, untraced otherwise: runs
# scripts/write-copy.bt (bpftrace: iperf3's write(), the client's transmits on skbm-c0 and the
# NET_RX softirqs on the writer's CPU) around one `skbsim measure --trace off` and prints, over
# its 128 KB writes, the median time from a softirq's exit to the transmit of a full 64 KB skb
# and to the tail's; their difference is the copy of the bytes between the two (the difference
# of the mean payloads) and the page fragments it fills, with the send path and the probes' own
# cost taken out. That rate is what a preset's cpu.copy_bytes_per_ns stands for (the sender's
# copy; the reader's is copy_to_user_bytes_per_ns, from scripts/sleep-cycle.sh). Then the model's
# means of the same intervals, from `skbsim run --format json` (tcp_writer) on the scenario the
# measure wrote, each transmit stamped at its device's start_xmit as the probe is. Root; mounts
# tracefs for the run if it is not mounted (and unmounts it). docs/measure.md, "The sender's
# copy".
#
#   bash scripts/write-copy.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/write-copy.sh /tmp/wc --topology direct --variant on --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement, write-copy.txt (bpftrace's maps) and model.json. Name one
# configuration of the defaults (offloads on: 64 KB GSO skbs; with an offload off the writes are
# cut into other sizes and there may be no tail). Exit codes: 0 measured; 1 a tool or the run
# failed, or no write had both intervals; 2 a bad skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: write-copy.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/write-copy.txt"
if ! command -v python3 >/dev/null; then
  echo "write-copy: expected python3, which prints the summary (apt-get install python3)" >&2
  exit 1
fi
trace_measure write-copy "$out" "$maps" scripts/write-copy.bt 0 "$@"
# The model on the scenario the measure wrote: its tcp_writer, the same intervals.
rm -f "$out/model.json"
if trace_measure_scenario write-copy "$out"; then
  trace_measure_model write-copy "$out" || true
fi
python3 - "$maps" "$out/model.json" <<'EOF'
import collections
import json
import os
import re
import sys

# bpftrace's maps: "@name: count N, average A, total T", "@name[k]: ...", "@name: N",
# and histograms: "@name:" then "[lo, hi)   count |@@@|" lines.
stats, counts, hists = {}, collections.defaultdict(dict), collections.defaultdict(dict)
current = None
for line in open(sys.argv[1]):
    m = re.match(r"@(\w+)(?:\[(\d+)\])?: count (\d+), average (-?\d+), total (-?\d+)$", line)
    if m:
        stats[(m.group(1), m.group(2))] = (int(m.group(3)), int(m.group(4)))
        current = None
        continue
    m = re.match(r"@(\w+)(?:\[(\d+)\])?: (\d+)$", line)
    if m:
        counts[m.group(1)][m.group(2)] = int(m.group(3))
        current = None
        continue
    m = re.match(r"@(\w+):\s*$", line)
    if m:
        current = m.group(1)
        continue
    m = re.match(r"\[(\d+), (?:\d+|\.\.\.)\)\s+(\d+) \|", line)
    if m and current:
        hists[current][int(m.group(1))] = int(m.group(2))


def median(name, step_ns, top):
    """The median of an lhist, interpolated within its bucket, in ns; None when it lies in the
    overflow bucket (at `top` steps or more), whose width is unknown."""
    h = hists[name]
    total = sum(h.values())
    if not total:
        return None
    seen = 0
    for lo in sorted(h):
        if seen + h[lo] >= total / 2:
            return None if lo >= top else (lo + (total / 2 - seen) / h[lo]) * step_ns
        seen += h[lo]
    return None


full, tail = stats.get(("full", None)), stats.get(("tail", None))
if not full or not tail:
    sys.exit("write-copy: no write had both a full skb's and a tail's interval "
             "(name a configuration with the defaults)")
writes = sum(counts["transmits"].values())
print(f"{writes} writes of 128 KB; transmits in the writer's context per write: "
      + ", ".join(f"{k}: {n}" for k, n in sorted(counts["transmits"].items(),
                                               key=lambda kv: int(kv[0]))))
left = counts["slept"].get(None, 0), counts["no_softirq"].get(None, 0)
print(f"intervals left out: {left[0]} the writer slept, {left[1]} no softirq before")
first = stats.get(("first", None))
if first:
    print(f"write() to its first transmit: {first[1] / 1e3:.2f} us (mean of {first[0]})")
for k in sorted({k for (n, k) in stats if n == "softirq"}, key=int):
    n, avg = stats[("softirq", k)]
    print(f"NET_RX softirq after transmit {k}: {avg / 1e3:.2f} us (mean of {n})")
full_b, tail_b = stats[("full_bytes", None)][1], stats[("tail_bytes", None)][1]
full_med, tail_med = median("full_us", 1000, 80), median("tail_us", 250, 80)
if full_med is None or tail_med is None:
    sys.exit("write-copy: a median lies beyond the histograms (80 us for a full skb, 20 for the "
             "tail): the machine ran too slow to read")
print(f"softirq exit to the transmit of a full skb ({full_b} bytes): mean {full[1] / 1e3:.2f} us, "
      f"median {full_med / 1e3:.2f} us ({full[0]})")
print(f"softirq exit to the tail's transmit ({tail_b} bytes): mean {tail[1] / 1e3:.2f} us, "
      f"median {tail_med / 1e3:.2f} us ({tail[0]})")
diff = full_med - tail_med
if diff > 0:
    print(f"difference of the medians: {diff / 1e3:.2f} us for {full_b - tail_b} bytes: "
          f"{(full_b - tail_b) / diff:.2f} bytes/ns (copy and page fragments; "
          f"means: {(full_b - tail_b) / (full[1] - tail[1]):.2f})")
else:
    print("the full skb's interval is not longer than the tail's: no rate")

# The model's, from the scenario the measure wrote (skbsim run --format json: tcp_writer).
if os.path.exists(sys.argv[2]):
    w = json.load(open(sys.argv[2])).get("tcp_writer")
    if not w:
        print("model: this skbsim writes no tcp_writer (rebuild it)")
    else:
        def us(key):
            return "-" if w.get(key) is None else f"{w[key]:.2f} us"
        print(f"model (skbsim run, means): resumed after the softirq to a full skb's transmit "
              f"{us('resumed_to_full_transmit_us')}, to the tail's "
              f"{us('resumed_to_tail_transmit_us')} ({w['timed']['resumed_to_tail']} tails); "
              f"first to second transmit {us('first_to_second_transmit_us')}, second to third "
              f"{us('second_to_third_transmit_us')}; the call's start to its first transmit "
              f"{us('call_to_first_transmit_us')}")
EOF
