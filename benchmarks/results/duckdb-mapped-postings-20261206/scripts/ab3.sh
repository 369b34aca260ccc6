#!/bin/bash
# warm_restart.py (421c044's, copied to /tmp/wr_new.py) on three checkouts, alternating, each on its own copy of the 100k store
cd /tmp
declare -A WT=([old]=/tmp/wt-duck-old [s1]=/tmp/wt-duck-s1 [new]=/tmp/wt-duck-new3)
declare -A ST=([old]=/tmp/duckold [s1]=/tmp/ducks1 [new]=/tmp/ducknew3)
for i in $(seq 1 ${1:-3}); do
  for v in old s1 new; do
    w=${WT[$v]}
    echo "$v round=$i $(date -u +%T) load=$(cut -d' ' -f1 /proc/loadavg) $(git -C $w rev-parse --short HEAD)"
    PYTHONPATH=$w:$w/backends/duckdb:$w/backends/hnswlib OPENBLAS_NUM_THREADS=1 /work/main/.venv/bin/python /tmp/wr_new.py --n 100000 --backends duckdb --keep ${ST[$v]} --repeat 3
  done
done
