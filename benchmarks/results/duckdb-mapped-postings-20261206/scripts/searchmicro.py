"""KeywordIndex.search alone, warm: 200 user-scoped queries (k=10) on the 100k postings file, median us."""
import json, statistics, struct, sys, time
from pathlib import Path
sys.path.insert(0, "/tmp")
import keyword_speed as ks
from agentmemory.analysis import Analyzer
from agentmemory.spi import RecordFilter
from agentmemory_duckdb._keyword import KeywordIndex
path = Path(sys.argv[1]); raw = path.read_bytes()
if raw[:2] == b"PK":
    import numpy as np
    with np.load(path) as d: key = json.loads(d["header"].tobytes())["key"]
else:
    hl = struct.unpack("<I", raw[12:16])[0]; key = json.loads(raw[20:20 + hl])["key"]
kw = KeywordIndex.load(path, key)
an = Analyzer.for_language("english")
qs = [an.term_set(q["text"]) for q in ks.queries(ks.corpus(200), 200, seed=5)]
for q in qs[:20]: kw.search(q, RecordFilter(user_id="user3"), 10, frozenset())
out = {}
for name, flt in (("user", lambda i: RecordFilter(user_id=f"user{i % 100}")), ("thread", lambda i: RecordFilter(user_id="user0", thread_id="warm-thread")), ("all", lambda i: RecordFilter())):
    ts = []
    for i, q in enumerate(qs):
        f = flt(i); kw._last = None
        t = time.perf_counter(); kw.search(q, f, 10, frozenset()); ts.append(time.perf_counter() - t)
    out[name] = round(statistics.median(ts) * 1e6, 1)
print(json.dumps(out))
