#!/usr/bin/env bash
# How each burst of a stream's data reaches the server's socket, untraced otherwise: runs
# scripts/rcv-burst.bt (bpftrace: tcp:tcp_probe, the NET_RX softirq's entry and exit, iperf3's
# wake-ups) around one `skbsim measure --trace off` and prints, per burst (at a fixed rate, per
# write): the data skbs the softirq took with the socket free before the reader's backlog took
# one, when that was, the softirq's time per skb for the first skb (whose sk_data_ready woke the
# reader) and for the later ones, and when the reader's wake-up came. Root; mounts tracefs for
# the run if it is not mounted (and unmounts it). docs/measure.md, "How the reader takes the
# stream".
#
#   bash scripts/rcv-burst.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/rcv-burst.sh /tmp/rb --topology direct --variant csum-off --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and rcv-burst.txt, bpftrace's maps. Exit codes: 0 measured; 1 a
# tool or the run failed; 2 a bad skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: rcv-burst.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/rcv-burst.txt"
# skbsim measure's iperf3 listens on 5201 (sim/measure.cpp, kPort).
trace_measure rcv-burst "$out" "$maps" scripts/rcv-burst.bt 5201 "$@"
# Lines like "@softirq_before_sum: 39660".
awk '
  /^@[a-z_]+: [0-9]+$/ { v[substr($1, 2, length($1) - 2)] = $2 + 0 }
  function mean(s, n) { return v[n] > 0 ? v[s] / v[n] : 0 }
  END {
    if (v["bursts"] == 0 || v["to_backlog_n"] == 0) {
      print "rcv-burst: no burst reached the backlog on port 5201" > "/dev/stderr"; exit 1
    }
    printf "%d bursts; %d reached the backlog\n", v["bursts"], v["to_backlog_n"]
    printf "data skbs the softirq took before the first from the backlog: %.1f\n",
           mean("softirq_before_sum", "to_backlog_n")
    printf "first skb from the backlog, after the burst began: %.1f us\n",
           mean("to_backlog_sum", "to_backlog_n")
    printf "softirq, first to second skb: %.2f us; later skbs: %.2f us each\n",
           mean("first_gap_sum", "first_gap_n") / 1000, mean("later_gap_sum", "later_gap_n") / 1000
    printf "reader first woken (sched_wakeup), after the burst began: %.1f us (%d bursts)\n",
           mean("wakeup_sum", "wakeup_n"), v["wakeup_n"]
  }' "$maps"
