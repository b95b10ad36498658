# gnuplot bench/results/2026-11-29-onebit-adam-seeds/curves.gp (after summarize.py)
dir = 'bench/results/2026-11-29-onebit-adam-seeds/'
set terminal pngcairo size 1000,420 font ',10' noenhanced
set key top right
set grid
set xlabel 'step'
set ylabel 'train loss (mean of 3 seeds, moving mean of 25 steps)'
do for [task in 'cnn lm'] {
  set output dir.task.'-loss.png'
  set title (task eq 'cnn' ? 'Fashion-MNIST CNN' : 'byte-level transformer LM (fortunes)').', 4 ranks, lr 1e-3, eps 1e-4'
  if (task eq 'cnn') { set yrange [0.2:1.0] } else { set yrange [1.5:4.0] }
  if (task eq 'cnn') {
    plot dir.task.'-curves.dat' u 1:2 w l lw 2 t 'Adam', '' u 1:3 w l lw 2 t 'OnebitAdam (warm-up 15%)', \
         '' u 1:4 w l lw 2 t 'Adam, 1-bit gradients (dct_hook onebit)'
  } else {
    plot dir.task.'-curves.dat' u 1:2 w l lw 2 t 'Adam', '' u 1:3 w l lw 2 t 'OnebitAdam (warm-up 15%)', \
         '' u 1:4 w l lw 2 t 'Adam, 1-bit gradients (dct_hook onebit)', \
         '' u 1:5 w l lw 2 t 'OnebitAdam, preconditioned exchange', '' u 1:6 w l lw 2 t 'OnebitAdam, warm-up 30%'
  }
}
