#!/bin/bash
# turnab.sh ROUNDS TURNS: turn.py alternated old/new on fresh copies of the 100k hnswlib store
for r in $(seq 1 $1); do
for side in old new; do
  if [ $side = old ]; then W=/tmp/wt-hold; else W=/tmp/wt-new; fi
  rm -rf /tmp/soT && cp -r /tmp/so100k-hnswlib /tmp/soT && sync && sleep 3
  echo -n "$side $(git -C $W rev-parse --short HEAD) load $(cut -d' ' -f1 /proc/loadavg): "
  OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib taskset -c 1 /work/main/.venv/bin/python /work/main/benchmarks/results/search-overhead-20261206/turn.py hnswlib /tmp/soT $2
done; done
