"""KeywordIndex.load of the 100k postings file, in a fresh process each time (first load) and repeated."""
import json, sys, time, statistics, pathlib
from agentmemory_duckdb._keyword import KeywordIndex, FORMAT
path = pathlib.Path(sys.argv[1])
raw = path.read_bytes()
if raw[:2] == b"PK":
    import numpy as np
    with np.load(path) as d: key = json.loads(d["header"].tobytes())["key"]
else:
    import struct; hl = struct.unpack("<I", raw[12:16])[0]; key = json.loads(raw[20:20 + hl])["key"]
t = time.perf_counter(); kw = KeywordIndex.load(path, key); first = time.perf_counter() - t
ts = []
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10):
    t = time.perf_counter(); KeywordIndex.load(path, key); ts.append(time.perf_counter() - t)
print(json.dumps({"format": FORMAT, "first_ms": round(first * 1e3, 2), "median_ms": round(statistics.median(ts) * 1e3, 3), "min_ms": round(min(ts) * 1e3, 3)}))
