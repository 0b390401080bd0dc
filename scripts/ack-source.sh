#!/usr/bin/env bash
# Where this machine's receiver sends its ACKs from, untraced otherwise: runs
# scripts/ack-source.bt (bpftrace: the kernel stack of each skb the server transmits) around one
# `skbsim measure --trace off` and prints the ACKs per data segment by the path that sent them:
#   data_softirq   __tcp_ack_snd_check after data, tcp_rcv_established in the NET_RX softirq
#   data_backlog   the same from the socket's backlog (__release_sock, __sk_flush_backlog), and
#                  tcp_release_cb's ACK deferred out of it (tcp_backlog_ack_defer)
#   cleanup_rbuf   tcp_cleanup_rbuf at the end of a recvmsg: a deferred ACK or a window update
#   delack_timer   the delayed-ACK timer
#   other          anything else (the handshake, a FIN, iperf3's control connection)
# beside the same split of the model's ACKs (`skbsim run --format json`, tcp_acks_by_path):
# docs/measure.md, "Where the ACKs come from". Root; mounts tracefs for the run if it is not
# mounted (and unmounts it).
#
#   bash scripts/ack-source.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/ack-source.sh /tmp/as --topology direct --variant off --rate unlimited \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and ack-source.txt, bpftrace's maps. Every configuration of the
# measure adds to the same counts: name one. Exit codes: 0 measured; 1 a tool or the run failed;
# 2 a bad skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ack-source.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/ack-source.txt"
trace_measure ack-source "$out" "$maps" scripts/ack-source.bt 0 "$@"
# Each stack is "@acks[" then one frame a line, innermost first, then "]: COUNT". tcp_send_ack and
# __tcp_send_ack end in tail calls, and so do tcp_cleanup_rbuf, tcp_release_cb and the ACK check
# after data: the frame that follows __tcp_transmit_skb is the one that called the path.
#   tcp_delack_timer*                           delack_timer
#   release_sock, __sk_flush_backlog (the
#     tcp_release_cb they call)                 data_backlog (the deferred ACK)
#   tcp_recvmsg_locked, tcp_cleanup_rbuf        cleanup_rbuf
#   tcp_v4_do_rcv, tcp_rcv_established,
#     __tcp_ack_snd_check                       data_backlog when __release_sock called it,
#                                               else data_softirq (tcp_v4_rcv)
#   anything else                               other
awk '
  /^@client_segs:/ { segs = $2 + 0; next }
  /^@reads:/ { reads = $2 + 0; next }
  /^@read_bytes:/ { read_bytes = $2 + 0; next }
  /^@acks\[/ { in_stack = 1; state = "xmit"; path = ""; next }
  in_stack && /^\]: / {
    n = $2 + 0
    if (path == "" || path == "rcv") path = "other"
    count[path] += n; total += n
    in_stack = 0
    next
  }
  in_stack {
    f = $1; sub(/\+.*$/, "", f)
    if (state == "xmit") {
      if (f == "__tcp_transmit_skb") state = "caller"
    } else if (state == "caller") {
      if (f ~ /^_*tcp_send_ack$/) next
      state = "done"
      if (f ~ /^tcp_delack_timer/) path = "delack_timer"
      else if (f == "release_sock" || f == "__sk_flush_backlog" || f == "tcp_release_cb")
        path = "data_backlog"
      else if (f == "tcp_recvmsg_locked" || f ~ /^_*tcp_cleanup_rbuf$/) path = "cleanup_rbuf"
      else if (f == "tcp_v4_do_rcv" || f == "tcp_rcv_established" || f == "__tcp_ack_snd_check") {
        path = "rcv"; state = "rcv"
      }
      else path = "other"
    } else if (state == "rcv") {
      if (f == "tcp_v4_do_rcv" || f == "tcp_rcv_established" || f == "__tcp_ack_snd_check") next
      path = f == "__release_sock" ? "data_backlog" : "data_softirq"
      state = "done"
    }
  }
  END {
    if (segs == 0) { print "ack-source: no data segments seen on skbm-c0" > "/dev/stderr"; exit 1 }
    printf "%.0f data segments, %d ACKs (%.4f per segment)\n", segs, total, total / segs
    split("data_softirq data_backlog cleanup_rbuf delack_timer other", paths, " ")
    for (i = 1; i <= 5; i++) {
      p = paths[i]
      share = total > 0 ? 100 * count[p] / total : 0
      printf "  %-13s %.4f per segment (%.1f %%)\n", p, count[p] / segs, share
    }
    if (reads > 0) {
      printf "reader: %d read() calls of more than a segment, %.0f bytes each on average, " \
             "%.4f per segment, %.2f ACKs each\n", reads, read_bytes / reads, reads / segs,
             total / reads
    }
  }' "$maps"
