# CPU breakdown by kernel symbol group, per scenario
# Written by skbsim plot with breakdown.dat, the data it reads. To draw it again, run
# `gnuplot breakdown.gp` in this directory: it writes breakdown.svg and breakdown.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 23100,756 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 23100,756 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'breakdown.'.fmt
  set title 'CPU breakdown by kernel symbol group: where each host spends its CPU'
  set ylabel 'CPU utilisation (% of the host''s CPUs)'
  set style data histograms
  set style histogram rowstacked
  set style fill solid 0.85 border rgb '#404040'
  set boxwidth 0.6 relative
  set key outside right top vertical Left reverse noautotitle title 'symbol group'
  set xtics rotate by 40 right nomirror scale 0
  set lmargin 36
  set ytics nomirror
  set grid ytics lc rgb '#d0d0d0'
  set yrange [0:112.00]
  plot 'breakdown.dat' using 2:xtic(1) title 'copy' lc rgb '#d62728', \
       '' using 3 title 'checksum' lc rgb '#ff7f0e', \
       '' using 4 title 'skb management' lc rgb '#1f77b4', \
       '' using 5 title 'protocol (TCP, IPv4)' lc rgb '#2ca02c', \
       '' using 6 title 'device and softirq' lc rgb '#9467bd', \
       '' using 7 title 'memory (slab, pages)' lc rgb '#8c564b', \
       '' using 8 title 'other (syscall, wake-up)' lc rgb '#7f7f7f', \
       '' using 0:9:(sprintf('%.2f', $9)) with labels offset 0,0.7 notitle
  unset output
}
