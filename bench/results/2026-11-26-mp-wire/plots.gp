set terminal pngcairo size 1400,600 noenhanced
set grid
set key top left font ",9"
set logscale xy
do for [net in nets] {
  set output sprintf("%s/%s_time_vs_size.png", dir, net)
  set multiplot layout 1,2 title sprintf("DCT-MP all-to-all, 4 ranks, fp32, %s: time per call (median of runs)", net eq "netem" ? "1 Gbit/s shaped links" : "shared memory, 4 ranks on 2 cores")
  do for [D in rowlengths] {
    set title sprintf("row length %s", D)
    set xlabel "send buffer bytes per rank"
    set ylabel "ms"
    first = sprintf("%s/%s_R%s_D%s.dat", dir, net, D, word(series, 1))
    file(i) = sprintf("%s/%s_R%s_D%s.dat", dir, net, D, word(series, i))
    # The dense floor only exists on the shaped links: an extra curve there.
    floor = net eq "netem" ? "1 Gbit/s floor of dense (bytes / rate)" : ""
    plot first using 1:($2/1e3) with linespoints lw 2 lc rgb "black" title "dense MPI_Alltoallv", \
         for [i=1:words(series)] file(i) using 1:($3/1e3) with linespoints lc i title sprintf("forward, density %s", word(series, i)), \
         for [i=1:words(series)] file(i) using 1:($4/1e3) with linespoints dt 2 lc i title sprintf("backward, density %s", word(series, i)), \
         for [k=1:(net eq "netem")] first using 1:10 with lines dt 3 lc rgb "gray40" title floor
  }
  unset multiplot
}
