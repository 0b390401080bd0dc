#!/usr/bin/env bash
# Where this machine's TCP receive path runs, untraced otherwise: runs scripts/rcv-context.bt
# (bpftrace: tcp:tcp_probe and the NET_RX softirq's entry and exit) around one `skbsim measure
# --trace off` and prints, for the server's data skbs and the client's ACKs, how many
# tcp_rcv_established took in the NET_RX softirq and how many in a process (the socket's owner
# running its backlog), by CPU, and per 1448-byte segment of payload: what the model's
# tcp_rcv_established_calls and tcp_v4_do_rcv_calls (`skbsim run --format json`, per_segment)
# are compared with (docs/measure.md, "Where the receive path runs"). Root; mounts tracefs for
# the run if it is not mounted (and unmounts it).
#
#   bash scripts/rcv-context.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/rcv-context.sh /tmp/rc --topology direct --variant off --rate unlimited \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and rcv-context.txt, bpftrace's maps. Every configuration of the
# measure adds to the same counts: name one. Exit codes: 0 measured; 1 a tool or the run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: rcv-context.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/rcv-context.txt"
# skbsim measure's iperf3 listens on 5201 (sim/measure.cpp, kPort).
trace_measure rcv-context "$out" "$maps" scripts/rcv-context.bt 5201 "$@"
# Lines like "@data[1, 0]: 328225" (CPU, in NET_RX) and "@data_bytes: 21800000000".
awk '
  /^@data_bytes:/ { bytes = $2 + 0; next }
  /^@(data|acks)\[/ {
    kind = substr($1, 2, index($1, "[") - 2)
    key = $0; sub(/^[^[]*\[/, "", key); sub(/\].*$/, "", key)
    split(key, f, ", "); n = $NF + 0
    where = f[2] == 1 ? "softirq" : "process"
    cnt[kind, f[1], where] += n; tot[kind] += n; ctx[kind, where] += n
    cpus[f[1]] = 1
  }
  END {
    if (bytes == 0) { print "rcv-context: no data skbs seen on port 5201" > "/dev/stderr"; exit 1 }
    segs = bytes / 1448
    printf "%.0f segments of 1448 bytes\n", segs
    split("data acks", kinds, " ")
    label["data"] = "server data skbs"; label["acks"] = "client ACKs"
    for (i = 1; i <= 2; i++) {
      k = kinds[i]
      if (tot[k] == 0) continue
      printf "%s: %d (%.4f per segment); in NET_RX %.4f, in a process (backlog) %.4f per segment (%.1f %%)\n",
             label[k], tot[k], tot[k] / segs, ctx[k, "softirq"] / segs, ctx[k, "process"] / segs,
             100 * ctx[k, "process"] / tot[k]
      for (c in cpus) {
        if (cnt[k, c, "softirq"] + cnt[k, c, "process"] == 0) continue
        printf "  CPU %s: NET_RX %d, process %d\n", c, cnt[k, c, "softirq"], cnt[k, c, "process"]
      }
    }
    all = tot["data"] + tot["acks"]; backlog = ctx["data", "process"] + ctx["acks", "process"]
    printf "both: tcp_rcv_established %.4f per segment, from the backlog %.4f (in the model: " \
           "tcp_rcv_established_calls and tcp_v4_do_rcv_calls)\n", all / segs, backlog / segs
  }' "$maps"
