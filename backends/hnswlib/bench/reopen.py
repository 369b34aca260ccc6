"""Time reopening an existing HnswlibStore directory (clean close, and after a simulated crash
that lost the last ``--unsaved`` changes' snapshot), wall and CPU seconds.

    python backends/hnswlib/bench/reopen.py /path/to/store --dim 384 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from agentmemory_hnswlib import HnswlibStore

from agentmemory.spi import RecordFilter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        store = HnswlibStore(args.directory)
        store.open(dimension=args.dim)
        opened_wall, opened_cpu = time.perf_counter() - wall, time.process_time() - cpu
        count = store.info().extra["vectors"]
        t = time.perf_counter()
        store.vector_search(np.ones(args.dim, np.float32), RecordFilter(), 10)
        first = time.perf_counter() - t
        runs.append({
            "open_wall_s": round(opened_wall, 3), "open_cpu_s": round(opened_cpu, 3),
            "first_query_ms": round(first * 1e3, 2), "vectors": count,
            "path": store.last_reconcile.source, "loadavg": os.getloadavg()[0],
        })
        store.close()
    print(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
