#!/bin/bash
# rr.sh DIR ROUNDS ALTERNATIONS [extra measure args]: search_overhead.py measure alternated old/new
D=$1; R=$2; A=$3; shift 3
for r in $(seq 1 $A); do
for side in old new; do
  if [ $side = old ]; then W=/tmp/wt-hold; else W=/tmp/wt-new; fi
  echo "== $side $(git -C $W rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
  (cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib taskset -c 1 /work/main/.venv/bin/python /work/main/benchmarks/scripts/search_overhead.py measure --backend hnswlib --dir $D --rounds $R "$@")
done; done
