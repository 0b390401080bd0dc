#!/usr/bin/env bash
# The history of skbsim's main figures across the commits that changed results/ (the regression
# baseline, docs/results.md), so a reviewer sees drift at a glance:
#   - the 2007 thread's three CPU rows (host A's CPU %: no container, container, container with
#     the skip-cow patch), with the measured values dashed;
#   - the forward/direct ratio of service demand: 2.6.20 (thread2007 container / no-container)
#     and 6.x (modern/container-veth over a direct 6.x scenario when results/ has one, see
#     modern_direct below; until then the 6.x line is container-veth with offloads off / on,
#     and the panel says so);
#   - the simulator's own speed, simulated packet-hops per second (results/runtime.json).
# It reads the committed baseline at each commit (git show), and the working tree's results/ as a
# last point when it differs from HEAD. Writes OUT_DIR/history.{dat,gp,svg,png}, all or nothing.
#
#   bash scripts/history.sh [OUT_DIR]        (default: build/history; needs git, jq, gnuplot)
#
# Exit codes: 0 drawn; 77 skipped, with the reason (not a git checkout, or no commit changed
# results/: e.g. a shallow clone); 1 a tool is missing or gnuplot failed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/history}

# A direct 6.x scenario's baseline, the first of these that exists (none does yet).
modern_direct=(modern/direct.json modern/direct-veth.json)

for tool in git jq gnuplot; do
  if ! command -v "$tool" >/dev/null; then
    echo "history: expected $tool on the PATH (bash scripts/setup.sh installs it)" >&2
    exit 1
  fi
done
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "history: skipped: not a git checkout"
  exit 77
fi
mapfile -t commits < <(git log --reverse --format=%H -- results/)
points=("${commits[@]}")
if [[ -d results && -n $(git status --porcelain -- results/ 2>/dev/null) ]]; then
  points+=(worktree)
fi
if ((${#points[@]} == 0)); then
  shallow=$(git rev-parse --is-shallow-repository 2>/dev/null || echo false)
  echo "history: skipped: no commit has changed results/ yet (shallow clone: $shallow)"
  exit 77
fi

# read POINT FILE: the baseline file as of that commit (or the working tree); empty if absent.
read_at() {
  if [[ $1 == worktree ]]; then
    cat "results/$2" 2>/dev/null || true
  else
    git show "$1:results/$2" 2>/dev/null || true
  fi
}
# figure POINT FILE JQ: one number, or ? when the file or the figure is missing.
figure() {
  local v
  v=$(read_at "$1" "$2" | jq -r "($3) // \"?\"" 2>/dev/null || true)
  echo "${v:-?}"
}
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "?" || b == "?" || b == 0) print "?"; else printf "%.4f\n", a / b }'
}

cpu='.hosts[.local_host].cpu_util_pct'
sd='.hosts[.local_host].service_demand_us_per_kb'
measured='.validation.cpu_util_pct.measured'
partial="$out.partial"
rm -rf "$partial"
mkdir -p "$partial"
dat="$partial/history.dat"
{
  echo "# skbsim history: one row per commit that changed results/ (oldest first)."
  echo "# columns: n, commit, date, host A CPU % of thread2007 no-container, container,"
  echo "# container-skip-cow; their measured CPU %; service-demand ratios 2.6.20 container /"
  echo "# no-container, 6.x container-veth / direct, 6.x offloads off / on; M hops/s."
} >"$dat"
have_direct=0
n=0
for p in "${points[@]}"; do
  if [[ $p == worktree ]]; then
    label="work tree"
  else
    label=$(git log -1 --date=format:%Y-%m-%d --format='%h %ad' "$p")
  fi
  no=$(figure "$p" thread2007/no-container.json "$cpu")
  ct=$(figure "$p" thread2007/container.json "$cpu")
  sk=$(figure "$p" thread2007/container-skip-cow.json "$cpu")
  mno=$(figure "$p" thread2007/no-container.json "$measured")
  mct=$(figure "$p" thread2007/container.json "$measured")
  msk=$(figure "$p" thread2007/container-skip-cow.json "$measured")
  r2620=$(ratio "$(figure "$p" thread2007/container.json "$sd")" \
                "$(figure "$p" thread2007/no-container.json "$sd")")
  fwd=$(figure "$p" modern/container-veth.json "$sd")
  direct="?"
  for d in "${modern_direct[@]}"; do
    if [[ $direct == "?" ]]; then
      direct=$(figure "$p" "$d" "$sd")
    fi
  done
  r6x=$(ratio "$fwd" "$direct")
  [[ $r6x == "?" ]] || have_direct=1
  r6x_off=$(ratio "$(figure "$p" modern/container-veth-offloads-off.json "$sd")" "$fwd")
  speed=$(figure "$p" runtime.json '.total.hops_per_s / 1e6')
  echo "$n \"$label\" $no $ct $sk $mno $mct $msk $r2620 $r6x $r6x_off $speed" >>"$dat"
  n=$((n + 1))
