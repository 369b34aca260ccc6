#!/bin/bash
# old 8aaea15 (/tmp/wt-old31) vs new (/tmp/wt-new31) at n=1000 and 100000, both backends, each side its own copy
OUT=$1; NEW=$2
cd /work/main && (git worktree remove --force /tmp/wt-new31 2>/dev/null; git worktree add -f /tmp/wt-new31 $NEW >/dev/null 2>&1)
S=/work/main/benchmarks/scripts/warm_restart.py
for side in old new; do
  mkdir -p /tmp/abs/$side
  [ -d /tmp/abs/$side/hnswlib-100000 ] || cp -r /tmp/warm100k/hnswlib-100000 /tmp/warm100k/duckdb-100000 /tmp/abs/$side/
  [ -d /tmp/abs/$side/hnswlib-1000 ] || { cp -r /tmp/w1k/hnswlib-1000 /tmp/abs/$side/; rm -f /tmp/abs/$side/hnswlib-1000/second-thread; }
  rm -f /tmp/abs/$side/hnswlib-100000/second-thread /tmp/abs/$side/duckdb-100000/second-thread
done
# the 1k stores: hnswlib copied (thread b removed? no: copy keeps it) -> keep marker; duckdb 1k built per side
for side in old new; do touch /tmp/abs/$side/hnswlib-1000/second-thread; done
for i in 0 1 2; do
  for side in old new; do
    W=/tmp/wt-old31; [ $side = new ] && W=/tmp/wt-new31
    R=3; [ $i = 0 ] && R=1
    for n in 1000 100000; do
      echo "=== $side n=$n round $i $(date +%T) $(uptime | sed 's/.*load/load/')" >> $OUT
      (cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib taskset -c 1 /work/main/.venv/bin/python $S --n $n --keep /tmp/abs/$side --repeat $R 2>&1 | tail -2) >> $OUT
    done
  done
done
echo "=== done $(date +%T)" >> $OUT
