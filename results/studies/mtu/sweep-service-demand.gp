# Service demand across a sweep of scenarios/thread2007/container.json
# Written by skbsim plot with sweep.dat, the data it reads. To draw it again, run
# `gnuplot sweep-service-demand.gp` in this directory: it writes sweep-service-demand.svg and sweep-service-demand.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 1327,540 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 1327,540 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'sweep-service-demand.'.fmt
  set title 'Service demand of host A against mtu: sweep of scenarios/thread2007/container.json'
  set xlabel '/devices/*/mtu'
  set ylabel 'service demand of host A (us/KB)'
  set key outside right top
  set grid lc rgb '#d0d0d0'
  set yrange [0:*]
  set xrange [1200.0000:9300.0000]
  set xtics ('1500' 1500, '9000' 9000)
  plot 'sweep.dat' index 0 using 1:4 with linespoints lw 2 pt 5 ps 1.1 lc rgb '#1f77b4' title 'mss=1448, kernel=2.6.20, /devices/A~1etun0/kind=etun, /devices/A~1etun1/kind=etun', \
       'sweep.dat' index 1 using 1:4 with linespoints lw 2 pt 6 ps 1.1 lc rgb '#d62728' title 'mss=1448, kernel=6.x, /devices/A~1etun0/kind=veth, /devices/A~1etun1/kind=veth', \
       'sweep.dat' index 2 using 1:4 with linespoints lw 2 pt 7 ps 1.1 lc rgb '#2ca02c' title 'mss=8948, kernel=2.6.20, /devices/A~1etun0/kind=etun, /devices/A~1etun1/kind=etun', \
       'sweep.dat' index 3 using 1:4 with linespoints lw 2 pt 8 ps 1.1 lc rgb '#ff7f0e' title 'mss=8948, kernel=6.x, /devices/A~1etun0/kind=veth, /devices/A~1etun1/kind=veth'
  unset output
}
