import gc, sys, time
sys.path.insert(0, "/work/main/benchmarks/scripts")
import keyword_speed as ks
from agentmemory import AgentMemory, HashingEmbedder
backend, where, mode = sys.argv[1], sys.argv[2], sys.argv[3]
uri = f"duckdb://{where}/store.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{where}/hnswlib?synchronous=normal"
t = time.perf_counter()
memory = AgentMemory(uri, embedder=HashingEmbedder(ks.DIM))
a = memory.get_thread("warm-thread"); b = memory.get_thread("warm-thread-b")
open_s = time.perf_counter() - t
if mode == "collect":
    t = time.perf_counter(); gc.collect(); print(f"collect at open {1e3*(time.perf_counter()-t):.1f} ms")
if mode == "freeze":
    gc.freeze()
log = []
start = {}
def cb(phase, info):
    if phase == "start": start["t"] = time.perf_counter()
    else: log.append((info["generation"], (time.perf_counter() - start["t"]) * 1e3))
gc.callbacks.append(cb)
t = time.perf_counter(); a.get_context_card(); cold = time.perf_counter() - t
gcs = list(log); log.clear()
ws = []
for _ in range(5):
    t = time.perf_counter(); a.get_context_card(); ws.append(time.perf_counter() - t)
t = time.perf_counter(); b.get_context_card(); first = time.perf_counter() - t
print(f"{mode}: open {open_s:.2f}s cold {cold*1e3:.2f} ms (gc in it: {[(g, round(ms,2)) for g, ms in gcs]}) warm {sorted(ws)[2]*1e3:.2f} first {first*1e3:.2f}  later gcs {[(g, round(ms,2)) for g, ms in log]}")
