#!/usr/bin/env bash
# How fast this machine's kernel checksums and copies, untraced otherwise: runs
# scripts/csum-rate.bt (bpftrace: a 997 Hz timer sample of every CPU by the function it
# interrupted) around one `skbsim measure --trace off`, then the model on the scenario the
# measure wrote, and prints for each loop the kernel's time per data segment (samples / 997 Hz
# over the client's TcpOutSegs in the measurement's runs, and in cycles at its clock), the
# model's cycles for the matching symbol, the bytes the model runs through it per segment, and
# bytes over time: the rate the preset key stands for.
#
#   kernel function            model symbol               preset key
#   csum_partial               csum_partial               cpu.csum_bytes_per_ns
#   csum_partial_copy_generic  csum_partial_copy_generic  cpu.fused_bytes_per_ns
#   _copy_from_iter            copy_from_user             cpu.copy_bytes_per_ns
#   _copy_to_iter              skb_copy_datagram_iovec    cpu.copy_to_user_bytes_per_ns, if set
#
# (Without copy_to_user_bytes_per_ns a preset's copy_bytes_per_ns prices both copies.) The bytes
# are the model's, so a rate holds only where the model's per-segment counts match the kernel's
# (`skbsim validate`, point 3's rows). The model's cycles include each call's fixed cost. Read
# the loops of a CPU the runs keep busy (the sender's). On intel-kvm-2core-v1147 the reader's
# CPU was sampled for 84-96 % of its busy time, and the profile itself disturbed it: attached
# from the start it left that CPU spending up to two thirds of its samples in the spin-lock slow
# path and x2APIC writes, and its _copy_to_iter samples moved five-fold between runs. The check below
# only finds a CPU sampled short, never one sampled in full. A CPU without FSRM copies in
# rep_movs_alternative, which the two copy rows do not count. The rates are at the speed the
# host ran at: the summary prints the speed probe's ALU step, to set them at a set's speed
# (docs/measure.md, "The checksum loops"). Root; mounts tracefs for the run if it is not
# mounted (and unmounts it).
#
#   bash scripts/csum-rate.sh OUT_DIR [skbsim measure options...]
#   e.g. bash scripts/csum-rate.sh /tmp/cr --topology direct --variant off --rate unlimited \
#          --runs 5 --duration 3 --congestion-control cubic --unsteady-retries 0 \
#          --preset scenarios/models/intel-kvm-2core-v1147-fitted.json
#
# OUT_DIR gets the measurement, csum-rate.txt (bpftrace's maps) and model.json. Name one
# configuration. The samples cover every run, the ones the speed probe sets aside too, and the
# segments counted are those of all of them; --unsteady-retries 0 keeps the window short.
# Exit codes: 0 measured; 1 a tool, the run or the model failed, or no sample or segment was
# counted; 2 a bad skbsim measure flag.
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
measurement=$trace_measure_measurement_file
if [[ ! -f $measurement ]]; then
  echo "csum-rate: expected the measurement $measurement beside the scenario" >&2
  exit 1
fi
python3 - "$maps" "$out/model.json" "$measurement" "$BPFTRACE_MAP_KEYS_MAX" <<'EOF'
import collections
import json
import re
import statistics
import sys

HZ = 997  # csum-rate.bt's profile rate
LOOPS = [  # kernel function, model symbol, preset key
    ("csum_partial", "csum_partial", "cpu.csum_bytes_per_ns"),
    ("csum_partial_copy_generic", "csum_partial_copy_generic", "cpu.fused_bytes_per_ns"),
    ("_copy_from_iter", "copy_from_user", "cpu.copy_bytes_per_ns"),
    ("_copy_to_iter", "skb_copy_datagram_iovec", "cpu.copy_to_user_bytes_per_ns"),
]

