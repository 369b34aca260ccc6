"""``turn.py`` with the floor in the same loop: per turn ``add_messages`` of 2 messages (rule-based
extraction), the card right after it, the same card again (repeated: no write between), then the
floor (the store's own ``vector_search`` for the user's scope, 10 hits), timed at its second call:
its unfiltered-by-type scope is read again after every write (~8 ms at 100k), which is not
what the bench's floor times. p50s after 10 turns of
warm-up, each card also as a multiple of the floor of the same run. Run it on a fresh copy of
the built store (it writes):

    PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb python turn_floor.py duckdb DIR N
"""
import statistics
import sys
import time

sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.conversations import generate_conversation  # noqa: E402
from agentmemory_bench.embedding import CachedEmbedder  # noqa: E402

from agentmemory import AgentMemory, HashingEmbedder  # noqa: E402
from agentmemory.spi import RecordFilter  # noqa: E402

backend, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
uri = f"duckdb://{d}/store.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{d}/hnswlib"
emb = CachedEmbedder(HashingEmbedder(384))
conv = generate_conversation(1, seed=1, sessions=4, turns_per_session=25)
msgs = [{"role": m.role, "content": m.content} for m in conv.messages]
emb.warm([m["content"] for m in msgs])
emb.warm([m["content"] for m in msgs], is_query=True)
vectors = emb.embed([m["content"] for m in msgs[:10]], is_query=True)
client = AgentMemory(uri, embedder=emb)
store = client.store
thread = client.get_thread("so-x-s3")
flt = RecordFilter(user_id="so-fw-user")
writes, after, again, floors = [], [], [], []
for i in range(n):
    pair = msgs[(2 * i) % len(msgs): (2 * i) % len(msgs) + 2]
    t0 = time.perf_counter()
    thread.add_messages(pair)
    t1 = time.perf_counter()
    thread.get_context_card()
    t2 = time.perf_counter()
    thread.get_context_card()
    t3 = time.perf_counter()
    store.vector_search(vectors[(i + 1) % 10], flt, 10)  # reads the scope the write dropped
    t4 = time.perf_counter()
    store.vector_search(vectors[i % 10], flt, 10)
    t5 = time.perf_counter()
    if i >= 10:
        writes.append(t1 - t0)
        after.append(t2 - t1)
        again.append(t3 - t2)
        floors.append(t5 - t4)
p50 = statistics.median
fl = p50(floors)
print(f"{backend} turn x{n - 10}: floor {fl * 1e3:.3f} ms; card after a write {p50(after) * 1e3:.3f} ms ({p50(after) / fl:.1f}x); "
      f"card repeated {p50(again) * 1e3:.3f} ms ({p50(again) / fl:.1f}x); add_messages {p50(writes) * 1e3:.3f} ms ({p50(writes) / fl:.1f}x)")
client.close()
