# Predicted against measured, with the tolerance band
# Written by skbsim plot with predicted-vs-measured.dat, the data it reads. To draw it again, run
# `gnuplot predicted-vs-measured.gp` in this directory: it writes predicted-vs-measured.svg and predicted-vs-measured.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 6010,1260 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 6010,1260 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'predicted-vs-measured.'.fmt
  set multiplot layout 3,1 title 'Predicted against measured, with each scenario''s tolerance band'
  set key outside right top
  set grid ytics lc rgb '#d0d0d0'
  set lmargin 21
  set rmargin 30
  set xtics rotate by 30 right nomirror
  set title 'CPU utilisation of the local host (%)'
  set xrange [-0.6:32.6]
  set yrange [0.0000:132.1860]
  set xtics ('measured-bridge-csum-off-1000mbps' 0, 'measured-bridge-csum-off-unlimited' 1, 'measured-bridge-off-1000mbps' 2, 'measured-bridge-off-unlimited' 3, 'measured-bridge-on-1000mbps' 4, 'measured-bridge-on-unlimited' 5, 'measured-bridge-sg-off-1000mbps' 6, 'measured-bridge-sg-off-unlimited' 7, 'measured-bridge-tso-off-1000mbps' 8, 'measured-bridge-tso-off-unlimited' 9, 'measured-direct-csum-off-1000mbps' 10, 'measured-direct-csum-off-unlimited' 11, 'measured-direct-off-1000mbps' 12, 'measured-direct-off-unlimited' 13, 'measured-direct-on-1000mbps' 14, 'measured-direct-on-unlimited' 15, 'measured-direct-sg-off-1000mbps' 16, 'measured-direct-sg-off-unlimited' 17, 'measured-direct-tso-off-1000mbps' 18, 'measured-direct-tso-off-unlimited' 19, 'measured-forward-csum-off-1000mbps' 20, 'measured-forward-csum-off-unlimited' 21, 'measured-forward-off-1000mbps' 22, 'measured-forward-off-unlimited' 23, 'measured-forward-on-1000mbps' 24, 'measured-forward-on-unlimited' 25, 'measured-forward-sg-off-1000mbps' 26, 'measured-forward-sg-off-unlimited' 27, 'measured-forward-tso-off-1000mbps' 28, 'measured-forward-tso-off-unlimited' 29, 'thread2007-container-skip-cow' 30, 'thread2007-container' 31, 'thread2007-no-container' 32)
  plot 'predicted-vs-measured.dat' index 0 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 0 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 0 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 0 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  unset key
  set title 'service demand of the local host (us/KB)'
  set xrange [-0.6:29.6]
  set yrange [0.0346:3.8169]
  set xtics ('measured-bridge-csum-off-1000mbps' 0, 'measured-bridge-csum-off-unlimited' 1, 'measured-bridge-off-1000mbps' 2, 'measured-bridge-off-unlimited' 3, 'measured-bridge-on-1000mbps' 4, 'measured-bridge-on-unlimited' 5, 'measured-bridge-sg-off-1000mbps' 6, 'measured-bridge-sg-off-unlimited' 7, 'measured-bridge-tso-off-1000mbps' 8, 'measured-bridge-tso-off-unlimited' 9, 'measured-direct-csum-off-1000mbps' 10, 'measured-direct-csum-off-unlimited' 11, 'measured-direct-off-1000mbps' 12, 'measured-direct-off-unlimited' 13, 'measured-direct-on-1000mbps' 14, 'measured-direct-on-unlimited' 15, 'measured-direct-sg-off-1000mbps' 16, 'measured-direct-sg-off-unlimited' 17, 'measured-direct-tso-off-1000mbps' 18, 'measured-direct-tso-off-unlimited' 19, 'measured-forward-csum-off-1000mbps' 20, 'measured-forward-csum-off-unlimited' 21, 'measured-forward-off-1000mbps' 22, 'measured-forward-off-unlimited' 23, 'measured-forward-on-1000mbps' 24, 'measured-forward-on-unlimited' 25, 'measured-forward-sg-off-1000mbps' 26, 'measured-forward-sg-off-unlimited' 27, 'measured-forward-tso-off-1000mbps' 28, 'measured-forward-tso-off-unlimited' 29)
  plot 'predicted-vs-measured.dat' index 1 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 1 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 1 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 1 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  set title 'throughput (10^6 bit/s)'
  set xrange [-0.6:32.6]
  set yrange [0.0000:26213.9433]
  set xtics ('measured-bridge-csum-off-1000mbps' 0, 'measured-bridge-csum-off-unlimited' 1, 'measured-bridge-off-1000mbps' 2, 'measured-bridge-off-unlimited' 3, 'measured-bridge-on-1000mbps' 4, 'measured-bridge-on-unlimited' 5, 'measured-bridge-sg-off-1000mbps' 6, 'measured-bridge-sg-off-unlimited' 7, 'measured-bridge-tso-off-1000mbps' 8, 'measured-bridge-tso-off-unlimited' 9, 'measured-direct-csum-off-1000mbps' 10, 'measured-direct-csum-off-unlimited' 11, 'measured-direct-off-1000mbps' 12, 'measured-direct-off-unlimited' 13, 'measured-direct-on-1000mbps' 14, 'measured-direct-on-unlimited' 15, 'measured-direct-sg-off-1000mbps' 16, 'measured-direct-sg-off-unlimited' 17, 'measured-direct-tso-off-1000mbps' 18, 'measured-direct-tso-off-unlimited' 19, 'measured-forward-csum-off-1000mbps' 20, 'measured-forward-csum-off-unlimited' 21, 'measured-forward-off-1000mbps' 22, 'measured-forward-off-unlimited' 23, 'measured-forward-on-1000mbps' 24, 'measured-forward-on-unlimited' 25, 'measured-forward-sg-off-1000mbps' 26, 'measured-forward-sg-off-unlimited' 27, 'measured-forward-tso-off-1000mbps' 28, 'measured-forward-tso-off-unlimited' 29, 'thread2007-container-skip-cow' 30, 'thread2007-container' 31, 'thread2007-no-container' 32)
  plot 'predicted-vs-measured.dat' index 2 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 2 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 2 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 2 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  unset multiplot
  unset output
}
