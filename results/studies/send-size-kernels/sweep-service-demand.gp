# Service demand across a sweep of scenarios/thread2007/container.json
# Written by skbsim plot with sweep.dat, the data it reads. To draw it again, run
# `gnuplot sweep-service-demand.gp` in this directory: it writes sweep-service-demand.svg and sweep-service-demand.png.
set encoding utf8
do for [fmt in 'svg png'] {
  if (fmt eq 'svg') {
    set terminal svg size 1257,540 dynamic noenhanced font 'sans,12' background '#ffffff'
  } else {
    set terminal pngcairo size 1257,540 noenhanced font 'sans,11' background '#ffffff'
  }
  set output 'sweep-service-demand.'.fmt
  set title 'Service demand of host A against send_size: sweep of scenarios/thread2007/container.json'
  set xlabel '/traffic/flows/0/send_size'
  set ylabel 'service demand of host A (us/KB)'
  set key outside right top
  set grid lc rgb '#d0d0d0'
  set yrange [0:*]
  set logscale x 2
  set xrange [45.7143:91750.4000]
  set xtics ('64' 64, '128' 128, '256' 256, '512' 512, '1024' 1024, '2048' 2048, '4096' 4096, '8192' 8192, '16384' 16384, '32768' 32768, '65536' 65536)
  plot 'sweep.dat' index 0 using 1:4 with linespoints lw 2 pt 5 ps 1.1 lc rgb '#1f77b4' title 'kernel=2.6.20, /devices/A~1etun0/kind=etun, /devices/A~1etun1/kind=etun', \
       'sweep.dat' index 1 using 1:4 with linespoints lw 2 pt 6 ps 1.1 lc rgb '#d62728' title 'kernel=6.x, /devices/A~1etun0/kind=veth, /devices/A~1etun1/kind=veth'
  unset output
}
