#!/bin/bash
# speed-adjusted.sh — the medians of saved `skbsim measure --compare` outputs, counted again at the
# set's speed, as `--at-set-speed` counts them (docs/measure.md, "At the set's speed"): for reading
# the comparisons committed before the count was printed.
#
#   bash scripts/speed-adjusted.sh FILE...   (summary.txt, [previous-set-]reproduced*.txt)
#
# One line per comparison block ("compared with ..." to its verdict) with a configuration whose
# speed probe is on both sides: the median of the ALU step's ratio (now over the set's), and how
# many of those configurations' medians are within 15 % as measured and at the set's speed (the
# medians of configurations without a probe are not counted). Each configuration's service demand
# is divided by its ratio, and so is its CPU at a fixed rate; unlimited, its throughput is
# multiplied by it and its CPU left alone. It reads the printed figures (four decimals, the probe
# three), so a median within a hair of 15 % may fall on the other side from compare's own count.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/speed-adjusted.sh FILE..." >&2
  exit 2
fi
for f in "$@"; do
  [ -r "$f" ] || { echo "speed-adjusted.sh: cannot read $f" >&2; exit 2; }
done
awk '
function within(v, c,   d) {  # compare: a committed 0 is a difference of 0
  if (c == 0) return 1
  d = v / c - 1
  return (d < 0 ? -d : d) <= 0.15
}
function finish(   n, i, j, t, c, median) {
  if (block != "" && compared > 0) {
    n = 0
    for (c in ratio) r[++n] = ratio[c]
    for (i = 2; i <= n; i++) {  # insertion sort, for the median
      t = r[i]
      for (j = i - 1; j >= 1 && r[j] > t; j--) r[j + 1] = r[j]
      r[j + 1] = t
    }
    median = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    printf "%s: %s; ALU step ratio median %.3f over %d configurations; ",
      block_file, block, median, n
    printf "within 15%%: %d of %d as measured, %d at the set'"'"'s speed\n", raw, compared, adjusted
  }
  block = ""; compared = 0; raw = 0; adjusted = 0
  split("", ratio); split("", r)
}
FNR == 1 { finish() }
/^compared with / {
  finish()
  block = substr($0, 15); sub(/ \(medians;.*/, "", block); block_file = FILENAME
  next
}
block != "" && /^(NOT reproduced|reproduced|as measured)/ { finish(); next }
block != "" && $2 == "speed" && $3 == "probe" && $4 == "alu_ns" && $5 > 0 && $6 > 0 {
  ratio[$1] = $6 / $5
  next
}
block != "" && ($1 in ratio) &&
    ($2 == "throughput_mbps" || $2 == "cpu_util_pct" || $2 == "service_demand_us_per_kb") {
  k = ratio[$1]; v = $4; unlimited = ($1 ~ /-unlimited$/)
  if ($2 == "service_demand_us_per_kb" || ($2 == "cpu_util_pct" && !unlimited)) a = v / k
  else if ($2 == "throughput_mbps" && unlimited) a = v * k
  else a = v
  compared++
  raw += within(v, $3)
  adjusted += within(a, $3)
  next
}
END { finish() }
' "$@"
