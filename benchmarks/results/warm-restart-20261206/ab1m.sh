#!/bin/bash
# usage: ab1m.sh BACKEND NEWCOMMIT OUT ; old = /tmp/wt-old31 (8aaea15), new = worktree of NEWCOMMIT
B=$1; NEW=$2; OUT=$3
cd /work/main && (git worktree remove --force /tmp/wt-new31 2>/dev/null; git worktree add -f /tmp/wt-new31 $NEW >/dev/null 2>&1)
S=/work/main/benchmarks/scripts/warm_restart.py
run() { # side root repeat
  W=/tmp/wt-old31; [ $1 = new ] && W=/tmp/wt-new31
  echo "=== $B $1 $(date +%T) $(uptime | sed 's/.*load/load/')" >> $OUT
  (cd /tmp && OPENBLAS_NUM_THREADS=1 PYTHONPATH=$W:$W/backends/duckdb:$W/backends/hnswlib nice -n 5 /work/main/.venv/bin/python $S --n 1000000 --backends $B --keep $2 --repeat $3 2>&1 | tail -3) >> $OUT
}
OLDROOT=/tmp/warm1m; NEWROOT=/tmp/warm1m
if [ $B = duckdb ]; then
  NEWROOT=/tmp/warm1m-new
  run old $OLDROOT 1   # adds the second thread with the old code (first time), measures
  if [ ! -d $NEWROOT/duckdb-1000000 ]; then mkdir -p $NEWROOT && cp -r $OLDROOT/duckdb-1000000 $NEWROOT/; fi
  run new $NEWROOT 1   # first run: rewrites the postings file in the new format once
fi
for i in 1 2; do run old $OLDROOT 3; run new $NEWROOT 3; done
echo "=== done $(date +%T)" >> $OUT
