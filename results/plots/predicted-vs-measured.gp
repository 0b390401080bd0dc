# Predicted against measured, with the tolerance band
# Written by skbsim plot with predicted-vs-measured.dat, the data it reads. To draw it again, run
# `gnuplot predicted-vs-measured.gp` in this directory: it writes predicted-vs-measured.svg and predicted-vs-measured.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 1930,1200 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 1930,1200 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'predicted-vs-measured.'.fmt
  set multiplot layout 3,1 title 'Predicted against measured, with each scenario''s tolerance band'
  set key outside right top
  set grid ytics lc rgb '#d0d0d0'
  set lmargin 18
  set rmargin 30
  set xtics rotate by 30 right nomirror
  set title 'CPU utilisation of the local host (%)'
  set xrange [-0.6:8.6]
  set yrange [0.0000:128.0151]
  set xtics ('measured-bridge-off-unlimited' 0, 'measured-bridge-on-unlimited' 1, 'measured-direct-off-unlimited' 2, 'measured-direct-on-unlimited' 3, 'measured-forward-off-unlimited' 4, 'measured-forward-on-unlimited' 5, 'thread2007-container-skip-cow' 6, 'thread2007-container' 7, 'thread2007-no-container' 8)
  plot 'predicted-vs-measured.dat' index 0 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 0 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 0 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 0 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  unset key
  set title 'service demand of the local host (us/KB)'
  set xrange [-0.6:5.6]
  set yrange [0.0000:3.7130]
  set xtics ('measured-bridge-off-unlimited' 0, 'measured-bridge-on-unlimited' 1, 'measured-direct-off-unlimited' 2, 'measured-direct-on-unlimited' 3, 'measured-forward-off-unlimited' 4, 'measured-forward-on-unlimited' 5)
  plot 'predicted-vs-measured.dat' index 1 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 1 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 1 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 1 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  set title 'throughput (10^6 bit/s)'
  set xrange [-0.6:8.6]
  set yrange [0.0000:25091.1446]
  set xtics ('measured-bridge-off-unlimited' 0, 'measured-bridge-on-unlimited' 1, 'measured-direct-off-unlimited' 2, 'measured-direct-on-unlimited' 3, 'measured-forward-off-unlimited' 4, 'measured-forward-on-unlimited' 5, 'thread2007-container-skip-cow' 6, 'thread2007-container' 7, 'thread2007-no-container' 8)
  plot 'predicted-vs-measured.dat' index 2 using 1:3:($1-0.3):($1+0.3):4:5 with boxxyerror fs solid 0.3 noborder lc rgb '#2ca02c' title 'measured ± tolerance', \
       '' index 2 using 1:3:(0.3) with xerrorbars ps 0 lw 2 lc rgb '#000000' title 'measured', \
       '' index 2 using 1:6 with points pt 9 ps 1.8 lc rgb '#d62728' title 'predicted', \
       '' index 2 using ($1+0.33):6:(sprintf('%+.1f%%', $7)) with labels left notitle
  unset multiplot
  unset output
}
