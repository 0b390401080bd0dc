# Service demand across a sweep of scenarios/thread2007/container.json
# Written by skbsim plot with sweep.dat, the data it reads. To draw it again, run
# `gnuplot sweep-service-demand.gp` in this directory: it writes sweep-service-demand.svg and sweep-service-demand.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 886,540 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 886,540 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'sweep-service-demand.'.fmt
  set title 'Service demand of host A against features: sweep of scenarios/thread2007/container.json'
  set xlabel '/devices/A~1etun*/features'
  set ylabel 'service demand of host A (us/KB)'
  set key outside right top
  set grid lc rgb '#d0d0d0'
  set yrange [0:*]
  set xrange [-0.3:4.3]
  set xtics ('none' 0, 'NETIF_F_HW_CSUM' 1, 'NETIF_F_SG+NETIF_F_HW_CSUM' 2, 'NETIF_F_SG+NETIF_F_HW_CSUM+NETIF_F_LLTX+NETIF_F_HIGHDMA' 3, 'NETIF_F_SG+NETIF_F_HW_CSUM+NETIF_F_TSO' 4) rotate by 30 right
  plot 'sweep.dat' index 0 using 1:4 with linespoints lw 2 pt 5 ps 1.1 lc rgb '#1f77b4' title 'skip_cow_from=none', \
       'sweep.dat' index 1 using 1:4 with linespoints lw 2 pt 6 ps 1.1 lc rgb '#d62728' title 'skip_cow_from=etun'
  unset output
}
