"""Store-to-store migration at scale: records/s, peak RSS, and every record equal afterwards
(a measurement, not a test).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/migrate_speed.py \
        --sizes 25000,50000,100000 --targets hnswlib,duckdb [--json PATH]

For each size it builds a DuckDB source (``bulk_add`` of chat-like message records with 384-d
vectors, one thread record per 100 messages, one memory record per 50 with a ``supersedes`` link
between consecutive memories of a user), then migrates it into each target in a fresh child
process (the source opened ``?read_only=true``, so no background index build competes with
the copy), so the child's peak RSS (``ru_maxrss``) is the migration's and nothing else's. The
source and target use the same embedder identity, so vectors are kept (no model is timed).
After the migration the child compares both stores page by page: every record field (but
``seq``), every link, every vector. Peak RSS is reported next to the RSS right after opening both
stores and after the copy: what the migration itself adds is the difference, and it must not
grow with the size (an hnswlib target keeps its vectors and graph in memory: that part grows
with the records it holds, whatever writes them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

DUCKDB_CACHE = "memory_limit=256MB"
"""DuckDB keeps pages it read or wrote in its buffer pool up to ``memory_limit`` (default: most of
RAM), which would show up as RSS growing with the store; bounded here, RSS shows what the
migration itself holds."""

CHILD = r"""
import json, sys, time
import numpy as np
from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.spi import Order, RecordFilter
from agentmemory.transfer import migrate

src_uri, dst_uri = sys.argv[1], sys.argv[2]
def rss_mb(field="VmRSS"):
    with open("/proc/self/status") as status:  # Linux: current (VmRSS) or peak (VmHWM) resident set
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":")) / 1024
cfg = {"extract_memories": False, "enable_context_summary": False}
src = AgentMemory(src_uri, embedder=HashingEmbedder(384), schema_policy="require_existing", memory_extraction_config=cfg)
dst = AgentMemory(dst_uri, embedder=HashingEmbedder(384), memory_extraction_config=cfg)
opened = rss_mb()
started = time.perf_counter()
report = migrate(src, dst, batch_size=1000)
seconds = time.perf_counter() - started
peak, after = rss_mb("VmHWM"), rss_mb()
# verify: every record (but seq), every link, every vector, page by page
a, b = src.store, dst.store
def canon(r):
    d = r.model_dump(exclude={"seq"})
    return d
checked, next_a, next_b = 0, None, None
while True:
    pa = a.query(RecordFilter(min_seq=next_a), order=Order.SEQ_ASC, limit=2000)
    pb = b.query(RecordFilter(min_seq=next_b), order=Order.SEQ_ASC, limit=2000)
    assert [r.record_id for r in pa] == [r.record_id for r in pb], "records differ"
    if not pa:
        break
    assert [canon(r) for r in pa] == [canon(r) for r in pb], "record fields differ"
    ids = [r.record_id for r in pa]
    va, vb = a.read_vectors(ids), b.read_vectors(ids)
    assert sorted(va) == sorted(vb) and all(np.allclose(va[k], vb[k], atol=1e-6) for k in va), "vectors differ"
    checked += len(pa)
    next_a, next_b = pa[-1].seq + 1, pb[-1].seq + 1
assert sorted(a.links(), key=lambda x: x.link_id) == sorted(b.links(), key=lambda x: x.link_id), "links differ"
print(json.dumps({"records": report.records_written, "links": report.links_written, "vectors": report.vectors,
                  "seconds": seconds, "records_per_s": report.records_written / seconds,
                  "rss_opened_mb": opened, "rss_peak_mb": peak, "rss_after_mb": after, "verified_records": checked}))
src.close(); dst.close()
"""


def build_source(path: Path, n: int) -> str:
    """A DuckDB store of ``n`` messages plus threads, memories and links; returns its URI."""
    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.records import Link, LinkType, Record, RecordType
    from agentmemory.spi import NewRecord, WriteBatch

    rng = np.random.default_rng(0)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    uri = f"duckdb://{path}"
    cfg = {"extract_memories": False, "enable_context_summary": False}
    with AgentMemory(uri, embedder=HashingEmbedder(384), memory_extraction_config=cfg) as memory:
        words = ["invoice", "ledger", "retry", "snapshot", "journal", "parity", "cron", "graph", "node", "rate"]
        batch: list[NewRecord] = []
        links: list[Link] = []
        last_memory: dict[str, str] = {}
        for i in range(n):
            user, thread = f"user-{i % 97}", f"thread-{i // 100}"
            when = t0 + timedelta(seconds=i)
            if i % 100 == 0:
                batch.append(NewRecord(Record(record_id=f"@thread:{thread}", record_type=RecordType.THREAD, content="",
                                              user_id=user, thread_id=thread, timestamp=when, created_at=when,
                                              metadata={"n": i, "big": 2**53 + i})))
            vector = rng.standard_normal(384).astype(np.float32)
            text = " ".join(rng.choice(words, 12))
            batch.append(NewRecord(Record(record_id=f"m{i:07d}", record_type=RecordType.MESSAGE, content=text,
                                          user_id=user, thread_id=thread, role="user", timestamp=when, created_at=when),
                                   vector))
            if i % 50 == 0:
                rid = f"f{i:07d}"
                batch.append(NewRecord(Record(record_id=rid, record_type=RecordType.FACT, content=f"fact {text}",
                                              user_id=user, timestamp=when, created_at=when,
                                              metadata={"tags": ["a", "b"], "score": 0.5}), vector))
                if user in last_memory:
                    links.append(Link(link_id=f"l{i:07d}", source_id=rid, target_id=last_memory[user],
                                      link_type=LinkType.SUPERSEDES, created_at=when))
                last_memory[user] = rid
            if len(batch) >= 5000:
                memory.store.write(WriteBatch(add=batch))
                batch = []
        memory.store.write(WriteBatch(add=batch, add_links=links))
    return uri


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25000,50000,100000")
    parser.add_argument("--targets", default="hnswlib,duckdb")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="migrate-bench-") as tmp:
        for n in (int(x) for x in args.sizes.split(",")):
            t = time.perf_counter()
            src = build_source(Path(tmp) / f"src-{n}.duckdb", n)
            print(f"n={n}: source built in {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)
            for target in args.targets.split(","):
                location = Path(tmp) / f"dst-{target}-{n}"
                dst = f"{target}://{location}.duckdb?{DUCKDB_CACHE}" if target == "duckdb" else f"{target}://{location}"
                # read_only: a source opened to be copied starts no background index build
                out = subprocess.run([sys.executable, "-c", CHILD, f"{src}?read_only=true&{DUCKDB_CACHE}", dst], capture_output=True, text=True, check=False)
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    return 1
                row = {"n": n, "target": target, **json.loads(out.stdout.strip().splitlines()[-1])}
                results.append(row)
                print(f"n={n} -> {target}: {row['records']} records, {row['links']} links in {row['seconds']:.1f}s "
                      f"({row['records_per_s']:.0f} records/s), RSS after open {row['rss_opened_mb']:.0f} MB, "
                      f"peak {row['rss_peak_mb']:.0f} MB, after {row['rss_after_mb']:.0f} MB, "
                      f"verified {row['verified_records']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
