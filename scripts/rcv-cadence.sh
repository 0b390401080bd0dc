#!/usr/bin/env bash
# How iperf3's reader takes the stream, kernel and model side by side: runs
# scripts/rcv-cadence.bt (bpftrace: read(), select() and sched_switch of iperf3's threads, the
# server's transmits) around one `skbsim measure --trace off`, then the model on the scenario
# that measure wrote (`skbsim run --format json`, its tcp_reader, tcp_acks_by_path and
# tcp_coalesce), and
# prints per 1448-byte segment: the reads that copied something, their mean size and the short
# ones (one MSS or less) and of those the 512-1023-byte ones (a 128 KB write's 752-byte tail read
# alone) and the 1-2 KB ones (one segment alone), the reads that found nothing (EAGAIN), select()
# calls, the reader's sleeps, the ACKs, and the data skbs the server merged into the receive
# queue's tail and into the backlog's (the measure's TcpExt TCPRcvCoalesce and TCPBacklogCoalesce
# per client segment, against the run JSON's tcp_coalesce: where the reader was as they came;
# the kernel's counted in the same run, with rcv-cadence.bt attached, not in an untraced one).
# The kernel's sizes come from bpftrace's histogram of the read sizes, the model's from its
# timeline (skbsim run --timeline). Root; mounts tracefs for the run if it is not mounted (and
# unmounts it).
# docs/measure.md, "How the reader takes the stream".
#
#   bash scripts/rcv-cadence.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/rcv-cadence.sh /tmp/rd --topology direct --variant csum-off --rate 1000 \
#          --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement, rcv-cadence.txt (bpftrace's maps), model.json and
# model-timeline.tsv (docs/results.md, "The sockets' timeline"). Name one
# configuration: every run of the measure adds to the same counts. Exit codes: 0 measured; 1 a
# tool or the run failed; 2 a bad skbsim measure flag. When the model cannot run the scenario the
# measure wrote, the kernel's column is printed with "-" for the model's.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: rcv-cadence.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/rcv-cadence.txt"
trace_measure rcv-cadence "$out" "$maps" scripts/rcv-cadence.bt 0 "$@"
trace_measure_scenario rcv-cadence "$out"
model=""
if trace_measure_model rcv-cadence "$out"; then
  model=$(python3 -c '
import csv, json, sys
d = json.load(sys.stdin)
if "tcp_reader" not in d:
    sys.exit("rcv-cadence: this skbsim writes no tcp_reader (rebuild it)")
r, a = d["tcp_reader"], d.get("tcp_acks_by_path", {})
# the reads by size, from the timeline, per segment of the window as the counters are
tail = one = 0
with open(sys.argv[1]) as f:
    for e in csv.DictReader(f, delimiter="\t"):
        if e["event"] == "read" and e["socket"] == "netserver":
            n = int(e["bytes"])
            tail += 512 <= n < 1024
            one += 1024 <= n < 2048
segs = max(d.get("segments", 0), 1)
c = d.get("tcp_coalesce", {})
print(r.get("reads_copying", 0), r.get("bytes_per_copying_read", 0), r.get("reads_empty", 0),
      r.get("selects", 0), r.get("sleeps", 0), sum(a.values()), r.get("reads_short", "-"),
      tail / segs, one / segs, c.get("receive_queue", "-"), c.get("backlog_data", "-"))' \
    "$out/model-timeline.tsv" \
    <"$out/model.json") ||
    { echo "rcv-cadence: the model did not run (see $out/model.err)" >&2; model=""; }
fi
# Lines like "@reads[28587]: 16274", "@failed[28587, -11]: 5816", "@server_xmit: 16761".
# The server's merges in the measure's run (summary.tcpext medians per client segment), "- -"
# when its measurement file does not have them.
measurement=$trace_measure_measurement_file
merges=$(python3 -c '
import json, sys
try:
    s = json.load(open(sys.argv[1]))["summary"]["tcpext"]["server"]["per_segment"]
    print(s["TCPRcvCoalesce"]["median"], s["TCPBacklogCoalesce"]["median"])
except (OSError, ValueError, KeyError, TypeError):
    print("- -")' "$measurement")
awk -v model="$model" -v merges="$merges" '
  function tid(line) { sub(/^[^[]*\[/, "", line); sub(/[],].*$/, "", line); return line }
  # A row: the kernel figure, and the model figure or "-" when the model did not run (or, for
  # the short reads, is an older skbsim that does not count them).
  function row(label, fmt, kernel, model) {
    printf "%-40s " fmt " %s\n", label, kernel,
           have && model != "-" ? sprintf(fmt, model) : sprintf("%10s", "-")
  }
  # the read sizes: bpftrace prints the histogram of each thread under "@sizes[TID]:"
  /^@/ { cur = "" }
  /^@sizes\[/ { cur = tid($0) }
  cur != "" && /^\[512, 1K\)/ { tails[cur] = $3 + 0 }
  cur != "" && /^\[1K, 2K\)/ { ones[cur] = $3 + 0 }
  /^@reads\[/ { reads[tid($0)] = $NF + 0 }
  /^@bytes\[/ { bytes[tid($0)] = $NF + 0 }
  /^@short\[/ { short[tid($0)] = $NF + 0 }
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
    have = split(model, m, " ") == 11
    split(merges, k, " ")
    printf "reader: iperf3 thread %s, %.0f bytes, %.0f segments of 1448 bytes\n", best,
           bytes[best], segs
    printf "%-40s %10s %10s\n", "per segment", "kernel", "model"
    row("reads that copied", "%10.4f", reads[best] / segs, m[1])
    row("  bytes each", "%10.0f", bytes[best] / reads[best], m[2])
    row("  of them one segment or less", "%10.4f", short[best] / segs, m[7])
    row("    512-1023 bytes (the tail of a write)", "%10.4f", tails[best] / segs, m[8])
    row("    1-2 KB (one segment alone)", "%10.4f", ones[best] / segs, m[9])
    row("reads that found nothing (EAGAIN)", "%10.4f", eagain[best] / segs, m[3])
    row("select() calls", "%10.4f", selects[best] / segs, m[4])
    row("sleeps", "%10.4f", sleeps[best] / segs, m[5])
    row("ACKs (server transmits on skbm-s0)", "%10.4f", xmit / segs, m[6])
    if (k[1] != "-") {
      row("data skbs merged into the receive queue", "%10.4f", k[1], m[10])
      row("  into the backlog (the reader held it)", "%10.4f", k[2], m[11])
    }
    if (sleeps[best] > 0)
      row("reads that copied, per sleep", "%10.2f", reads[best] / sleeps[best],
          (m[5] > 0 ? m[1] / m[5] : 0))
  }' "$maps"
