#!/usr/bin/env bash
# How iperf3's reader takes the stream, kernel and model side by side: runs
# scripts/rcv-cadence.bt (bpftrace: read(), select() and sched_switch of iperf3's threads, the
# server's transmits) around one `skbsim measure --trace off`, then the model on the scenario
# that measure wrote (`skbsim run --format json`, its tcp_reader and tcp_acks_by_path), and
# prints per 1448-byte segment: the reads that copied something and their mean size, the reads
# that found nothing (EAGAIN), select() calls, the reader's sleeps, the ACKs. Root; mounts
# tracefs for the run if it is not mounted (and unmounts it). docs/measure.md, "How the reader
# takes the stream".
#
#   bash scripts/rcv-cadence.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/rcv-cadence.sh /tmp/rd --topology direct --variant csum-off --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and rcv-cadence.txt, bpftrace's maps. Name one configuration:
# every run of the measure adds to the same counts. Exit codes: 0 measured; 1 a tool or the
# run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: rcv-cadence.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/rcv-cadence.txt"
trace_measure rcv-cadence "$out" "$maps" scripts/rcv-cadence.bt 0 "$@"
skbsim=${SKBSIM:-build/release/sim/skbsim}
scenarios=("$out"/measurement/*.json)
if [[ ${#scenarios[@]} -ne 1 || ! -f ${scenarios[0]} ]]; then
  echo "rcv-cadence: expected one scenario in $out/measurement (name one configuration)" >&2
  exit 1
fi
model=$("$skbsim" run "${scenarios[0]}" --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
if "tcp_reader" not in d:
    sys.exit("rcv-cadence: this skbsim writes no tcp_reader (rebuild it)")
r, a = d["tcp_reader"], d.get("tcp_acks_by_path", {})
print(r.get("reads_copying", 0), r.get("bytes_per_copying_read", 0), r.get("reads_empty", 0),
      r.get("selects", 0), r.get("sleeps", 0), sum(a.values()))')
# Lines like "@reads[28587]: 16274", "@failed[28587, -11]: 5816", "@server_xmit: 16761".
awk -v model="$model" '
  function tid(line) { sub(/^[^[]*\[/, "", line); sub(/[],].*$/, "", line); return line }
  /^@reads\[/ { reads[tid($0)] = $NF + 0 }
  /^@bytes\[/ { bytes[tid($0)] = $NF + 0 }
  /^@failed\[/ { key = $0; sub(/^[^,]*, /, "", key); sub(/\].*$/, "", key)
                 if (key == "-11") eagain[tid($0)] += $NF }
  /^@selects\[/ { selects[tid($0)] = $NF + 0 }
  /^@sleeps\[/ { sleeps[tid($0)] = $NF + 0 }
  /^@server_xmit:/ { xmit = $NF + 0 }
  END {
    best = ""
    for (t in bytes) if (best == "" || bytes[t] > bytes[best]) best = t
    if (best == "" || bytes[best] < 1448) {
      print "rcv-cadence: no iperf3 thread read the stream" > "/dev/stderr"; exit 1
    }
    segs = bytes[best] / 1448
    split(model, m, " ")
    printf "reader: iperf3 thread %s, %d bytes, %.0f segments of 1448 bytes\n", best, bytes[best], segs
    printf "%-40s %10s %10s\n", "per segment", "kernel", "model"
    printf "%-40s %10.4f %10.4f\n", "reads that copied", reads[best] / segs, m[1]
    printf "%-40s %10.0f %10.0f\n", "  bytes each", bytes[best] / reads[best], m[2]
    printf "%-40s %10.4f %10.4f\n", "reads that found nothing (EAGAIN)", eagain[best] / segs, m[3]
    printf "%-40s %10.4f %10.4f\n", "select() calls", selects[best] / segs, m[4]
    printf "%-40s %10.4f %10.4f\n", "sleeps", sleeps[best] / segs, m[5]
    printf "%-40s %10.4f %10.4f\n", "ACKs (server transmits on skbm-s0)", xmit / segs, m[6]
    if (sleeps[best] > 0)
      printf "%-40s %10.2f %10.2f\n", "reads that copied, per sleep", reads[best] / sleeps[best],
             (m[5] > 0 ? m[1] / m[5] : 0)
  }' "$maps"
