"""What each DuckDB call of an ``add_messages`` turn costs, and how DuckDB scans for the reads
(a measurement, not a test; issue #31).

    python benchmarks/scripts/turn_calls.py --turn plain --old-backend OLD --store /tmp/s.duckdb  # builds it
    PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb python backends/duckdb/scripts/turn_statements.py /tmp/s.duckdb

Opens a copy of the store (``auto_index=false``), puts a proxy in front of the store's DuckDB
connection that times every ``execute``/``register``/``unregister`` (and ``fetchall``), runs
``--calls`` plain turns (a question and a reply) in the thread ``hot`` after five warm-up turns,
and prints the p50 of each call by its position in the turn with the start of its SQL; then, for
each ``SELECT`` of the turn, the scan type DuckDB's ``EXPLAIN ANALYZE`` names (``Index Scan``:
the primary key's index; plain ``EXPLAIN`` names a sequential scan either way). The store's code is the one imported: run it once per checkout.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentmemory import AgentMemory, HashingEmbedder


class _Timed:
    """A DuckDB connection that records (seconds, SQL) of each call made through it."""

    def __init__(self, con: Any, log: list[tuple[float, str]]) -> None:
        self._con = con
        self._log = log

    def _timed(self, label: str, call: Any, *args: Any) -> Any:
        start = time.perf_counter()
        result = call(*args)
        self._log.append((time.perf_counter() - start, label))
        return result

    def execute(self, sql: str, *args: Any) -> Any:
        self._timed(sql, self._con.execute, sql, *args)
        return self

    def fetchall(self) -> Any:
        return self._timed("  fetchall", self._con.fetchall)

    def fetchone(self) -> Any:
        return self._con.fetchone()

    def fetch_arrow_table(self) -> Any:
        return self._timed("  fetch_arrow_table", self._con.fetch_arrow_table)

    def register(self, name: str, table: Any) -> Any:
        self._timed("  register", self._con.register, name, table)
        return self

    def unregister(self, name: str) -> Any:
        self._timed("  unregister", self._con.unregister, name)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="a store built by benchmarks/scripts/turn_calls.py --store (only a copy is written)")
    ap.add_argument("--calls", type=int, default=60)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    path = work / "store.duckdb"
    shutil.copy(args.store, path)
    client = AgentMemory(f"duckdb://{path}?auto_index=false", embedder=HashingEmbedder(384))
    hot = client.get_thread("hot")
    store: Any = client.store
    log: list[tuple[float, str]] = []
    real = store._con
    store._con = _Timed(real, log)

    def turn(i: int) -> None:
        hot.add_messages([{"role": "user", "content": f"What time is it in Lisbon on day {i}?"}, {"role": "assistant", "content": "Around noon."}])

    for i in range(5):
        turn(10_000 + i)
    by_position: dict[tuple[int, str], list[float]] = {}
    walls = []
    selects: list[str] = []
    for i in range(args.calls):
        log.clear()
        start = time.perf_counter()
        turn(i)
        walls.append(time.perf_counter() - start)
        for at, (seconds, sql) in enumerate(log):
            by_position.setdefault((at, sql[:70]), []).append(seconds)
            if i == 0 and sql.split(";")[-1].strip().startswith("SELECT"):
                selects.append(sql.split(";")[-1].strip())
    store._con = real
    print(f"{store.__class__.__module__}: turn p50 {statistics.median(walls) * 1000:.2f} ms over {args.calls} turns")
    calls: dict[int, tuple[str, list[float]]] = {}
    for (at, sql), times in by_position.items():  # keep the label of the most frequent SQL start per position
        if len(times) > len(calls.get(at, ("", []))[1]):
            calls[at] = (sql, times)
    for at in sorted(calls):
        sql, times = calls[at]
        print(f"  {statistics.median(times) * 1000:7.2f} ms  {sql}")
    for sql in selects:
        plan = real.execute("EXPLAIN ANALYZE " + sql).fetchall()[0][1]  # the index scan is chosen when it runs
        scans = ", ".join(re.findall(r"Type: ([A-Za-z ]+?) *│", plan)) or "?"
        print(f"  {scans:20s} {sql[:110]}")
    client.close()
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
