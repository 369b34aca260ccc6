import duckdb, sys, time
con = duckdb.connect(sys.argv[1], read_only=True); con.execute("SET disabled_optimizers = 'late_materialization'")
COLS = "r.rid, r.rtype, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.seq, r.ts, r.created, r.expires, r.status, r.metadata, r.index_text"
ids = [f"r{i:07d}" for i in range(5, 100000, 9973)][:10]
def q(sql):
    ts = []
    for _ in range(5):
        t = time.perf_counter(); rows = con.execute(sql).fetchall(); ts.append(time.perf_counter() - t)
    return len(rows), [round(x * 1e3, 2) for x in ts]
lit = lambda xs: ", ".join(f"'{x}'" for x in xs)
for n in (1, 2, 3, 5, 10):
    print("IN", n, q(f"SELECT {COLS} FROM am_records r WHERE r.rid IN ({lit(ids[:n])})"))
print("UNION ALL 10", q(" UNION ALL ".join(f"SELECT {COLS} FROM am_records r WHERE r.rid = '{x}'" for x in ids)))
print("OR 10", q(f"SELECT {COLS} FROM am_records r WHERE " + " OR ".join(f"r.rid = '{x}'" for x in ids)))
t = time.perf_counter(); [con.execute(f"SELECT {COLS} FROM am_records r WHERE r.rid = '{x}'").fetchall() for x in ids]; print("10 statements", round((time.perf_counter() - t) * 1e3, 2))
for s in ("index_scan_max_count", "index_scan_percentage"):
    print(s, con.execute(f"SELECT current_setting('{s}')").fetchone())
