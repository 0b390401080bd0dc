#!/usr/bin/env bash
# When each write of a paced stream leaves the client and when its tail reaches the server's
# socket, untraced otherwise: runs scripts/write-gaps.bt (bpftrace: the client's transmits on
# skbm-c0, tcp:tcp_probe) around one `skbsim measure --trace off` and prints the mean gaps from a
# write's first transmit to its second and from its second to its third, and how its tail (the
# skb under one MSS: with the defaults, the third) reached the socket: at once in the sender's
# softirq, or later from the socket's backlog on the reader's CPU, because the reader held the
# socket copying the two skbs before it. Root; mounts tracefs for the run if it is not mounted
# (and unmounts it). docs/measure.md, "The write's tail, read alone".
#
#   bash scripts/write-gaps.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/write-gaps.sh /tmp/wg --topology direct --variant on --rate 1000 \
#          --runs 1 --duration 5 --congestion-control cubic
#
# OUT_DIR gets the measurement and write-gaps.txt, bpftrace's maps. Name one configuration at a
# fixed rate. Exit codes: 0 measured; 1 a tool or the run failed; 2 a bad skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: write-gaps.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/write-gaps.txt"
# skbsim measure's iperf3 listens on 5201 (sim/measure.cpp, kPort).
trace_measure write-gaps "$out" "$maps" scripts/write-gaps.bt 5201 "$@"
# Lines like "@writes: 4760", "@skbs[3]: 4755",
# "@first_second: count 4755, average 23012, total 109422060", "@tail_taken[1]: count 9, ...".
awk '
  function key(line) { sub(/^[^[]*\[/, "", line); sub(/\].*$/, "", line); return line }
  function avg(line) { sub(/^.*average /, "", line); sub(/,.*$/, "", line); return line / 1000 }
  function cnt(line) { sub(/^.*count /, "", line); sub(/,.*$/, "", line); return line + 0 }
  /^@writes:/ { writes = $2 + 0; next }
  /^@skbs\[/ { skbs[key($0)] = $NF + 0; next }
  /^@tails\[/ { tails[key($0)] = $NF + 0; ntails += $NF; next }
  /^@first_second:/ { fs = avg($0); next }
  /^@second_third:/ { st = avg($0); next }
  /^@tail_taken\[/ { k = key($0); taken[k] = cnt($0); taken_us[k] = avg($0); next }
  END {
    if (writes == 0) { print "write-gaps: no writes seen on skbm-c0" > "/dev/stderr"; exit 1 }
    printf "%d writes: %d with a second skb, %d with a third, %d with a fourth\n", writes,
           skbs[2], skbs[3], skbs[4]
    printf "first to second transmit: %.2f us; second to third: %.2f us (means)\n", fs, st
    printf "tails (under one MSS): %d, the third skb of their write in %d\n", ntails, tails[3]
    n = taken[0] + taken[1]
    if (n == 0) { print "no tail reached the socket"; exit 0 }
    printf "tails taken by tcp_rcv_established: %d\n", n
    printf "  %-47s %5.1f %%, %.2f us after its transmit\n",
           "on the sending CPU (its NET_RX softirq):", 100 * taken[0] / n, taken_us[0]
    printf "  %-47s %5.1f %%, %.2f us after its transmit\n",
           "on another CPU (the reader, from the backlog):", 100 * taken[1] / n, taken_us[1]
  }' "$maps"
