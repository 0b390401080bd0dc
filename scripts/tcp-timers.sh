#!/usr/bin/env bash
# The TCP timers a stream queues, kernel and model side by side: runs scripts/tcp-timers.bt
# (bpftrace on timer:timer_start) around one `skbsim measure --trace off`, then the model on the
# scenario that measure wrote (`skbsim run --format json`, its tcp_timer_starts), and prints per
# 1448-byte segment the starts of the retransmission timer on the socket that queued the most
# (the sender's; 6.x arms the tail loss probe on the same timer) and of the delayed-ACK timer on
# the socket that queued the most (the receiver's). Root; mounts tracefs for the run if it is not
# mounted (and unmounts it). docs/measure.md, "Timers".
#
#   bash scripts/tcp-timers.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/tcp-timers.sh /tmp/tt --topology direct --variant on --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic --unsteady-retries 0
#
# OUT_DIR gets the measurement, tcp-timers.txt (bpftrace's maps) and model.json. Name one
# configuration and one run (--runs 1 --unsteady-retries 0): the counts are kept by socket and
# reader thread, which another run's (a redo the speed probe asked for, too) may reuse or
# outnumber. The kernel's segments are the reader's bytes over 1448, the model's those on the
# wire: a 128 KB write is 90.5 of the first and 91 of the second, so the kernel's figures read up
# to 0.5 % high. Exit codes: 0 measured; 1 a tool or the run failed; 2 a bad skbsim measure flag.
# When the model cannot run the scenario the measure wrote, the kernel's column is printed with
# "-" for the model's.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tcp-timers.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/tcp-timers.txt"
trace_measure tcp-timers "$out" "$maps" scripts/tcp-timers.bt 0 "$@"
trace_measure_scenario tcp-timers "$out"
model=""
if trace_measure_model tcp-timers "$out"; then
  model=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
if "tcp_timer_starts" not in d:
    sys.exit("tcp-timers: this skbsim writes no tcp_timer_starts (rebuild it)")
t = d["tcp_timer_starts"]
print(t["retransmit"], t["delayed_ack"])' <"$out/model.json") ||
    { echo "tcp-timers: the model did not run (see $out/model.err)" >&2; model=""; }
fi
# Lines like "@write[0xffff888105313290]: 17242" and "@bytes[28587]: 376910848".
awk -v model="$model" '
  function row(label, kernel, model) {
    printf "%-48s %10.5f %s\n", label, kernel,
           have ? sprintf("%10.5f", model) : sprintf("%10s", "-")
  }
  /^@write\[/ { n = $NF + 0; write_all += n; if (n > write) write = n }
  /^@delack\[/ { n = $NF + 0; delack_all += n; if (n > delack) delack = n }
  /^@bytes\[/ { n = $NF + 0; if (n > bytes) bytes = n }
  END {
    if (bytes < 1448) {
      print "tcp-timers: no iperf3 thread read the stream" > "/dev/stderr"; exit 1
    }
    segs = bytes / 1448
    have = split(model, m, " ") == 2
    printf "reader: %.0f bytes, %.0f segments of 1448 bytes\n", bytes, segs
    printf "%-48s %10s %10s\n", "timers queued per segment", "kernel", "model"
    row("retransmit (tcp_write_timer, the sender)", write / segs, m[1])
    row("delayed ACK (tcp_delack_timer, the receiver)", delack / segs, m[2])
    printf "other sockets: %d retransmit, %d delayed ACK\n", write_all - write, delack_all - delack
  }' "$maps"
