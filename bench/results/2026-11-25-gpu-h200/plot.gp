# gnuplot plot.gp: select.png and packing.png from select.dat / packing.dat
set terminal pngcairo size 900,560 font ",11"
set logscale xy
set xlabel "elements n (fp32), 1% selected"
set ylabel "median time per call (us, host wall clock incl. stream sync)"
set key top left
set grid
set format x "2^{%L}"
set logscale x 2
set output "select.png"
set title "Fused EF + select + compaction on an NVIDIA H200 vs copy, exact top-k and the CPU twin (16 cores)"
plot "select.dat" u 1:2 w lp lw 2 t "GPU select, session start", \
     "" u 1:3 w lp lw 3 t "GPU select, two-pass tiles (now)", \
     "" u 1:($4*1.5) w l dt 2 lw 2 t "GPU bound: 12 B/elem at D2D copy rate", \
     "" u 1:5 w lp t "GPU exact top-k (CUB radix sort)", \
     "" u 1:6 w lp t "GPU torch.topk", \
     "" u 1:7 w lp t "CPU twin select, 16 threads (same host)"
set output "packing.png"
set title "Delta bit-packing of the 1% message on an H200: thread per group (start) vs warp per group (now)"
plot "packing.dat" u 1:2 w lp lw 2 t "pack, start", "" u 1:3 w lp lw 3 t "pack, now", \
     "" u 1:4 w lp lw 2 t "scatter-packed, start", "" u 1:5 w lp lw 3 t "scatter-packed, now", \
     "" u 1:6 w lp t "tau-sample (now; unchanged)"
