#!/bin/bash
# lines-probe.sh — does a configuration's service demand move with the speed probe's figures from
# run to run? For the lines probe's pass after a sleep against the ALU step (docs/measure.md, "Work
# after a sleep"): a measurement of many short runs of one configuration, then
#
#   bash scripts/lines-probe.sh MEASUREMENT.json...   (DIR/measurements/<config>.json)
#
# One line per file: the runs with every figure, the service demand's median and range, the
# median and range of each probe figure (the means of a run's two sides), and each one's
# correlation with the service demand over the runs, Pearson's and Spearman's (on ranks; ties
# broken by order). Reads the files with jq.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/lines-probe.sh MEASUREMENT.json..." >&2
  exit 2
fi
command -v jq > /dev/null || { echo "lines-probe.sh: needs jq (bash scripts/setup.sh)" >&2; exit 2; }
for f in "$@"; do
  [ -r "$f" ] || { echo "lines-probe.sh: cannot read $f" >&2; exit 2; }
  name=$(basename "$f" .json)
  jq -r '.runs[] | select(.speed.after_sleep_line_ns != null)
         | [.service_demand_us_per_kb, .speed.after_sleep_line_ns, .speed.alu_ns] | @tsv' "$f" |
    awk -v name="$name" '
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
function pearson(x, y, n,   i, mx, my, sxy, sxx, syy) {
  for (i = 1; i <= n; i++) { mx += x[i]; my += y[i] }
  mx /= n; my /= n
  for (i = 1; i <= n; i++) {
    sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ^ 2; syy += (y[i] - my) ^ 2
  }
  return sxx > 0 && syy > 0 ? sxy / sqrt(sxx * syy) : 0
}
function ranks(src, out, n,   i, j, r) {  # out[i] = how many come before src[i]
  for (i = 1; i <= n; i++) {
    r = 0
    for (j = 1; j <= n; j++) if (src[j] < src[i] || (src[j] == src[i] && j < i)) r++
    out[i] = r
  }
}
{ n++; sd[n] = $1; line[n] = $2; alu[n] = $3 }
END {
  if (n < 3) { printf "%s: %d runs with the lines probe, too few to correlate\n", name, n; exit }
  ranks(sd, rsd, n); ranks(line, rline, n); ranks(alu, ralu, n)
  printf "%s: %d runs; service demand median %.4f us/KB (%s)\n", name, n, median(sd, n), range(sd, n)
  printf "  after_sleep_line_ns median %.2f (%s): Pearson %+.2f, Spearman %+.2f\n",
    median(line, n), range(line, n), pearson(line, sd, n), pearson(rline, rsd, n)
  printf "  alu_ns              median %.4f (%s): Pearson %+.2f, Spearman %+.2f\n",
    median(alu, n), range(alu, n), pearson(alu, sd, n), pearson(ralu, rsd, n)
}'
done
