#!/usr/bin/env bash
# How much a stream's CPUs wait for contended locks, untraced otherwise: runs
# scripts/lock-contention.bt (bpftrace: lock:contention_begin and lock:contention_end, counts and
# sums per CPU) around one `skbsim measure --trace off` and prints, per CPU, the contended
# acquisitions and the time their waiters spent waiting, per segment the measure's client sent
# (its TcpOutSegs, from the measurement file) and in all. The model charges no lock waits.
# Root; mounts tracefs for the run if it is not mounted (and unmounts it). docs/measure.md,
# "The socket's lock".
#
#   bash scripts/lock-contention.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/lock-contention.sh /tmp/lk --topology direct --variant tso-off \
#          --rate 1000 --runs 1 --duration 3 --congestion-control cubic
#
# OUT_DIR gets the measurement and lock-contention.txt, bpftrace's maps. The probes count for the
# whole measure (its setup and speed probe too), the segments only for its stream: name one
# configuration and one run. Exit codes: 0 measured; 1 a tool or the run failed; 2 a bad skbsim
# measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: lock-contention.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/lock-contention.txt"
trace_measure lock-contention "$out" "$maps" scripts/lock-contention.bt 0 "$@"
trace_measure_scenario lock-contention "$out"
measurement=$trace_measure_measurement_file
segments=$(python3 -c '
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
print(sum(r["tcp"]["client_out_segs"] for r in runs))' "$measurement") || {
  echo "lock-contention: no segment count in $measurement" >&2
  exit 1
}
# Lines like "@contended[0]: 39755" and "@wait_ns[0]: 34386539".
awk -v segs="$segments" '
  function cpu_of(s) { sub(/^[^[]*\[/, "", s); sub(/\].*$/, "", s); return s + 0 }
  function seen(c) { cpus[c] = 1; if (c > last) last = c }
  /^@contended\[/ { c = cpu_of($1); n[c] = $2 + 0; seen(c) }
  /^@wait_ns\[/ { c = cpu_of($1); w[c] = $2 + 0; seen(c) }
  END {
    if (segs <= 0) { print "lock-contention: the stream sent no segment" > "/dev/stderr"; exit 1 }
    printf "%d segments\n", segs
    printf "%-5s %12s %14s %14s %12s\n", "cpu", "contended", "per segment", "wait us/seg", "wait each"
    for (c = 0; c <= last; c++) {
      if (!(c in cpus)) {
        continue
      }
      each = n[c] > 0 ? w[c] / 1000 / n[c] : 0
      printf "%-5d %12d %14.4f %14.4f %9.2f us\n", c, n[c], n[c] / segs, w[c] / 1000 / segs, each
    }
  }' "$maps"
