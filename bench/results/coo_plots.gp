# Time vs density of dct_perf -C coo (collect_coo.sh): gnuplot -e "dir='...'" coo_plots.gp
set terminal pngcairo size 900,560 noenhanced
set logscale xy
set xlabel "density (% of 16M fp32 entries per rank)"
set ylabel "ms per call, 4 ranks (median)"
set key top left
set grid
do for [where in "netem shm"] {
  set output sprintf("%s/%s_time_vs_density.png", dir, where)
  set title sprintf("sparse-input allreduce, 64 MiB, 4 ranks, %s", where eq "netem" ? "1 Gbit/s shaped links" : "shared memory (2 cores)")
  f = sprintf("%s/%s.dat", dir, where)
  plot f u 1:2 w lp t "dense MPI_Allreduce (ring)", \
       f u 1:3 w lp lw 2 t "libdct auto", \
       f u 1:4 w lp t "allgather plan", f u 1:5 w lp t "split plan", f u 1:6 w lp t "dense plan", \
       f u 1:7 w lp dt 2 t "allgather + scatter-add", f u 1:8 w lp dt 3 t "libdct auto, Zipf indices"
}
