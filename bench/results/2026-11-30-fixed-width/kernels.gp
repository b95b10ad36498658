# kernels.dat (summarize.py) -> kernels.png: speedup per kernel and density.
set terminal pngcairo size 900,480 font ",11"
set output "kernels.png"
set title "CPU twin, fixed-width packed groups: speedup over the generic decode (2M fp32, 1 thread, medians)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "before / after"
set yrange [0:*]
set grid ytics
set key top right title "density"
set xtics rotate by -20
plot "kernels.dat" using 2:xtic(1) title "0.001", "" using 3 title "0.01", "" using 4 title "0.1", "" using 5 title "0.3", 1 notitle lc rgb "black" dt 2
