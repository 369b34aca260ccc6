"""Each SQL statement of the first card (and a warm one) in a fresh process, timed through a
proxy around the store's connection."""
import sys, time, json
sys.path.insert(0, "/tmp")
import keyword_speed as ks
from agentmemory import AgentMemory, HashingEmbedder

class Proxy:
    def __init__(self, con, log):
        self._c, self._log = con, log
    def __getattr__(self, name):
        attr = getattr(self._c, name)
        if name.startswith("fetch") or name in ("arrow", "df", "pl", "fetchnumpy"):
            def timed(*a, **k):
                t = time.perf_counter(); r = attr(*a, **k); self._log.append(("  " + name, time.perf_counter() - t)); return r
            return timed
        return attr
    def execute(self, sql, *a, **k):
        t = time.perf_counter(); self._c.execute(sql, *a, **k); self._log.append((" ".join(str(sql).split())[:400], time.perf_counter() - t)); return self
    def cursor(self):
        return Proxy(self._c.cursor(), self._log)

where = sys.argv[1]
memory = AgentMemory(f"duckdb://{where}/store.duckdb?auto_index=false", embedder=HashingEmbedder(ks.DIM))
store = memory._store if hasattr(memory, "_store") else memory.store
log = []
store._con = Proxy(store._con, log)
thread = memory.get_thread(sys.argv[2] if len(sys.argv) > 2 else "warm-thread")
log.clear()
t = time.perf_counter(); thread.get_context_card(); cold = time.perf_counter() - t
print(f"COLD card {cold*1e3:.1f} ms, SQL {sum(d for _, d in log)*1e3:.1f} ms")
for s, d in log: print(f"{d*1e3:7.2f}  {s}")
log.clear()
t = time.perf_counter(); thread.get_context_card(); warm = time.perf_counter() - t
print(f"WARM card {warm*1e3:.1f} ms, SQL {sum(d for _, d in log)*1e3:.1f} ms")
for s, d in log: print(f"{d*1e3:7.2f}  {s}")
memory.close()
