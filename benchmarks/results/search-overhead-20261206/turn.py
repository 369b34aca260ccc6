"""A turn at 100k on a copy of the built store: add_messages (2 messages, rule-based extraction)
then the card, N times; p50 of the card after each write (no cache survives a write)."""
import sys, time, statistics
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.conversations import generate_conversation
from agentmemory_bench.embedding import CachedEmbedder
from agentmemory import AgentMemory, HashingEmbedder
backend, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
uri = f"duckdb://{d}/store.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{d}/hnswlib"
emb = CachedEmbedder(HashingEmbedder(384))
conv = generate_conversation(1, seed=1, sessions=4, turns_per_session=25)
msgs = [{"role": m.role, "content": m.content} for m in conv.messages]
emb.warm([m["content"] for m in msgs])
emb.warm([m["content"] for m in msgs], is_query=True)
client = AgentMemory(uri, embedder=emb)
thread = client.get_thread("so-x-s3")
cards, writes = [], []
for i in range(n):
    pair = msgs[(2 * i) % len(msgs): (2 * i) % len(msgs) + 2]
    t0 = time.perf_counter(); thread.add_messages(pair); t1 = time.perf_counter()
    thread.get_context_card(); t2 = time.perf_counter()
    if i >= 10:
        writes.append(t1 - t0); cards.append(t2 - t1)
print(f"{backend} turn x{n - 10}: card after a write p50 {statistics.median(cards)*1e3:.3f} ms; add_messages p50 {statistics.median(writes)*1e3:.3f} ms")
client.close()
