# gnuplot plot.gp (in this folder): forward phases before/after, stacked, from phases.dat
set terminal pngcairo size 900,560 noenhanced font ",10"
set output "forward_phases.png"
set title "dctSparseAlltoall forward, 16 MiB/rank, D=64, 5%, 4 ranks on 2 cores: phases (mean over ranks)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.6
set ylabel "ms"
set grid ytics
set key outside right top
set xtics nomirror
set bmargin 4
plot "phases.dat" using 2:xtic(1) title "local (select+pack)", \
     "" using 3 title "agree (header+vote, waits)", \
     "" using 4 title "exchange (MPI_Alltoallv)", \
     "" using 5 title "unpack (scatter)", \
     "" using 6 title "exchange vote (waits)", \
     "" using 7 title "tail", \
     "" using 0:9 with points pt 7 ps 1.5 lc rgb "black" title "bound (max wire, memory)"
