"""A synthetic 1M-document KeywordIndex (the 100k store's shape x10: 12.5M postings, 30k terms,
100 users, 10k threads), saved by the code on PYTHONPATH, then in fresh processes: load (first
in the process) and the first user-scoped search after it, without and with 100 stale ids.

    python synth1m.py save DIR      # build + save (FORMAT of the code under test)
    python synth1m.py load DIR      # one fresh-process measurement (JSON line)
"""
import json, sys, time
from pathlib import Path
import numpy as np
from agentmemory_duckdb import _keyword as kwm
from agentmemory.spi import RecordFilter

N, P, T, USERS, THREADS = 1_000_000, 12_500_000, 30_000, 100, 10_000
mode, where = sys.argv[1], Path(sys.argv[2])
path = where / f"postings-f{kwm.FORMAT}"
KEY = "synthetic"

def fields():
    rng = np.random.default_rng(0)
    rids = [f"r{i:07d}" for i in range(N)]
    per_thread = N // THREADS
    thread_range = {(f"user{t % USERS}", f"t{t}"): (t * per_thread, (t + 1) * per_thread) for t in range(THREADS)}
    thread_range = dict(sorted(thread_range.items(), key=lambda kv: kv[1]))
    user_range = {}
    # threads of a user are not contiguous here; give each user one contiguous block instead
    per_user = N // USERS
    user_range = {f"user{u}": (u * per_user, (u + 1) * per_user) for u in range(USERS)}
    weights = 1.0 / np.arange(1, T + 1) ** 1.1
    counts = np.maximum(1, (weights / weights.sum() * P).astype(np.int64))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    termid = np.repeat(np.arange(T), counts)
    pos = rng.integers(0, N, len(termid))
    order = np.lexsort((pos, termid))
    docs, tf = pos[order], rng.integers(1, 4, len(termid)).astype(np.float64)
    terms = [f"w{i}" for i in range(T)]
    lens = rng.integers(4, 40, N).astype(np.float64)
    avg = float(lens.mean())
    codes = lambda vals: kwm._Codes.build(vals)
    f = {"n": N, "avg_len": avg, "norm": 1.2 * (0.25 + 0.75 * lens / avg), "user_range": user_range, "thread_range": thread_range,
         "agent": codes(["agent"] * N), "thread": codes([f"t{i // per_thread}" for i in range(N)]), "rtype": codes(["memory"] * N),
         "status": codes(["valid"] * N), "seq": np.arange(N, dtype=np.int64), "expires": np.full(N, np.iinfo(np.int64).max),
         "docs": docs, "tf": tf, "offsets": offsets}
    meta = [None] * N
    if kwm.FORMAT == 1:
        f.update(rids=rids, meta=meta, term_id={t: i for i, t in enumerate(terms)}, df={t: int(c) for t, c in zip(terms, counts)})
    else:
        if hasattr(kwm, "_Ranges"):  # scope ranges packed (7076397's successor)
            f["user_range"] = kwm._Ranges.build({kwm._user_key(u): r for u, r in user_range.items()})
            f["thread_range"] = kwm._Ranges.build({kwm._thread_key(u, t): r for (u, t), r in thread_range.items()})
        f.update(rids=kwm._Texts.pack(rids, sorted_view=True), meta=kwm._Texts.pack([""] * N, sorted_view=False),
                 terms=kwm._Texts.pack(terms, sorted_view=True), term_ids=np.arange(T, dtype=np.int64), term_df=counts.astype(np.int64))
    return f

if mode == "save":
    t = time.perf_counter(); f = fields(); t_fields = time.perf_counter() - t
    idx = kwm.KeywordIndex("am_fts_synthetic", f)
    t = time.perf_counter(); idx.save(path, KEY); t_save = time.perf_counter() - t
    print(json.dumps({"format": kwm.FORMAT, "fields_s": round(t_fields, 2), "save_s": round(t_save, 2), "bytes": path.stat().st_size}))
else:
    out = {"format": kwm.FORMAT}
    t = time.perf_counter(); idx = kwm.KeywordIndex.load(path, KEY); out["load_ms"] = round((time.perf_counter() - t) * 1e3, 2)
    terms = frozenset(["w3", "w40", "w700", "w5000"])
    t = time.perf_counter(); r1 = idx.search(terms, RecordFilter(user_id="user7"), 10, frozenset()); out["first_search_ms"] = round((time.perf_counter() - t) * 1e3, 2)
    stale = frozenset(f"r{i:07d}" for i in range(3, N, N // 100))
    t = time.perf_counter(); r2 = idx.search(frozenset(["w4", "w41"]), RecordFilter(user_id="user8"), 10, stale); out["first_stale_search_ms"] = round((time.perf_counter() - t) * 1e3, 2)
    t = time.perf_counter(); r3 = idx.search(frozenset(["w4", "w41"]), RecordFilter(user_id="user9"), 10, stale); out["next_stale_search_ms"] = round((time.perf_counter() - t) * 1e3, 2)
    out["hits"] = [r1[:2], r2[:2]]
    print(json.dumps(out))
