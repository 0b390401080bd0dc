#!/usr/bin/env bash
# How fast this machine's kernel checksums and copies, untraced otherwise: runs
# scripts/csum-rate.bt (bpftrace: a 997 Hz timer sample of every CPU by the function it
# interrupted) around one `skbsim measure --trace off`, then the model on the scenario the
# measure wrote, and prints for each loop the kernel's time per data segment (samples / 997 Hz
# over the client's TcpOutSegs in the measurement's runs), the bytes the model runs through its
# symbol per segment, and their quotient: the rate a preset's key stands for.
#
#   csum_partial               csum_partial              cpu.csum_bytes_per_ns
#   csum_partial_copy_generic  csum_partial_copy_generic cpu.fused_bytes_per_ns
#   _copy_from_iter            copy_from_user            cpu.copy_bytes_per_ns (the sender's)
#   _copy_to_iter              skb_copy_datagram_iovec   cpu.copy_to_user_bytes_per_ns
#
# The bytes are the model's, so the rate holds only where the model's per-segment counts match
# the kernel's (`skbsim validate`, point 3's rows). Read the loops of a CPU the runs keep busy
# (the sender's): on intel-kvm-2core-v1147 the profile, attached from the start, left the reader's
# CPU spending up to half its samples in the spin-lock slow path and x2APIC writes, and its
# _copy_to_iter samples moved five-fold between runs. Root; mounts tracefs for the run if it is
# not mounted (and unmounts it). docs/measure.md, "The checksum loops".
#
#   bash scripts/csum-rate.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/csum-rate.sh /tmp/cr --topology direct --variant off --rate unlimited \
#          --runs 1 --duration 6 --congestion-control cubic \
#          --preset scenarios/models/intel-kvm-2core-v1147-fitted.json
#
# OUT_DIR gets the measurement, csum-rate.txt (bpftrace's maps) and model.json. Name one
# configuration; with --unsteady-retries 0 every run the samples cover is counted. Exit codes:
# 0 measured; 1 a tool, the run or the model failed, or no segment was counted; 2 a bad skbsim
# measure flag.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: csum-rate.sh OUT_DIR [skbsim measure options...]}
shift
# shellcheck source=scripts/trace-measure.sh
source scripts/trace-measure.sh
maps="$out/csum-rate.txt"
if ! command -v python3 >/dev/null; then
  echo "csum-rate: expected python3, which prints the summary (apt-get install python3)" >&2
  exit 1
fi
# A key per sampled address: a few thousand in a few seconds, near bpftrace's default 4096.
export BPFTRACE_MAP_KEYS_MAX=${BPFTRACE_MAP_KEYS_MAX:-16384}
trace_measure csum-rate "$out" "$maps" scripts/csum-rate.bt 0 "$@"
rm -f "$out/model.json"
trace_measure_scenario csum-rate "$out"
trace_measure_model csum-rate "$out"
python3 - "$maps" "$out/model.json" "$out"/measurement/measurements/*.json <<'EOF'
import collections
import json
import re
import sys

HZ = 997
LOOPS = [  # kernel function, model symbol, preset key
    ("csum_partial", "csum_partial", "cpu.csum_bytes_per_ns"),
    ("csum_partial_copy_generic", "csum_partial_copy_generic", "cpu.fused_bytes_per_ns"),
    ("_copy_from_iter", "copy_from_user", "cpu.copy_bytes_per_ns (the sender's)"),
    ("_copy_to_iter", "skb_copy_datagram_iovec", "cpu.copy_to_user_bytes_per_ns"),
]

# bpftrace's map: "@fn[CPU, " then the frame "symbol+offset" on a line of its own (none for a
# sample in user space) and "]: N", one entry per sampled address, summed here by symbol.
fn = collections.Counter()
samples = collections.Counter()
text = open(sys.argv[1]).read()
for cpu, frame, n in re.findall(r"@fn\[(\d+), \n(?:\s+(\S+)\n)?\]: (\d+)", text):
    fn[(int(cpu), re.sub(r"\+\d+$", "", frame))] += int(n)
    samples[int(cpu)] += int(n)
# The segments of every run the samples cover, the set-aside (unsteady) ones too, and each
# CPU's non-idle time in them.
segments = 0
busy_us = collections.Counter()
for path in sys.argv[3:]:
    measurement = json.load(open(path))
    for run in measurement.get("runs", []) + measurement.get("unsteady_runs", []):
        segments += run.get("tcp", {}).get("client_out_segs", 0)
        for c in run.get("activity", {}).get("cpus", []):
            busy_us[c["cpu"]] += c.get("non_idle_us", 0)
if segments == 0:
    sys.exit("csum-rate: the measurement counted no segment")
model = json.load(open(sys.argv[2]))
per_segment = model["hosts"]["M"]["per_segment"]
cpus = sorted(samples)
print(f"{segments} data segments")
# The runs' non-idle time alone is worth this many samples; bpftrace also covers the measure's
# set-up and speed probes, so a CPU with fewer was sampled for less than its busy time (a vCPU
# that halts between bursts can be: the reader's, on kvm-2core-v1147, by half), and the times of
# the loops that run on it are too short and their rates too high.
for c in cpus:
    floor = busy_us[c] * 1e-6 * HZ
    short = samples[c] < 0.9 * floor
    print(f"CPU {c}: {samples[c]} samples, the runs' non-idle time alone {floor:.0f}"
          + (": sampled short, its loops' rates are too high" if short else ""))
print(f"{'kernel function':26} {'samples by CPU':>16} {'ns/segment':>11} "
      f"{'model symbol':26} {'bytes/segment':>13} {'bytes/ns':>9}  preset key")
for kfn, sym, key in LOOPS:
    by_cpu = [fn[(c, kfn)] for c in cpus]
    ns = sum(by_cpu) / HZ * 1e9 / segments
    nbytes = per_segment.get(f"{sym}_bytes", 0.0)
    rate = f"{nbytes / ns:9.2f}" if ns > 0 and nbytes > 0 else f"{'-':>9}"
    print(f"{kfn:26} {'/'.join(map(str, by_cpu)):>16} {ns:11.1f} {sym:26} {nbytes:13.1f} "
          f"{rate}  {key}")
EOF
