# gnuplot -e "dir='bench/results/<run>'" bench/results/e2e_plots.gp
# Reads <dir>/{shm2,shm4,netem4}_{size,density,grid}.dat (e2e_report.py).
set terminal pngcairo size 900,600 noenhanced
set grid
set key top left
do for [net in "shm2 shm4 netem4"] {
  set output sprintf("%s/%s_time_vs_size.png", dir, net)
  set title sprintf("%s: time vs size, density 1%%, fp32", net)
  set logscale xy
  set xlabel "bytes per rank"
  set ylabel "time per call (ms, median)"
  f = sprintf("%s/%s_size.dat", dir, net)
  plot f using 1:($3/1e3) with linespoints title "dense MPI_Allreduce (ring)", \
       f using 1:($4/1e3) with linespoints title "libdct (auto)", \
       f using 1:($5/1e3) with lines dt 2 title "physical bound"
  set output sprintf("%s/%s_time_vs_density.png", dir, net)
  set title sprintf("%s: time vs density, 64 MiB fp32", net)
  set xlabel "density"
  f = sprintf("%s/%s_density.dat", dir, net)
  plot f using 2:($3/1e3) with linespoints title "dense MPI_Allreduce (ring)", \
       f using 2:($4/1e3) with linespoints title "libdct (auto)", \
       f using 2:($5/1e3) with lines dt 2 title "physical bound"
  unset logscale
  set output sprintf("%s/%s_phases.png", dir, net)
  set title sprintf("%s: where a 64 MiB step goes, by density (ms, mean over ranks)", net)
  set style data histograms
  set style histogram rowstacked
  set style fill solid 0.8 border -1
  set boxwidth 0.7
  set xlabel "density"
  set key top right
  plot f using ($8/1e3):xtic(2) title "compress", '' using ($9/1e3) title "agree", \
       '' using ($10/1e3) title "exchange", '' using ($11/1e3) title "reduce", '' using ($12/1e3) title "other"
  set style data linespoints
  set key top left
  set output sprintf("%s/%s_grid_speedup.png", dir, net)
  set title sprintf("%s: libdct (auto) speedup over dense MPI_Allreduce, by size and density", net)
  set logscale xy
  set xlabel "bytes per rank"
  set ylabel "speedup (dense time / libdct time)"
  set xrange [32768:33554432]
  f = sprintf("%s/%s_grid.dat", dir, net)
  plot for [d in "0.0001 0.001 0.01 0.1 0.3 0.5"] f using 1:(abs($2 - d) < 1e-9 ? $3/$4 : 1/0) \
         with linespoints title sprintf("density %s", d), \
       0.95 with lines dt 2 lc rgb "black" title "0.95x (target floor)"
  unset logscale
  set autoscale x
}
