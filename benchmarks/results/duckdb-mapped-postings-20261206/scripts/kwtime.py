"""The first keyword search after open, each SQL statement timed (proxy), plus cProfile top."""
import cProfile, io, pstats, sys, time
sys.path.insert(0, "/tmp"); sys.path.insert(0, "/tmp/duckprof")
import keyword_speed as ks
from agentmemory.spi import RecordFilter
from agentmemory_duckdb import DuckDBStore
from sqltime_proxy import Proxy
store = DuckDBStore(f"{sys.argv[1]}/store.duckdb", auto_index=False)
store.open(dimension=ks.DIM)
log = []
store._con = Proxy(store._con, log)
qs = ks.queries(ks.corpus(200), 6, seed=7)
prof = cProfile.Profile()
t = time.perf_counter(); prof.enable(); store.keyword_search(qs[0]["text"], RecordFilter(user_id="user1"), 10); prof.disable(); cold = time.perf_counter() - t
print(f"COLD keyword {cold*1e3:.1f} ms, SQL {sum(d for _, d in log)*1e3:.1f} ms")
for s, d in log: print(f"{d*1e3:7.2f}  {s[:150]}")
log.clear()
t = time.perf_counter(); store.keyword_search(qs[1]["text"], RecordFilter(user_id="user2"), 10); warm = time.perf_counter() - t
print(f"WARM keyword {warm*1e3:.1f} ms, SQL {sum(d for _, d in log)*1e3:.1f} ms")
for s, d in log: print(f"{d*1e3:7.2f}  {s[:150]}")
st = io.StringIO(); pstats.Stats(prof, stream=st).sort_stats("cumulative").print_stats(25); print(st.getvalue()[:5000])
store.close()
