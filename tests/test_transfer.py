"""Export / import / migrate between the local backends: round trips of arbitrary stores (every
read and search equal on the other side), idempotent reruns, resumption after SIGKILL, bad dump
lines (typed error naming the line, nothing written past the last good batch), conflicts,
re-embedding and dry runs."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_conformance.catalogue import NASTY_IDS, NASTY_METADATA, NASTY_TEXTS
from agentmemory_conformance.stateful import USERS, WORDS, draw_record
from agentmemory_conformance.support import DIM, T0
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.errors import Conflict, InvalidArgument
from agentmemory.records import MEMORY_TYPES, Link, LinkType, Record, RecordType
from agentmemory.registry import backend_class
from agentmemory.spi import NewRecord, Order, RecordFilter, RecordPatch, WriteBatch
from agentmemory.transfer import (
    DumpFormatError,
    export_records,
    import_records,
    migrate,
    read_dump,
    write_dump,
)

LOCAL = ("memory", "duckdb", "hnswlib")
PAIRS = [(a, b) for a in LOCAL for b in LOCAL if a != b]
NO_INTELLIGENCE = {"extract_memories": False, "enable_context_summary": False}
BIG_INTS = {"above_2_53": 2**53 + 1, "negative_big": -(2**60) - 3, "u64ish": 2**63 - 1}


@contextmanager
def client(kind: str, directory: Path, dim: int = DIM) -> Iterator[AgentMemory]:
    """An AgentMemory over a fresh (or, for the same directory, the same) store of ``kind``."""
    store = backend_class(kind).in_directory(directory)
    with AgentMemory(store, embedder=HashingEmbedder(dim), memory_extraction_config=NO_INTELLIGENCE) as memory:
        yield memory


def vec(*xs: float) -> np.ndarray:
    out = np.zeros(DIM, dtype=np.float32)
    out[: len(xs)] = xs
    return out


# ---- comparing two stores --------------------------------------------------------------------
def canonical(record: Record) -> dict[str, Any]:
    """Everything a reader sees of a record except ``seq`` (times as UTC instants, metadata as JSON)."""
    data = record.model_dump(exclude={"seq", "metadata"})
    for key in ("timestamp", "created_at", "expires_at"):
        if data[key] is not None:
            data[key] = data[key].timestamp()
    data["metadata"] = json.dumps(record.metadata, sort_keys=True)
    return data


def assert_same_ranking(ha: list[Any], hb: list[Any], *, k: int, tol: float = 1e-5) -> None:
    """The same hits at the same distances, up to ties: equal vectors (up to normalisation) tie,
    but each engine computes cosine in its own float order, so a tie may differ in the last bits
    and its members come in either order, and a tie at the k-th place may keep different ones.
    Both rankings are sorted by distance, so equal distance sequences plus the same hits before
    the last tie mean the same ranking."""
    da, db = [float(h.distance) for h in ha], [float(h.distance) for h in hb]
    assert len(da) == len(db)
    np.testing.assert_allclose(da, db, atol=tol)
    cut = da[-1] - tol if len(da) == k else float("inf")
    assert {h.record.record_id for h, d in zip(ha, da) if d < cut} == {h.record.record_id for h, d in zip(hb, db) if d < cut}


def assert_same_store(src: AgentMemory, dst: AgentMemory, *, vectors_kept: bool = True) -> None:
    a, b = src.store, dst.store
    ra = a.query(RecordFilter(), order=Order.SEQ_ASC)
    rb = b.query(RecordFilter(), order=Order.SEQ_ASC)
    assert [r.record_id for r in ra] == [r.record_id for r in rb], "records, in seq order"
    assert [canonical(r) for r in ra] == [canonical(r) for r in rb]
    assert a.links() == b.links()
    ids = [r.record_id for r in ra]
    va, vb = a.read_vectors(ids), b.read_vectors(ids)
    assert sorted(va) == sorted(vb), "the same records have vectors"
    if vectors_kept:
        for rid in va:
            np.testing.assert_allclose(va[rid], vb[rid], rtol=1e-6, atol=1e-6)
    for flt in (RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(alive_at=T0), RecordFilter(thread_id=None)):
        assert a.count(flt) == b.count(flt)
        if vectors_kept:
            for query in (vec(1), vec(0, 1, 1), vec(-1, 2, 0, 1)):
                assert_same_ranking(a.vector_search(query, flt, 10), b.vector_search(query, flt, 10), k=10)
        for word in ("apple", "Running", "日本語"):
            ka, kb = a.keyword_search(word, flt, 10), b.keyword_search(word, flt, 10)
            assert [h.record.record_id for h in ka] == [h.record.record_id for h in kb]


# ---- a strategy of whole stores --------------------------------------------------------------
@st.composite
def store_contents(draw: st.DrawFn) -> list[WriteBatch]:
    """Batches that build a store: records of every type, scope, status and TTL with nested and
    unicode metadata (ints past 2**53 included), links between memory records, then patches and
    deletes (so seq has gaps and some vectors were replaced or removed)."""
    data = draw(st.data())
    n = draw(st.integers(1, 14))
    ids = [f"{i}#{NASTY_IDS[i % len(NASTY_IDS)]}"[:128] for i in range(n)]
    adds = []
    for rid in ids:
        item = draw_record(data, rid)
        extra = draw(st.sampled_from([{}, BIG_INTS, NASTY_METADATA, {"text": draw(st.sampled_from(NASTY_TEXTS))}]))
        item = NewRecord(item.record.model_copy(update={"metadata": {**item.record.metadata, **extra}}), item.vector)
        adds.append(item)
    batches = [WriteBatch(add=adds[: n // 2]), WriteBatch(add=adds[n // 2:])]
    memories = [a.record.record_id for a in adds if a.record.record_type in MEMORY_TYPES]
    pairs = draw(st.lists(st.tuples(st.sampled_from(memories), st.sampled_from(memories)), max_size=4)) if memories else []
    links, seen = [], set()
    for i, (s, t) in enumerate(pairs):
        if s != t and frozenset((s, t)) not in seen:
            seen.add(frozenset((s, t)))
            links.append(Link(link_id=f"l'{i}", source_id=s, target_id=t, link_type=draw(st.sampled_from(list(LinkType))),
                              created_at=T0, metadata=draw(st.sampled_from([{}, {"why": "ü"}, BIG_INTS]))))
    if links:
        batches.append(WriteBatch(add_links=links))
    victims = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
    patched = [rid for rid in ids if rid not in victims][:1]
    batches.append(WriteBatch(patch=[RecordPatch(rid, content="apple Running patched") for rid in patched], delete=victims))
    return batches


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=store_contents(), via_file=st.booleans())
def test_round_trip_between_backends(source_kind: str, target_kind: str, batches: list[WriteBatch], via_file: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        root = Path(tmp)
        src = stack.enter_context(client(source_kind, root / "src"))
        for batch in batches:
            src.store.write(batch)
        dst = stack.enter_context(client(target_kind, root / "dst"))
        if via_file:
            dump = root / "dump.jsonl.gz"
            write_dump(export_records(src), dump)
            report = import_records(dst, read_dump(dump), batch_size=3)
        else:
            report = migrate(src, dst, batch_size=3)
        assert report.vectors == "kept"
        assert_same_store(src, dst)
        again = migrate(src, dst, batch_size=5)  # rerun: everything is there and equal
        assert (again.records_written, again.links_written) == (0, 0)
        assert again.records_unchanged == report.records_written
        assert again.links_unchanged == report.links_written
        assert_same_store(src, dst)


# ---- files and the format -------------------------------------------------------------------
@pytest.fixture
def source(tmp_path: Path) -> Iterator[AgentMemory]:
    """A DuckDB store filled through the public API: a thread, messages, memories, a link."""
    with client("duckdb", tmp_path / "source") as memory:
        thread = memory.create_thread("t1", user_id="u1", agent_id="a1", metadata={"big": 2**60 + 1})
        thread.add_messages([{"role": "user", "content": f"{w} number {i}"} for i, w in enumerate(WORDS)])
        old = memory.add_memory("likes apple pie", user_id="u1", memory_type="preference")
        new = memory.add_memory("likes cherry pie now", user_id="u1", memory_type="preference", ttl_days=30)
        memory.link_records(new, old, "supersedes")
        yield memory


def dump_lines(memory: AgentMemory, path: Path) -> list[str]:
    write_dump(export_records(memory), path)
    return path.read_text("utf-8").splitlines(keepends=True)


def test_dump_format_is_documented_json_lines(source: AgentMemory, tmp_path: Path) -> None:
    lines = dump_lines(source, tmp_path / "d.jsonl")
    header, *body, end = (json.loads(x) for x in lines)
    assert header["agentmemory_dump"] == 2 and header["source"] == {"backend": "duckdb", "dimension": DIM}
    assert header["embedder"] == "hashing" and header["vectors"] is True
    kinds = [next(iter(x)) for x in body]
    assert kinds.count("link") == 1 and kinds.index("link") > max(i for i, k in enumerate(kinds) if k == "record" and
                                                                   body[i]["record"]["record_type"] == "preference")
    assert end == {"end": {"records": kinds.count("record"), "links": 1}}
    seqs = [x["record"]["seq"] for x in body if "record" in x]
    assert seqs == sorted(seqs), "records in seq order"
    thread = next(x["record"] for x in body if "record" in x and x["record"]["record_type"] == "thread")
    assert thread["metadata"]["big"] == 2**60 + 1, "ints past 2**53 stay exact"
    assert thread["metadata"]["$agent_memory"], "the thread's persisted settings travel with it"
    assert any(x["record"]["expires_at"] for x in body if "record" in x), "TTLs travel"
    gz = tmp_path / "d.jsonl.gz"
    write_dump(export_records(source), gz)
    assert gzip.decompress(gz.read_bytes()).decode().count("\n") == len(lines)


def test_reembeds_when_the_target_embedder_differs(source: AgentMemory, tmp_path: Path) -> None:
    with client("hnswlib", tmp_path / "other", dim=2 * DIM) as target:
        report = migrate(source, target)
        assert report.vectors == "re-embedded" and "4 dimensions" in report.vectors_reason
        assert report.reembedded == len(source.store.read_vectors(
            [r.record_id for r in source.store.query(RecordFilter())]))
        hits = target.search("cherry pie", user_id="u1", strategy="vector")
        assert hits and hits[0].content == "likes cherry pie now"
        assert [canonical(r) for r in target.store.query(RecordFilter())] == [
            canonical(r) for r in source.store.query(RecordFilter())]


def test_export_without_vectors_reembeds_on_import(source: AgentMemory, tmp_path: Path) -> None:
    path = tmp_path / "novec.jsonl"
    write_dump(export_records(source, vectors=False), path)
    assert '"vector"' not in path.read_text()
    with client("memory", tmp_path / "m") as target:
        report = import_records(target, read_dump(path))
        assert report.vectors == "re-embedded" and report.reembedded > 0
        assert_same_store(source, target)  # the hashing embedder is deterministic: same vectors


def test_dry_run_writes_nothing(source: AgentMemory, tmp_path: Path) -> None:
    with client("duckdb", tmp_path / "t") as target:
        report = migrate(source, target, dry_run=True)
        assert report.dry_run and report.records_written == source.store.count(RecordFilter()) and report.links_written == 1
        assert target.store.count(RecordFilter()) == 0 and target.store.links() == []


def test_conflicts_fail_skip_or_overwrite(source: AgentMemory, tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write_dump(export_records(source), path)
    old_id = next(r.record_id for r in source.store.query(RecordFilter(record_types=frozenset({RecordType.PREFERENCE}))))
    with client("hnswlib", tmp_path / "t") as target:
        import_records(target, read_dump(path))
        target.store.write(WriteBatch(patch=[RecordPatch(old_id, content="edited in the target")]))
        with pytest.raises(Conflict, match=r"dump line \d+.*content"):
            import_records(target, read_dump(path))
        report = import_records(target, read_dump(path), on_conflict="skip")
        assert report.records_conflicting == 1 and old_id in report.conflicts[0]
        assert target.store.query(RecordFilter(record_ids=(old_id,)))[0].content == "edited in the target"
        report = import_records(target, read_dump(path), on_conflict="overwrite")
        assert report.records_overwritten == 1
        assert_same_store(source, target)
        with pytest.raises(InvalidArgument, match="on_conflict"):
            import_records(target, read_dump(path), on_conflict="merge")


def _good_dump(source: AgentMemory, path: Path) -> list[str]:
    return dump_lines(source, path)


@pytest.mark.parametrize(
    ("damage", "bad_line", "message"),
    [
        (lambda lines: lines[:4] + ['{"record": {"record_id": "x"'] , 5, "not valid JSON|cut off"),
        (lambda lines: [lines[0].replace('"agentmemory_dump":2', '"agentmemory_dump":99')] + lines[1:], 1, "version 99"),
        (lambda lines: lines[:5] + [lines[5].replace('"vector":"', '"vector":"AAAAAA')] + lines[6:], 6, "dimension|base64"),
        (lambda lines: lines[:5] + [lines[5].replace('"record_type":"message"', '"record_type":"\'); DROP TABLE x; --"')]
         + lines[6:], 6, "record_type"),
        (lambda lines: lines[:5] + [lines[5].replace('"has_vector":true', '"has_vector":"yes"')] + lines[6:], 6, "has_vector"),
        (lambda lines: lines[:5] + [lines[5].replace('{"record":', '{"evil":1,"record":')] + lines[6:], 6, "unknown key"),
        (lambda lines: lines[:5] + [lines[5].replace('"timestamp":"', '"timestamp":"yesterday')] + lines[6:], 6, "ISO"),
        (lambda lines: lines[:-1], None, "without its end line"),
        (lambda lines: lines[:-1] + ['{"end":{"records":1,"links":0}}\n'], None, "promises"),
        (lambda lines: ["\ufeffnot a dump\n"] + lines, 1, "JSON"),
    ],
)
def test_bad_lines_name_the_line_and_stop_at_the_last_good_batch(
    source: AgentMemory, tmp_path: Path, damage: Any, bad_line: int | None, message: str
) -> None:
    lines = damage(_good_dump(source, tmp_path / "good.jsonl"))
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(lines), "utf-8")
    with client("duckdb", tmp_path / "t") as target:
        with pytest.raises(DumpFormatError, match=message) as err:
            import_records(target, read_dump(path), batch_size=4)
        if bad_line is not None:
            assert err.value.line == bad_line
            assert f"dump line {bad_line}" in str(err.value)
            written = target.store.count(RecordFilter())
            assert written == max(0, (bad_line - 2) // 4 * 4), "only complete batches before the bad line"
        else:
            assert err.value.line >= len(lines)
            assert target.store.count(RecordFilter()) < source.store.count(RecordFilter())


def test_cli_round_trip_and_errors(tmp_path: Path) -> None:
    with client("duckdb", tmp_path / "source", dim=256) as source:  # the hashing embedder's default size
        source.create_thread("t1", user_id="u1").add_messages([{"role": "user", "content": w} for w in WORDS])
        uri = f"duckdb://{source.store.info().path}"
    env = {**os.environ, "AGENTMEMORY_HOME": str(tmp_path / "home")}
    cli = [sys.executable, "-m", "agentmemory.cli"]
    dump = tmp_path / "cli.jsonl.gz"
    done = subprocess.run([*cli, "export", "--store", uri, "--embedder", "hashing", "-o", str(dump)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    target = f"hnswlib://{tmp_path / 'cli-target'}"
    done = subprocess.run([*cli, "import", str(dump), "--store", target, "--embedder", "hashing", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["records_written"] == len(WORDS) + 1 and report["vectors"] == "kept"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"agentmemory_dump": 2}\n')
    done = subprocess.run([*cli, "import", str(bad), "--store", "memory://", "--embedder", "hashing"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "dump line 1" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([*cli, "migrate", uri, "memory://", "--source-embedder", "hashing", "--target-embedder", "hashing", "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "would write" in done.stdout


KILL_SCRIPT = """
import sys
from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.transfer import migrate
src, dst = sys.argv[1], sys.argv[2]
def tick(done):
    print(done, flush=True)
