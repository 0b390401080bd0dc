#!/usr/bin/env bash
# The checksum loops' rates of a committed set's machine, from the set alone: for every scenario
# of SET_DIR whose traced run has a kernel profile (measurements/<name>.json, trace.profile), the
# samples in csum_partial and csum_partial_copy_generic over the traced run's segments (the
# client's TcpOutSegs), against the bytes the model runs through the same symbols per segment
# (`skbsim run --format json` on the scenario, per_segment.<symbol>_bytes). It prints each
# configuration's rate and the rate over all of them (all bytes over all samples' time), what
# cpu.csum_bytes_per_ns and cpu.fused_bytes_per_ns stand for, at the speed the set ran at, as
# traced and as an untraced estimate (times the ratio the two were found in where both were
# measured, below).
#
#   bash scripts/csum-rate-set.sh SET_DIR [SKBSIM]
#   e.g. bash scripts/csum-rate-set.sh scenarios/measured/kvm-2core-v1252
#
# For a machine that is no longer there. It assumes a traced run's profile samples the loops at
# the rate it samples the CPU they run on, and that the CPU's samples are taken in full while
# they run: a sample is skipped while a BPF program runs (which the loops never are), but a vCPU
# whose timer the host delivers late is sampled short, and the traced runs' sender CPUs took
# 0.22-0.50 of their busy time in samples (docs/measure.md, "The kernel profile"), about as much
# on every KVM set. Tracing also slows what it surrounds: on intel-kvm-2core-v1147 and intel-kvm-2core-2600mhz the traced runs,
# pooled, gave csum_partial 5-8 % above scripts/csum-rate.sh's untraced rate and the fused loop
# 0.69-0.71 of it (docs/measure.md, "The checksum loops"). A traced run holds a few dozen samples
# of each loop: a configuration's rate is known to a fifth or worse, the pooled one to about a
# tenth. The bytes are the model's, so a rate holds only where its per-segment counts match the
# kernel's (`skbsim validate`, point 3's rows). Needs python3 and a built skbsim (default
# build/release/sim/skbsim). Exit codes: 0 printed; 1 no traced profile or no sample in the set,
# or skbsim failed; 2 bad arguments.
set -euo pipefail
if (($# < 1 || $# > 2)); then
  echo "usage: csum-rate-set.sh SET_DIR [SKBSIM]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
set_dir=$(realpath -m -- "${1%/}")
skbsim=${2:-$root/build/release/sim/skbsim}
[[ "$skbsim" == */* ]] && skbsim=$(realpath -m -- "$skbsim")
cd "$root"
if [[ ! -d "$set_dir/measurements" ]]; then
  echo "csum-rate-set: expected a measured set with measurements/ at $set_dir" >&2
  exit 2
fi
if ! command -v "$skbsim" >/dev/null; then
  echo "csum-rate-set: expected a built skbsim at $skbsim" >&2
  exit 2
fi
if ! command -v python3 >/dev/null; then
  echo "csum-rate-set: expected python3, which prints the summary (apt-get install python3)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for scenario in "$set_dir"/*.json; do
  name=$(basename "$scenario")
  [[ -f "$set_dir/measurements/$name" ]] || continue
  if ! "$skbsim" run "$scenario" --format json >"$tmp/$name" 2>"$tmp/$name.err"; then
    echo "csum-rate-set: skbsim run $scenario failed:" >&2
    cat "$tmp/$name.err" >&2
    exit 1
  fi
done
python3 - "$set_dir" "$tmp" <<'EOF'
import glob
import json
import os
import sys

set_dir, model_dir = sys.argv[1], sys.argv[2]
LOOPS = [  # kernel function = model symbol, preset key
    ("csum_partial", "cpu.csum_bytes_per_ns"),
    ("csum_partial_copy_generic", "cpu.fused_bytes_per_ns"),
]
# The untraced rate over the traced one, where both were measured: scripts/csum-rate.sh's rates
# (at the set's speed) over this script's on intel-kvm-2core-v1147 (csum_partial 29.7 / 31.34,
# the fused loop 14.5 / 10.30) and intel-kvm-2core-2600mhz (32.9 / 35.60, 16.1 / 11.18), their
# means. Measured on one host: another may trace slower or faster.
UNTRACED_OVER_TRACED = {"csum_partial": 0.936, "csum_partial_copy_generic": 1.424}
rows = []
for path in sorted(glob.glob(os.path.join(model_dir, "*.json"))):
    name = os.path.basename(path)
    trace = json.load(open(os.path.join(set_dir, "measurements", name))).get("trace", {})
    profile = trace.get("profile", {})
    segments = trace.get("run", {}).get("tcp", {}).get("client_out_segs", 0)
    if not profile.get("functions") or segments == 0:
        continue
    hz = profile["hz"]
    samples = {f["function"]: f["samples"] for f in profile["functions"]}
    per_segment = json.load(open(path))["hosts"]["M"]["per_segment"]
    rows.append((name[:-5], hz, segments, samples, per_segment))
if not rows:
    sys.exit(f"csum-rate-set: no traced run with a profile in {set_dir}")
print(f"{set_dir}: {len(rows)} traced runs with a profile")
print(f"{'configuration':28} {'loop':26} {'samples':>7} {'ns/seg':>7} {'bytes/seg':>9} "
      f"{'bytes/ns':>8}")
status = 0
for fn, key in LOOPS:
    total_bytes = total_ns = total_samples = 0
    for name, hz, segments, samples, per_segment in rows:
        n = samples.get(fn, 0)
        nbytes = per_segment.get(f"{fn}_bytes", 0.0)
        if nbytes <= 0:
            continue  # the model runs no byte through it here: nothing to set a rate against
        if n == 0:
            # The profile lists its 40 busiest functions: a loop not among them has bytes but no
            # time here, and pooling its bytes would make the rate too high.
            print(f"{name:28} {fn:26} not in the profile's function list: left out")
            continue
        ns = n / hz * 1e9
        total_bytes += nbytes * segments
        total_ns += ns
        total_samples += n
        rate = f"{nbytes * segments / ns:8.2f}"
        print(f"{name:28} {fn:26} {n:7d} {ns / segments:7.1f} {nbytes:9.1f} {rate}")
    if total_samples == 0:
        print(f"{'all':28} {fn:26} no sample where the model runs bytes through it")
        status = 1
        continue
    traced = total_bytes / total_ns
    print(f"{'all':28} {fn:26} {total_samples:7d} {'':7} {'':9} {traced:8.2f}  traced")
    print(f"{'all, untraced estimate':28} {fn:26} {'':7} {'':7} {'':9} "
          f"{traced * UNTRACED_OVER_TRACED[fn]:8.2f}  {key} (x{UNTRACED_OVER_TRACED[fn]})")
sys.exit(status)
EOF
