#!/usr/bin/env bash
# How long this machine takes to run a task woken on an idle CPU, untraced otherwise: runs
# scripts/wake-latency.bt (bpftrace, sched tracepoints only) around one `skbsim measure
# --trace off` and prints, for wake-ups after sleeps under 200 us (all of them, then those that
# found the CPU still polling and sent no IPI, then those that sent one) and of 200 us or more,
# the count, the mean (us), and the standard deviation of the latency's logarithm: what a
# preset's cpu.idle_poll_wake_us, idle_wake_us, idle_wake_blocked_us, idle_wake_spread and
# idle_wake_blocked_spread (the long sleeps' own) are made from (docs/measure.md, "Wake-up
# latency"). Root; mounts tracefs for the run if it is not mounted (and unmounts it).
#
#   bash scripts/wake-latency.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/wake-latency.sh /tmp/wl --topology direct --variant off --rate unlimited \
#          --runs 3 --congestion-control cubic
#
# OUT_DIR gets the measurement (its summary.txt has the host's speed: wake_round_trip_us) and
# wake-latency.txt, bpftrace's histograms. Exit codes: 0 measured; 1 a tool or the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: wake-latency.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
hist="$out/wake-latency.txt"
trace_measure wake-latency "$out" "$hist" scripts/wake-latency.bt 1 "$@"
# Each histogram: count, mean from the ns stats, and sd of ln(latency) over the 3-us bins' middles.
awk '
  function kind(name) { sub(/^@/, "", name); sub(/:$/, "", name); return name }
  /^@(short|short_poll|short_ipi|long):/ { h = kind($1); next }
  /^@(short|short_poll|short_ipi|long)_ns:/ {
    k = kind($1); sub(/_ns$/, "", k); n[k] = $3 + 0; tot[k] = $7 + 0; h = ""; next
  }
  /^@/ { h = ""; next }
  h != "" && /^\[/ {
    lo = substr($1, 2) + 0; c = $3 + 0
    mid = $2 ~ /\.\.\./ ? 160 : lo + 1.5  # the open last bin: its latencies, 150 us and more
    cnt[h] += c; s1[h] += c * log(mid); s2[h] += c * log(mid) * log(mid)
  }
  END {
    split("short short_poll short_ipi long", order, " ")
    label["short"] = "short sleeps (< 200 us)"
    label["short_poll"] = "  of which polling, no IPI"
    label["short_ipi"] = "  of which IPI"
    label["long"] = "long sleeps (>= 200 us)"
    for (i = 1; i <= 4; i++) {
      k = order[i]
      if (n[k] == 0 || cnt[k] == 0) continue
      m = s1[k] / cnt[k]
      printf "%s: %d wake-ups, mean %.2f us, sd of ln(latency) %.3f\n",
             label[k], n[k], tot[k] / n[k] / 1000, sqrt(s2[k] / cnt[k] - m * m)
    }
  }' "$hist"
