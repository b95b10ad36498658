# gnuplot ratios.gp -> ratios.png: libdct's time over SparCML's best, per row of issue 51 §3
set terminal pngcairo size 900,420 font ",10"
set output "ratios.png"
set title "dctSparseInputAllreduce / SparCML best, fp32 (2 cores; below 1: libdct faster)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set yrange [0:1.2]
set ylabel "time ratio"
set grid ytics
set key top left
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5
plot "ratios.dat" using 2:xtic(1) title "COO result", "" using 3 title "dense result"
