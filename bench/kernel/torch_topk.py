#!/usr/bin/env python3
"""Exact top-k reference on the GPU: torch.topk(|x|, k) for the sizes
cuda_kernel_perf runs (float32, k = density * n), median of several reps.
Compare its time with cuda_kernel_perf's `select` row at the same n.
Usage: python3 bench/kernel/torch_topk.py [density] [min_log2_n] [max_log2_n]"""
import statistics
import sys

import torch

density = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
lo, hi = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (20, 28)
dev = torch.device("cuda")
print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}, density {density}")
print(f"#{'n':>11} {'kernel':>14} {'median_us':>12}")
for log2n in range(lo, hi + 1, 2):
    n = 1 << log2n
    x = torch.randn(n, device=dev) * torch.exp(torch.randn(n, device=dev))
    k = max(1, int(density * n))
    times = []
    for rep in range(11):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.topk(x.abs(), k, sorted=False)
        end.record()
        torch.cuda.synchronize()
        if rep:
            times.append(start.elapsed_time(end) * 1e3)
    print(f" {n:11d} {'torch.topk':>14} {statistics.median(times):12.1f}")