migrate(src, dst, source_embedder=HashingEmbedder(4), target_embedder=HashingEmbedder(4), batch_size=100, progress=tick)
print("finished", flush=True)
"""


@pytest.mark.parametrize("target_kind", ["duckdb", "hnswlib"])
def test_sigkill_mid_migration_then_rerun_completes_it(tmp_path: Path, target_kind: str) -> None:
    src_dir = tmp_path / "src"
    with client("duckdb", src_dir) as src:
        rows = [NewRecord(Record(record_id=f"m{i:05d}", record_type=RecordType.MESSAGE, content=f"{WORDS[i % len(WORDS)]} {i}",
                                 user_id=USERS[1 + i % 2], thread_id="t1", role="user", timestamp=T0, created_at=T0),
                          vec(1, i % 7, i % 3)) for i in range(4000)]
        src.store.write(WriteBatch(add=rows))
        src_uri = f"duckdb://{src.store.info().path}"
    dst_uri = _uri_of(target_kind, tmp_path / "dst")
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, src_uri, dst_uri], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for _ in range(5):  # five batches committed, the sixth in flight
        assert proc.stdout.readline().strip().isdigit()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    with client("duckdb", src_dir) as src, client(target_kind, tmp_path / "dst") as dst:
        partial = dst.store.count(RecordFilter())
        assert 500 <= partial < 4000, "the kill landed mid-migration"
        report = migrate(src, dst, batch_size=700)
        assert report.records_unchanged == partial and report.records_written == 4000 - partial
        assert_same_store(src, dst)


def _uri_of(kind: str, directory: Path) -> str:
    """The URI of the store ``in_directory(directory)`` builds, so another process opens the same data."""
    store = backend_class(kind).in_directory(directory)
    store.open(dimension=DIM)
    try:
        path = store.info().path
    finally:
        store.close()
    return f"{kind}://{path}"
