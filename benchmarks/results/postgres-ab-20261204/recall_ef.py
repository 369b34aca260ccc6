import sys, statistics, time, dataclasses
sys.path.insert(0, "/tmp/ab")
from common import *
from agentmemory_bench.data import recall_at_k
import agentmemory_postgres.store as newm
data, plan = data_for(100000, 100)
def mk(ef, extra):
    s = newm.PostgresStore(DSN, schema="ab100k", ef_search=ef); s._planner = dataclasses.replace(s._planner, filtered_extra=extra); s.open(dimension=data.dim); return s
stores = {"ef100/f100": mk(100, 90), "ef400/f50": mk(400, 40), "ef300/f50": mk(300, 40)}
for key in sys.argv[1:]:
    cell = plan.by_key()[key]
    res = {k: [] for k in stores}; lat = {k: [] for k in stores}
    for i in range(len(cell)):
        for name, s in stores.items():
            t0 = time.perf_counter(); hits = s.vector_search(data.queries[cell.query_rows[i]], scope_filter(cell.scopes[i]), K); lat[name].append(time.perf_counter() - t0)
            res[name].append(recall_at_k([row_of(h.record.record_id) for h in hits], cell.truth[i]))
    for name in stores: print(cell.key, name, round(statistics.mean(res[name]), 4), round(statistics.median(lat[name]) * 1000, 2), "ms", flush=True)
