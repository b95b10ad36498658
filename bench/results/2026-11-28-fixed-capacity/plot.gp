set terminal pngcairo size 900,420
set output 'fixed_capacity.png'
set multiplot layout 1,2 title "dctSparseAllreduce, allgather plan, 4 ranks on 2 cores, fp32, 1%: variable messages vs fixed slots"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "median time (ms)"
set key top left
set title "shared memory"
plot '< grep ^shm medians.dat' using 3:xtic(sprintf("%d KiB", $2/1024)) title "variable", '' using 4 title "c = 1.25", '' using 5 title "c = 2"
set title "1 Gbit/s links (netem)"
plot '< grep ^netem medians.dat' using 3:xtic(sprintf("%d KiB", $2/1024)) title "variable", '' using 4 title "c = 1.25", '' using 5 title "c = 2"
unset multiplot
