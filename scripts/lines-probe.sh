#!/bin/bash
# lines-probe.sh — does a configuration's service demand move with the speed probe's figures from
# run to run? For the lines probe's pass after a sleep against the ALU step (docs/measure.md,
# "Work after a sleep"): a measurement of many short runs of one configuration, then
#
#   bash scripts/lines-probe.sh MEASUREMENT.json...   (DIR/measurements/<config>.json)
#
# One block per file: the runs with every figure and the service demand's median and range; the
# median and range of each probe figure (a run's: the mean of its two sides) and its correlation
# with the service demand over the runs, Pearson's and Spearman's (on ranks, ties sharing their
# mean rank; n/a when either series is constant); the hot pass's median and range; and how many
# of the runs' CPU-sides read the pass after a sleep within 1.5 times their hot pass (the caches
# as the sleep found them). Reads the files with jq.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/lines-probe.sh MEASUREMENT.json..." >&2
  exit 2
fi
command -v jq > /dev/null || {
  echo "lines-probe.sh: needs jq (bash scripts/setup.sh)" >&2
  exit 2
}
for f in "$@"; do
  [ -r "$f" ] || { echo "lines-probe.sh: cannot read $f" >&2; exit 2; }
  name=$(basename "$f" .json)
  # One line per run: service demand, after_sleep_line_ns, alu_ns, hot_line_ns, then per
  # CPU-side "after/hot" pairs. Runs without the probe or a service demand are left out.
  rows=$(jq -r '(.runs // [])[]
      | select(.speed.after_sleep_line_ns != null and .service_demand_us_per_kb != null)
      | [.service_demand_us_per_kb, .speed.after_sleep_line_ns, .speed.alu_ns,
         .speed.hot_line_ns,
         ([.speed.before.cpus[], .speed.after.cpus[]
           | "\(.after_sleep_line_ns)/\(.hot_line_ns)"] | join(" "))] | @tsv' "$f") || {
    echo "lines-probe.sh: $f is not a measurement file jq can read" >&2
    exit 2
  }
  awk -F'\t' -v name="$name" '
function sort(a, n,   i, j, t) {  # insertion sort, in place
  for (i = 2; i <= n; i++) {
    t = a[i]
    for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
    a[j + 1] = t
  }
}
function median(src, n,   i, a) {
  for (i = 1; i <= n; i++) a[i] = src[i]
  sort(a, n)
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function range(src, n,   i, lo, hi) {
  lo = hi = src[1]
  for (i = 2; i <= n; i++) { if (src[i] < lo) lo = src[i]; if (src[i] > hi) hi = src[i] }
  return sprintf("%.4g..%.4g", lo, hi)
}
function pearson(x, y, n,   i, mx, my, sxy, sxx, syy) {  # "n/a" when a series is constant
  for (i = 1; i <= n; i++) { mx += x[i]; my += y[i] }
  mx /= n; my /= n
  for (i = 1; i <= n; i++) {
    sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ^ 2; syy += (y[i] - my) ^ 2
  }
  return sxx > 0 && syy > 0 ? sprintf("%+.2f", sxy / sqrt(sxx * syy)) : "n/a"
}
function ranks(src, out, n,   i, j, below, same) {  # ties share their mean rank
  for (i = 1; i <= n; i++) {
    below = 0; same = 0
    for (j = 1; j <= n; j++) { if (src[j] < src[i]) below++; else if (src[j] == src[i]) same++ }
    out[i] = below + (same - 1) / 2
  }
}
function figure(label, v,   r) {
  ranks(v, r, n)
  printf "  %-19s median %.4g (%s): Pearson %s, Spearman %s\n", label, median(v, n), range(v, n),
    pearson(v, sd, n), pearson(r, rsd, n)
}
$1 == "" { next }  # no run had the probe
{
  n++; sd[n] = $1; line[n] = $2; alu[n] = $3; hot[n] = $4
  sides += split($5, side, " ")
  for (k in side) { split(side[k], ah, "/"); if (ah[1] + 0 <= 1.5 * ah[2]) warm++ }
}
END {
  if (n < 3) { printf "%s: %d runs with the lines probe, too few to correlate\n", name, n; exit }
  ranks(sd, rsd, n)
  printf "%s: %d runs; service demand median %.4f us/KB (%s)\n", name, n, median(sd, n),
    range(sd, n)
  figure("after_sleep_line_ns", line)
  figure("alu_ns", alu)
  printf "  hot_line_ns         median %.4g (%s)\n", median(hot, n), range(hot, n)
  printf "  CPU-sides after a sleep within 1.5x their hot pass: %d of %d\n", warm, sides
}' <<< "$rows"
done
