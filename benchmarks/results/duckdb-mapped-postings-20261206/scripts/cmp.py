"""Keyword search results and cards on one store: printed as JSON for an old/new diff."""
import hashlib, json, sys
sys.path.insert(0, "/tmp")
import keyword_speed as ks
from agentmemory.spi import RecordFilter
from agentmemory_duckdb import DuckDBStore
where = sys.argv[1]
store = DuckDBStore(f"{where}/store.duckdb", auto_index=False)
store.open(dimension=ks.DIM)
qs = ks.queries(ks.corpus(200), 60, seed=11)
out = []
for i, q in enumerate(qs):
    for flt in (RecordFilter(user_id=f"user{i % 100}"), RecordFilter(), RecordFilter(user_id="user0", thread_id="warm-thread"),
                RecordFilter(user_id="user0", record_ids=tuple(f"r{j:07d}" for j in range(i, 100000, 97)))):
        for k in (10, 50):
            out.append([(h.record.record_id, h.score) for h in store.keyword_search(q["text"], flt, k)])
store.close()
from agentmemory import AgentMemory, HashingEmbedder
memory = AgentMemory(f"duckdb://{where}/store.duckdb?auto_index=false", embedder=HashingEmbedder(ks.DIM))
cards = [str(memory.get_thread(t).get_context_card()) for t in ("warm-thread", "warm-thread-b")]
memory.close()
json.dump(out, open(sys.argv[2], "w")) if len(sys.argv) > 2 else None
print(json.dumps({"searches": len(out), "hits": sum(map(len, out)), "search_sha": hashlib.sha256(json.dumps(out).encode()).hexdigest(),
                  "card_sha": [hashlib.sha256(c.encode()).hexdigest()[:16] for c in cards], "card_len": [len(c) for c in cards]}))
