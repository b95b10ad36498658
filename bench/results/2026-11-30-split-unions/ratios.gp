# gnuplot ratios.gp -> ratios.png: libdct / SparCML's best per row, before (2026-11-30-coo-paths,
# and this session's first 2-rank run) and after (this folder's runs; shm rows: medians of the runs)
set terminal pngcairo size 900,420
set output 'ratios.png'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:2.1]
set ylabel 'libdct / SparCML best (time)'
set xtics rotate by -30
set key top left
set grid ytics
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2
plot 'ratios.dat' using 3:xtic(2) title 'COO, before', '' using 4 title 'COO, after', \
     '' using 5 title 'dense, before', '' using 6 title 'dense, after'
