"""What one small inserting commit costs in bare DuckDB, by table shape (not a test; see README).

    python backends/duckdb/scripts/commit_cost.py [--rows 20000] [--rounds 5]

Times ``BEGIN; INSERT 2 rows (through Arrow, as the store writes); COMMIT`` into a file table
of ``--rows`` rows with a ``PRIMARY KEY`` and a ``FLOAT[384]`` column (the shape of
``am_records``), without the key, with the vector as a ``BLOB``, and with no vector column;
the shapes alternate, 20 commits a turn, so a busy machine slows them alike. Prints p50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

SHAPES = {
    "PRIMARY KEY + FLOAT[384]": ("id VARCHAR PRIMARY KEY, v FLOAT[384], s VARCHAR", "array"),
    "no key + FLOAT[384]": ("id VARCHAR, v FLOAT[384], s VARCHAR", "array"),
    "PRIMARY KEY + BLOB": ("id VARCHAR PRIMARY KEY, v BLOB, s VARCHAR", "blob"),
    "PRIMARY KEY, no vector": ("id VARCHAR PRIMARY KEY, s VARCHAR", "none"),
}
FILL = {
    "array": ", list_transform(range(384), x -> random()::FLOAT)::FLOAT[384]",
    "blob": ", repeat('x', 1536)::BLOB",
    "none": "",
}


def _rows(kind: str, k: int, vectors: np.ndarray) -> pa.Table:
    cols: dict[str, pa.Array | list[str]] = {"id": [f"n{k}", f"m{k}"]}
    if kind == "array":
        cols["v"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 384)
    elif kind == "blob":
        cols["v"] = pa.array([row.tobytes() for row in vectors], pa.binary())
    cols["s"] = ["hello", "hi"]
    return pa.table(cols)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        cons = {}
        for i, (name, (ddl, kind)) in enumerate(SHAPES.items()):
            con = duckdb.connect(str(Path(tmp) / f"t{i}.db"))
            con.execute(f"CREATE TABLE t({ddl})")
            con.execute(f"INSERT INTO t SELECT 'r' || i{FILL[kind]}, repeat('x', 100) FROM range({args.rows}) r(i)")
            con.execute("CHECKPOINT")
            cons[name] = con
        times: dict[str, list[float]] = {name: [] for name in SHAPES}
        k = 0
        for _ in range(args.rounds):
            for name, (_, kind) in SHAPES.items():
                con = cons[name]
                for _ in range(20):
                    k += 1
                    table = _rows(kind, k, rng.random((2, 384), dtype=np.float32))
                    t0 = time.perf_counter()
                    con.execute("BEGIN")
                    con.register("new_rows", table)
                    con.execute("INSERT INTO t SELECT * FROM new_rows")
                    con.unregister("new_rows")
                    con.execute("COMMIT")
                    times[name].append((time.perf_counter() - t0) * 1000)
        for con in cons.values():
            con.close()
    for name, ms in times.items():
        print(f"{name}: p50 {statistics.median(ms):.2f} ms")


if __name__ == "__main__":
    main()
