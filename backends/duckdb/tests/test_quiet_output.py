"""The store never writes into its user's output: DuckDB draws a progress bar on stdout for any
query slower than ``progress_bar_time`` (2 s by default; rebuilding the keyword postings of a
1M-record store is), which corrupted the JSON line a benchmark child printed after it, and would
corrupt an ``agentmemory export`` to stdout. (A test query cannot be made that slow cheaply, and
lowering ``progress_bar_time`` turns the bar back on, so the setting itself is checked, in a child
process: under pytest DuckDB starts with the bar off.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
from agentmemory_duckdb import DuckDBStore
store = DuckDBStore(sys.argv[1])
store.open(dimension=4)
cursor = store._con.cursor()  # the background index builder reads through a cursor
for c in (store._con, cursor):
    print(c.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
cursor.close()
store.close()
"""


def test_the_connection_and_its_cursors_draw_no_progress_bar(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "quiet.duckdb")], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
