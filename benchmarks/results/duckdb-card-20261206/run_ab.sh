#!/usr/bin/env bash
# Old vs new, alternated, pinned to core 1, on copies of one built 100k DuckDB store.
# usage: run_ab.sh OLD_WORKTREE NEW_WORKTREE STORE OUT_PREFIX
set -u
OLD=$1 NEW=$2 STORE=$3 OUT=$4
PY=/work/main/.venv/bin/python
HERE=$(cd "$(dirname "$0")" && pwd)
SO=$OLD/benchmarks/scripts/search_overhead.py   # one measuring script for both sides
TURN=$HERE/../search-overhead-20261206/turn.py
WORK=/tmp/dkc-ab
rm -rf $WORK && mkdir -p $WORK && cp -r "$STORE" $WORK/so
run() {  # side worktree args...
  local side=$1 wt=$2; shift 2
  echo "### $side $(git -C "$wt" rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg): $*"
  (cd /tmp && PYTHONHASHSEED=0 OPENBLAS_NUM_THREADS=1 PYTHONPATH=$wt:$wt/backends/duckdb:$wt/backends/hnswlib taskset -c 1 $PY "$@")
}
fresh() { rm -rf $WORK/t && cp -r $WORK/so $WORK/t; }
for rep in 1 2; do
  for side in old new; do wt=$OLD; [ $side = new ] && wt=$NEW
    run $side $wt $SO measure --backend duckdb --dir $WORK/so --rounds 400; done
done
for rep in 1 2; do
  for side in old new; do wt=$OLD; [ $side = new ] && wt=$NEW
    run $side $wt $SO measure --backend duckdb --dir $WORK/so --rounds 400 --card-split; done
done
for rep in 1 2; do
  for side in old new; do wt=$OLD; [ $side = new ] && wt=$NEW
    fresh; run $side $wt $TURN duckdb $WORK/t 110; done
done
for rep in 1 2; do
  for side in old new; do wt=$OLD; [ $side = new ] && wt=$NEW
    fresh; run $side $wt $HERE/turn_floor.py duckdb $WORK/t 110; done
done
for side in old new; do wt=$OLD; [ $side = new ] && wt=$NEW
  run $side $wt $HERE/../search-overhead-20261206/cardcmp.py $OUT-cardcmp-$side.json - $WORK/so
  run $side $wt $HERE/cardcmp_turns.py $OUT-cardturns-$side.json
done
for kind in cardcmp cardturns; do
  if cmp -s $OUT-$kind-old.json $OUT-$kind-new.json; then echo "$kind: old and new identical ($(wc -c < $OUT-$kind-new.json) bytes)"; else echo "$kind: DIFFERENT"; fi
done
rm -rf $WORK
