import duckdb, sys, time
db = sys.argv[1]; order = sys.argv[2]
con = duckdb.connect(db, read_only=True); con.execute("SET disabled_optimizers = 'late_materialization'")
W = "r.rtype IN ('message') AND r.thread_id = 'warm-thread'"
S = {
 "win": f"SELECT r.rid, r.rtype, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.seq, r.ts, r.created, r.expires, r.status, r.metadata, r.index_text, r.has_vec FROM am_records r WHERE {W} ORDER BY r.seq DESC LIMIT 40",
 "winids": f"SELECT r.rid FROM am_records r WHERE {W} ORDER BY r.seq DESC LIMIT 40",
 "thr": "SELECT count(*) FROM am_records r WHERE r.thread_id = 'warm-thread'",
 "usr": "SELECT count(*) FROM am_records r WHERE r.has_vec AND r.rtype IN ('fact', 'guideline', 'memory', 'preference', 'user') AND r.user_id = 'user0' AND r.agent_id = 'agent' AND r.status IN ('valid')",
 "one": "SELECT 1",
 "cnt": "SELECT count(*) FROM am_records",
 "scope": "SELECT r.rid, r.rtype, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.seq, r.ts, r.created, r.expires, r.status, r.metadata, r.index_text, r.ver, r.vec, coalesce(r.expires_us, 9223372036854775807) AS expires_us FROM am_records r WHERE r.has_vec AND r.rtype IN ('message') AND r.user_id = 'user0' AND r.agent_id = 'agent' AND r.thread_id = 'warm-thread' AND r.status IN ('valid') LIMIT 2001",
}
t0 = time.perf_counter(); con.execute("SELECT 42").fetchall(); print(f"first trivial {1e3*(time.perf_counter()-t0):.2f}")
for name in order.split(","):
    t = time.perf_counter(); con.execute(S[name]).fetchall(); d = time.perf_counter() - t
    print(f"{name:7s} {d*1e3:7.2f}")
