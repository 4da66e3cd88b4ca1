#!/bin/sh
# 5 runs of the whole table (each timing: best of 3 batches of >= 20 ms), pinned to CPU 1;
# summary.txt: min / median of the 5 per cell. Run in build.sh's OUT.
for i in 1 2 3 4 5; do BATCHES=3 OMP_NUM_THREADS=1 taskset -c 1 ./bench > bench_run$i.txt; done
python3 summarize.py bench_run[1-5].txt > summary.txt
