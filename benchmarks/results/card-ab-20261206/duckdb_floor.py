import sys, time, shutil, numpy as np
from agentmemory.plugins import get_plugin_manager
from agentmemory.spi import RecordFilter
from agentmemory.embedders import HashingEmbedder
store = get_plugin_manager().load("backends","duckdb").from_uri("duckdb:///tmp/so100k-duckdb/store.duckdb?auto_index=false&read_only=true" if False else "duckdb:///tmp/so-floor/store.duckdb?auto_index=false")
store.open(dimension=384)
rng = np.random.default_rng(0)
dense = rng.standard_normal((50, 384)).astype(np.float32)
sparse = HashingEmbedder(384).embed([f"question {i} about the ledger" for i in range(50)], is_query=True)
for name, vs in (("dense", dense), ("hashing", np.asarray(sparse, dtype=np.float32))):
    flt = RecordFilter(user_id="so-fw-user")
    for i in range(100): store.vector_search(vs[i % 50], flt, 10)
    ts = []
    for i in range(1000):
        a = time.perf_counter(); store.vector_search(vs[i % 50], flt, 10); ts.append(time.perf_counter() - a)
    ts.sort(); print(name, f"p50 {ts[500]*1e6:.0f} us", end="; ")
print(store.last_plan)
store.close()