done

if ((have_direct)); then
  ratio_plot="'history.dat' using 1:10 with linespoints lw 2 pt 7 lc rgb '#9467bd' title '6.x: container-veth / direct'"
  ratio_title="Forward/direct ratio of the local host's service demand"
else
  ratio_plot="'history.dat' using 1:11 with linespoints lw 2 pt 7 lc rgb '#9467bd' title '6.x: container-veth offloads off / on'"
  ratio_title="Forward/direct ratio of the local host's service demand\\n(no direct 6.x scenario in results/ yet: the 6.x line is offloads off / on)"
fi
width=$((800 + 60 * n))
((width < 1100)) && width=1100
cat >"$partial/history.gp" <<EOF
# History of skbsim's main figures across the commits that changed results/ (scripts/history.sh).
# Reads history.dat; to draw it again, run \`gnuplot history.gp\` in this directory.
set encoding utf8
set datafile missing '?'
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size $width,1000 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size $width,1000 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'history.'.fmt
  set multiplot layout 3,1 title 'skbsim: the main figures across the commits that changed results/'
  set key outside right top
  set grid lc rgb '#d0d0d0'
  set lmargin 12
  set rmargin 40
  set xrange [-0.5:$n - 0.5]
  set xtics rotate by 20 right nomirror
  set offsets 0, 0, graph 0.1, 0
  set yrange [0:*]
  set title "The 2007 thread's three rows: CPU utilisation of host A"
  set ylabel 'CPU utilisation (%)'
  plot 'history.dat' using 1:4:xtic(2) with linespoints lw 2 pt 7 lc rgb '#d62728' title 'container (etun, ip_forward)', \\
       '' using 1:7 with linespoints dt 2 pt 1 ps 2 lc rgb '#d62728' notitle, \\
       '' using 1:5 with linespoints lw 2 pt 7 lc rgb '#ff7f0e' title 'container, skip-cow patch', \\
       '' using 1:8 with linespoints dt 2 pt 1 ps 2 lc rgb '#ff7f0e' notitle, \\
       '' using 1:3 with linespoints lw 2 pt 7 lc rgb '#1f77b4' title 'no container', \\
       '' using 1:6 with linespoints dt 2 pt 1 ps 2 lc rgb '#1f77b4' notitle, \\
       NaN with linespoints dt 2 pt 1 ps 2 lc rgb '#555555' title 'measured (2007 thread)'
  set title "$ratio_title"
  set ylabel 'service demand ratio'
  plot 'history.dat' using 1:9:xtic(2) with linespoints lw 2 pt 7 lc rgb '#2ca02c' title '2.6.20: container / no-container', \\
       $ratio_plot
  set title "The simulator's own speed (results/runtime.json)"
  set ylabel 'M simulated packet-hops/s'
  plot 'history.dat' using 1:12:xtic(2) with linespoints lw 2 pt 7 lc rgb '#7f7f7f' title 'all scenarios, M hops/s'
  unset multiplot
  unset output
}
EOF
if ! (cd "$partial" && gnuplot history.gp); then
  rm -rf "$partial"
  echo "history: gnuplot failed on $out/history.gp" >&2
  exit 1
fi
rm -rf "$out.old"
[[ -e $out ]] && mv "$out" "$out.old"
mv "$partial" "$out"
rm -rf "$out.old"
echo "history: $n point(s), wrote $out/history.svg and $out/history.png"
