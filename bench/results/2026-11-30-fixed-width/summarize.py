"""kernels.txt (kernels.sh) -> a markdown table and kernels.dat for gnuplot:
median us per kernel and density, before and after, and the speedup."""
import collections
import statistics
import sys

KERNELS = ['pack', 'scatter-packed', 'check-4', 'merge-4', 'union-4', 'union-1', 'memcpy']
DENSITIES = ['0.001', '0.01', '0.1', '0.3']

times = collections.defaultdict(list)
with open(sys.argv[1]) as f:
    for line in f:
        version, density, _rep, _n, kernel, _bytes, us = line.split()[:7]
        times[(kernel, density, version)].append(float(us))

print('| kernel | density | before (us) | after (us) | speedup |')
print('| --- | ---: | ---: | ---: | ---: |')
with open(sys.argv[1].replace('kernels.txt', 'kernels.dat'), 'w') as dat:
    dat.write('# kernel ' + ' '.join(DENSITIES) + '  (speedup, before/after medians)\n')
    for kernel in KERNELS:
        row = []
        for density in DENSITIES:
            before = statistics.median(times[(kernel, density, 'base')])
            after = statistics.median(times[(kernel, density, 'head')])
            print(f'| {kernel} | {density} | {before:.1f} | {after:.1f} | {before / after:.2f} |')
            row.append(f'{before / after:.3f}')
        dat.write(kernel + ' ' + ' '.join(row) + '\n')
