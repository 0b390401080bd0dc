#!/usr/bin/env bash
# The sweep acceptance of issue 6: 2 kernels x 5 feature sets of the container's device pair x 6
# send sizes (60 runs of the 2007 container scenario), with --jobs 1 and --jobs 2, REPEAT times
# each, alternating. Prints each wall time and checks that both wrote the same bytes.
#
#   scripts/sweep-speed.sh [SKBSIM] [REPEAT]     (default: build/release/sim/skbsim, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
skbsim=${1:-build/release/sim/skbsim}
repeat=${2:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sweep() {
  "$skbsim" sweep scenarios/thread2007/container.json \
    --set '/kernel,/devices/A~1etun0/kind,/devices/A~1etun1/kind=[2.6.20,etun,etun],[6.x,veth,veth]' \
    --set '/devices/A~1etun*/features=[],[NETIF_F_HW_CSUM],[NETIF_F_SG,NETIF_F_IP_CSUM],[NETIF_F_SG,NETIF_F_HW_CSUM],[NETIF_F_SG,NETIF_F_HW_CSUM,NETIF_F_TSO]' \
    --set /traffic/flows/0/send_size=64..65536*4 "$@" >/dev/null
}
micros() {  # wall time of one sweep in microseconds (bash 5's EPOCHREALTIME)
  local start=${EPOCHREALTIME/./}
  sweep "$@"
  echo $(( ${EPOCHREALTIME/./} - start ))
}
for _ in $(seq "$repeat"); do
  one=$(micros --jobs 1 --out "$out/j1")
  two=$(micros --jobs 2 --out "$out/j2")
  cmp -s "$out/j1/sweep.json" "$out/j2/sweep.json" && cmp -s "$out/j1/sweep.csv" "$out/j2/sweep.csv" \
    && same=identical || same=DIFFERENT
  printf 'jobs 1: %d.%03d s   jobs 2: %d.%03d s   speed-up %d.%02dx   output %s\n' \
    $((one / 1000000)) $((one / 1000 % 1000)) $((two / 1000000)) $((two / 1000 % 1000)) \
    $((one / two)) $((one * 100 / two % 100)) "$same"
done