# bpftrace's map: "@fn[CPU, " then the frame "symbol+offset" on a line of its own and "]: N", one
# entry per sampled address, summed here by symbol. A sample in user space has no frame: bpftrace
# 0.17 prints "@fn[CPU, ]: N", later versions a line break before the "]".
fn = collections.Counter()
samples = collections.Counter()
keys = 0
text = open(sys.argv[1]).read()
for cpu, frame, n in re.findall(r"@fn\[(\d+), \n?(?:\s+(\S+)\n)?\]: (\d+)", text):
    fn[(int(cpu), re.sub(r"\+\d+$", "", frame) or "<user>")] += int(n)
    samples[int(cpu)] += int(n)
    keys += 1
if not samples:
    sys.exit(f"csum-rate: no profile sample in {sys.argv[1]}")
if keys >= 0.95 * int(sys.argv[4]):
    print(f"csum-rate: {keys} keys, near BPFTRACE_MAP_KEYS_MAX ({sys.argv[4]}): samples at new "
          "addresses may have been dropped; raise it", file=sys.stderr)
# The segments of every run the samples cover, the set-aside (unsteady) ones too, each CPU's
# non-idle time in them, and the speed probe's ALU step.
measurement = json.load(open(sys.argv[3]))
segments = 0
busy_us = collections.Counter()
alu = []
for run in measurement.get("runs", []) + measurement.get("unsteady_runs", []):
    segments += run.get("tcp", {}).get("client_out_segs", 0)
    for c in run.get("activity", {}).get("cpus", []):
        busy_us[c["cpu"]] += c.get("non_idle_us", 0)
    if run.get("speed", {}).get("alu_ns"):
        alu.append(run["speed"]["alu_ns"])
if segments == 0:
    sys.exit("csum-rate: the measurement counted no segment")
mhz = measurement.get("machine", {}).get("cpu_mhz", 0)
model = json.load(open(sys.argv[2]))
host = model["hosts"]["M"]
per_segment = host["per_segment"]
model_segments = model.get("segments", 0)
model_cycles = {p["symbol"]: p["cycles"] for p in host.get("profile", [])}
cpus = sorted(samples)
print(f"{segments} data segments; the speed probe's ALU step "
      + (f"{statistics.median(alu):.4f} ns (median of {len(alu)} runs)" if alu else "not recorded"))
# The runs' non-idle time alone is worth this many samples; bpftrace also covers the measure's
# set-up and speed probes, so a CPU with fewer was sampled for less than its busy time, and the
# times of the loops that run on it are too short and their rates too high. (One with more may
# still have been sampled short.)
for c in cpus:
    floor = busy_us[c] * 1e-6 * HZ
    short = samples[c] < 0.9 * floor
    print(f"CPU {c}: {samples[c]} samples, the runs' non-idle time alone {floor:.0f}"
          + (": sampled short, its loops' rates are too high" if short else ""))
print(f"{'kernel function':26} {'samples by CPU':>14} {'ns/seg':>7} {'cycles':>7}  "
      f"{'model symbol':24} {'cycles':>7} {'bytes/seg':>9} {'bytes/ns':>8}  preset key")
for kfn, sym, key in LOOPS:
    by_cpu = [fn[(c, kfn)] for c in cpus]
    ns = sum(by_cpu) / HZ * 1e9 / segments
    cycles = f"{ns * mhz / 1e3:7.0f}" if mhz else f"{'-':>7}"
    mcycles = (f"{model_cycles[sym] / model_segments:7.0f}"
               if sym in model_cycles and model_segments else f"{'-':>7}")
    nbytes = per_segment.get(f"{sym}_bytes", 0.0)
    rate = f"{nbytes / ns:8.2f}" if ns > 0 and nbytes > 0 else f"{'-':>8}"
    print(f"{kfn:26} {'/'.join(map(str, by_cpu)):>14} {ns:7.1f} {cycles}  {sym:24} {mcycles} "
          f"{nbytes:9.1f} {rate}  {key}")
EOF
