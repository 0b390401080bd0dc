#!/usr/bin/env bash
# Why this machine's receiver ACKs a write once or twice, untraced otherwise: runs
# scripts/rcv-window.bt (bpftrace: tcp:tcp_probe with the tcp_sock read through BTF) around one
# `skbsim measure --trace off` and prints, for the first skb
# after each drain (more than one MSS, landing on an empty receive queue), how often the check
# after data ACKed it at once, split by whether rcv_ssthresh was above the space it left; which
# skbs raised rcv_ssthresh (tcp_grow_window); how often sk_rcvbuf grew between two skbs; and the
# share of first skbs ACKed at once, second by second (docs/measure.md, "One ACK per write, or
# two"). Root; mounts tracefs for the run if it is not mounted (and unmounts it). Needs a 6.x
# kernel with BTF (/sys/kernel/btf/vmlinux) and tcp_sock.scaling_ratio (6.6 and later).
#
#   bash scripts/rcv-window.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/rcv-window.sh /tmp/rw --topology direct --variant on --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and rcv-window.txt, bpftrace's maps. Every configuration of the
# measure adds to the same counts: name one. Exit codes: 0 measured; 1 a tool or the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: rcv-window.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/rcv-window.txt"
# skbsim measure's iperf3 listens on 5201 (sim/measure.cpp, kPort).
trace_measure rcv-window "$out" "$maps" scripts/rcv-window.bt 5201 "$@"
awk '
  function key(line) { sub(/^[^[]*\[/, "", line); sub(/\].*$/, "", line); return line }
  /^@after\[/ {
    split(key($0), f, ", "); n = $NF + 0
    if (f[1] == 2 && f[2] == 1) { first[f[3]] += n; acked[f[3]] += f[4] * n }
    next
  }
  /^@grow\[/ { split(key($0), f, ", "); grow[f[1], f[2]] += $NF; next }
  /^@grow_bytes\[/ { split(key($0), f, ", "); gbytes[f[1], f[2]] += $NF; next }
  /^@arrivals\[/ { split(key($0), f, ", "); arr[f[1], f[2]] += $NF; total += $NF; next }
  /^@first\[/ {
    split(key($0), f, ", "); sec[f[1]] += $NF; sec_acked[f[1]] += f[2] * $NF
    if (f[1] + 0 > last_sec) last_sec = f[1] + 0
    next
  }
  /^@rcvbuf_grown:/ { grown = $2 + 0; next }
  /^@last_rcvbuf:/ { rcvbuf = $2 + 0; next }
  /^@last_ss:/ { ss = $2 + 0; next }
  END {
    if (total == 0) { print "rcv-window: no data skbs seen on port 5201" > "/dev/stderr"; exit 1 }
    split("sub-MSS,one MSS,more than one MSS", cname, ",")
    printf "%d data skbs at the server socket:\n", total
    for (c = 0; c <= 2; c++)
      printf "  %-17s %8d on an empty queue, %8d behind unread data\n", cname[c + 1],
             arr[c, 1], arr[c, 0]
    printf "first skb after a drain (more than one MSS on an empty queue, nothing read before " \
           "the next):\n"
    printf "  rcv_ssthresh at or under the space it left: %8d, ACKed at once %5.1f %%\n",
           first[0], first[0] ? 100 * acked[0] / first[0] : 0
    printf "  rcv_ssthresh above the space it left:       %8d, ACKed at once %5.1f %%\n",
           first[1], first[1] ? 100 * acked[1] / first[1] : 0
    printf "rcv_ssthresh raised (tcp_grow_window) after:\n"
    for (c = 0; c <= 2; c++)
      for (e = 1; e >= 0; e--)
        if (grow[c, e] > 0)
          printf "  a %s skb %s: %d times, %.0f bytes each on average\n", cname[c + 1],
                 e ? "on an empty queue" : "behind unread data", grow[c, e],
                 gbytes[c, e] / grow[c, e]
    printf "sk_rcvbuf grown between two skbs: %d times; at the end sk_rcvbuf %d, " \
           "rcv_ssthresh %d\n", grown, rcvbuf, ss
    printf "first skbs ACKed at once, by second since bpftrace started:"
    for (s = 0; s <= last_sec; s++)
      printf " %s", sec[s] ? sprintf("%.0f%%", 100 * sec_acked[s] / sec[s]) : "-"
    printf "\n"
  }' "$maps"
