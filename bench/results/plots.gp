# gnuplot -e "dir='bench/results/<run>'" bench/results/plots.gp
# Reads <dir>/{shm,netem}_size_D*.dat and <dir>/{shm,netem}_density.dat.
set terminal pngcairo size 900,600 noenhanced
set grid
set key top left
do for [net in "shm netem"] {
  set output sprintf("%s/%s_time_vs_size.png", dir, net)
  set title sprintf("time vs size, 4 ranks, %s: dense MPI_Allreduce vs libdct", net eq "netem" ? "1 Gbit/s shaped links" : "shared memory")
  set logscale xy
  set xlabel "bytes per rank"
  set ylabel "time per call (ms, median)"
  plot for [d in "0.001 0.01 0.1"] sprintf("%s/%s_size_D%s.dat", dir, net, d) using 1:($4/1e3) with linespoints title sprintf("dense (run D=%s)", d), \
       for [d in "0.001 0.01 0.1"] sprintf("%s/%s_size_D%s.dat", dir, net, d) using 1:($7/1e3) with linespoints title sprintf("libdct D=%s", d)
  set output sprintf("%s/%s_speedup_vs_density.png", dir, net)
  set title sprintf("speedup over dense vs density, 64 MiB fp32, 4 ranks, %s", net eq "netem" ? "1 Gbit/s" : "shared memory")
  set logscale x
  unset logscale y
  set xlabel "density"
  set ylabel "dense time / libdct time"
  plot sprintf("%s/%s_density.dat", dir, net) using 2:10 with linespoints title "speedup", 1 with lines dt 2 title "parity"
  unset logscale
}
