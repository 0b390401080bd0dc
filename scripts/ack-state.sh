#!/usr/bin/env bash
# The receiver's ACKs second by second beside one `skbsim measure --trace off`, with the window's
# state as each leaves (scripts/ack-state.bt). Per second of the run (s, since bpftrace started):
#   segments, ACKs/seg   the data segments the client sent, the server's ACKs per segment
#   free%, unrd%         of the ACKs, those sent with no task owning the socket (the NET_RX
#                        softirq's check after data, not the reader) and with data unread
#   fits%                those sent with rcv_ssthresh at or under the free space (tcp_space):
#                        the window offered is then rcv_ssthresh, no less than the last one
#   clmp%, clamp gap     those sent with window_clamp under the buffer's space, sk_rcvbuf
#                        scaled by scaling_ratio, and the mean gap in bytes
#   room                 the mean room tcp_grow_window sees with an empty queue
#   grown, other         tcp_rcvbuf_grow events (tcp_rcv_space_adjust), and sk_rcvbuf moves
#                        without one (tcp_clamp_window after tcp_prune_queue, or the out-of-order
#                        queue's growth)
#   sk_rcvbuf            the largest sk_rcvbuf at an ACK
# (the stream's ACKs only, not iperf3's control connection); then the measure's TcpExt counters of
# tcp_prune_queue and of reordering, the client's retransmissions, and the model's ACKs per segment
# by path (and the rcvbuf it ran with) on the scenario the measure wrote. A run whose queue outgrew
# sk_rcvbuf is left with window_clamp under the buffer's space and rcv_ssthresh at the clamp: a
# short queue then offers the same window every time, and the softirq ACKs every few segments
# (docs/measure.md, "ACKs after the queue outgrew its buffer"). Root; mounts tracefs for the run if
# it is not mounted (and unmounts it).
#
#   bash scripts/ack-state.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/ack-state.sh /tmp/ak --topology forward --variant off --rate unlimited \
#          --runs 1 --duration 3 --congestion-control cubic --unsteady-retries 0 \
#          --preset scenarios/models/intel-kvm-2core-v1147-fitted.json
#
# OUT_DIR gets the measurement, ack-state.txt (bpftrace's maps) and model.json (the model's run,
# with the preset the measure was given). Seconds with fewer than 10 000 segments (the set-up, a
# run's edges) are left out; every run of the measure adds to the same seconds' counts, so name
# one configuration and one run. Exit codes: 0 measured; 1 a tool or the run failed; 2 a bad
# skbsim measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ack-state.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/ack-state.txt"
trace_measure ack-state "$out" "$maps" scripts/ack-state.bt 5201 "$@"
awk '
  /^@[a-z_]+\[[0-9]+\]: / {
    name = $1; sub(/^@/, "", name); sub(/\[.*$/, "", name)
    s = $1; sub(/^[^[]*\[/, "", s); sub(/\].*$/, "", s)
    v[name, s + 0] = $2 + 0
    if (s + 0 > last) last = s + 0
  }
  function pct(name, s) { return v["acks", s] ? 100 * v[name, s] / v["acks", s] : 0 }
  END {
    printf "%4s %8s %8s %6s %6s %6s %6s %9s %9s %5s %5s %9s\n", "s", "segments", "ACKs/seg",
           "free%", "unrd%", "fits%", "clmp%", "clamp gap", "room", "grown", "other", "sk_rcvbuf"
    for (s = 0; s <= last; s++) {
      segs = v["segs", s]
      if (segs < 10000) continue
      shown++
      printf "%4d %8d %8.4f %6.1f %6.1f %6.1f %6.1f %9d %9d %5d %5d %9d\n", s, segs,
             v["acks", s] / segs, pct("acks_free", s), pct("acks_unread", s), pct("ss_fits", s),
             pct("clamp_under", s), v["clamp_gap", s], v["lag", s], v["grown", s],
             v["rcvbuf_other", s], v["rcvbuf", s]
    }
    if (!shown) {
      print "ack-state: no second with 10 000 data segments on skbm-c0" > "/dev/stderr"
      exit 1
    }
  }' "$maps"
# The measure's counters, client's then server's namespace (its JSON keeps an object's keys
# sorted), per run: tcp_prune_queue's and the reordering's TcpExt, and the client's
# retransmissions. A counter this kernel lacks prints nothing.
counters() {
  { grep -hoE "\"$1\": [0-9]+" "$out"/measurement/measurements/*.json || true; } |
    awk '{ printf " %s", $2 } END { print "" }'
}
for counter in PruneCalled OfoPruned TCPRcvCollapsed RcvPruned TCPRcvQDrop TCPOFOQueue \
  DelayedACKLost; do
  printf "%s (client, server, per run):" "$counter"
  counters "$counter"
done
printf "client_retrans_segs (per run):"
counters client_retrans_segs
# The model on the scenario the measure wrote (its preset: pass --preset to the measure), its ACKs
# per segment by the path that sent them, which are all of the first kind (it has no autotuning).
trace_measure_scenario ack-state "$out"
if trace_measure_model ack-state "$out"; then
  python3 -c '
import json, sys
d = json.load(sys.stdin)
a = d.get("tcp_acks_by_path")
if a is None:
    sys.exit("ack-state: this skbsim writes no tcp_acks_by_path (rebuild it)")
flow = json.load(open(sys.argv[1]))["traffic"]["flows"][0]
print("the model (%s, rcvbuf %s): %.4f ACKs per segment: %s" % (d.get("preset", "?"),
      flow.get("rcvbuf", "?"), sum(a.values()), ", ".join("%s %.4f" % kv for kv in a.items())))' \
    "$trace_measure_scenario_file" <"$out/model.json"
fi
