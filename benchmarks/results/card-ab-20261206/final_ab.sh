#!/bin/bash
# old/new alternation of search_overhead measure (round robin) and --bench, per backend
OUT=$1
for b in hnswlib duckdb; do
  rm -rf /tmp/so-ab-$b && cp -r /tmp/so100k-$b /tmp/so-ab-$b && sync
  for i in 1 2; do
    for side in old new; do
      W=/tmp/wt-base; [ $side = new ] && W=/tmp/wt-final
      echo "=== $b $side rr $i $(uptime | sed 's/.*load/load/')" >> $OUT
      (cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib taskset -c 1 /work/main/.venv/bin/python /work/main/benchmarks/scripts/search_overhead.py measure --backend $b --dir /tmp/so-ab-$b --rounds 300 2>&1 | grep -v "^\s*$" | tail -12) >> $OUT
      echo "=== $b $side bench $i $(uptime | sed 's/.*load/load/')" >> $OUT
      (cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib taskset -c 1 /work/main/.venv/bin/python /work/main/benchmarks/scripts/search_overhead.py measure --backend $b --dir /tmp/so-ab-$b --bench 2>&1 | grep -v "^\s*$" | tail -13) >> $OUT
    done
  done
done
echo done >> $OUT
