"""The keyword postings file (FORMAT 2) is mapped, not copied: a loaded index answers exactly as
the one built from the fts tables (same hits, same floats) for every scope and filter; a file of
FORMAT 1, a truncated one or one with a damaged header is rebuilt without an error reaching the
caller; the mapping never stops the store's directory from being closed and deleted. Also the
reads of a card at a new time (the large scope's count, the keyword delta's ids): found in
process from what was read once per write clock, equal to what SQL counts and selects."""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore
from agentmemory_duckdb._keyword import _PREAMBLE, KeywordIndex, _Texts

from agentmemory.records import RecordStatus, RecordType
from agentmemory.snapshot_arrays import pack_texts
from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
V = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
WORDS = ["invoice", "reconciliation", "maya", "workflow", "step", "fails", "export", "csv", "ünïcode", "tokyo", "refund"]
QUERIES = ["invoice workflow", "maya csv", "ünïcode fails", "export", "refund tokyo step", "nothing matches this"]


def _rid(i: int) -> str:
    """Ids of several shapes: a long shared prefix (sorted past their first 8 bytes), short ones,
    non-ASCII ones, and ids that are a prefix of another."""
    return ("conversation-2026-12-06-message-" + f"{i:04d}", f"r{i}", f"é{i:03d}ü", f"id{i % 7}" + "x" * (i % 3))[i % 4] + f"-{i}"


def _fill(store: DuckDBStore, h: Any, n: int = 160, start: int = 0) -> list[str]:
    rng = np.random.default_rng(start)
    ids = [_rid(i) for i in range(start, start + n)]
    store.write(WriteBatch(add=[
        h.new(rid, V, " ".join(rng.choice(WORDS, int(rng.integers(1, 9)))),
              user_id=None if i % 11 == 0 else f"u{i % 3}", thread_id=None if i % 5 == 0 else f"t{i % 4}",
              agent_id=f"a{i % 2}", status=RecordStatus.INVALID if i % 13 == 0 else RecordStatus.VALID, record_type=RecordType.MEMORY if i % 3 else RecordType.MESSAGE,
              metadata={} if i % 4 == 0 else {"n": i % 4, "tag": ["x", "y"][i % 2]},
              expires_at=T0 + timedelta(days=1 + i % 3) if i % 6 == 0 else None)
        for i, rid in zip(range(start, start + n), ids)
    ]))
    return ids


def _filters(ids: list[str]) -> list[RecordFilter]:
    return [
        RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(user_id="u2", thread_id="t1"), RecordFilter(user_id=None),
        RecordFilter(user_id=None, thread_id=None), RecordFilter(thread_id="t3"), RecordFilter(user_id="nobody"),
        RecordFilter(record_ids=tuple(ids[::5]) + ("absent", "conversation-2026-12-06-message-")),
        RecordFilter(user_id="u0", record_ids=tuple(ids[:40])), RecordFilter(metadata_filter={"n": 3}),
        RecordFilter(user_id="u1", metadata_filter={"tag": "y"}), RecordFilter(agent_id="a1", record_types=frozenset({RecordType.MESSAGE})),
        RecordFilter(statuses=frozenset({RecordStatus.VALID}), min_seq=20, max_seq=120),
        RecordFilter(alive_at=T0 + timedelta(days=2)), RecordFilter(expired_at=T0 + timedelta(days=2)),
    ]


def _search_all(kw: KeywordIndex, store: DuckDBStore, ids: list[str], stale: frozenset[str]) -> list[Any]:
    return [kw.search(store.analyzer.term_set(q), flt, k, stale) for q in QUERIES for flt in _filters(ids) for k in (1, 5, 50)]


@pytest.fixture
def built(tmp_path: Path, h: Any) -> Any:
    store = h.open_store(tmp_path / "store.duckdb", auto_index=False)
    ids = _fill(store, h)
    assert store.build_indexes()["fts"]
    kw = store._kw
    assert kw is not None
    yield store, kw, ids
    store.close()


# ---- the packed texts ----------------------------------------------------------------------------
def test_texts_find_every_text_and_nothing_else() -> None:
    texts = ["b", "", "a", "abcdefgh", "abcdefghi", "abcdefghij", "abcdefgg", "zé", "zéé", "ü" * 9, "ü" * 8, "abc"]
    packed = _Texts.pack(texts, sorted_view=True)
    assert len(packed) == len(texts) and packed.all() == texts
    assert [packed[i] for i in range(len(texts))] == texts
    assert packed.take(np.array([7, 0, 1, 7])) == ["zé", "b", "", "zé"] and packed.take(np.array([], np.int64)) == []
    assert packed.find(texts).tolist() == list(range(len(texts)))
    assert packed.find(["abcdefghijk", "abcdefg", "ü" * 7, "c", "zéa"]).tolist() == [-1] * 5
    assert [texts[i] for i in packed.order.tolist()] == sorted(texts)  # type: ignore[union-attr]
    empty = _Texts.pack([], sorted_view=True)
    assert len(empty) == 0 and empty.all() == [] and empty.find(["a"]).tolist() == [-1]
    with pytest.raises(ValueError, match="NUL"):
        _Texts.pack(["a\x00b"], sorted_view=False)


# ---- a loaded index answers as the built one -----------------------------------------------------
def test_loaded_postings_answer_as_the_built_ones(built: Any, tmp_path: Path) -> None:
    store, kw, ids = built
    path = tmp_path / "postings"
    kw.save(path, "key")
    loaded = KeywordIndex.load(path, "key")
    assert not loaded.docs.flags.writeable, "the postings are mapped read-only, not copied"
    for stale in (frozenset(), frozenset(ids[::3] + ["absent"]), frozenset(ids[1:2])):
        want = _search_all(kw, store, ids, stale)
        assert _search_all(loaded, store, ids, stale) == want
        assert any(want) and not all(want)
    assert loaded.doc_freqs(["invoic", "maya", "absent"]) == kw.doc_freqs(["invoic", "maya", "absent"])
    assert [loaded.rids[i] for i in range(loaded.n)] == [kw.rids[i] for i in range(kw.n)]


def test_reopened_store_answers_as_the_built_one_and_reads_the_file(tmp_path: Path, h: Any, rebuilds: list[str]) -> None:
    path = tmp_path / "store.duckdb"
    store = h.open_store(path, auto_index=False)
    ids = _fill(store, h)
    store.build_indexes()
    store.write(WriteBatch(patch=[RecordPatch(ids[3], content="maya maya csv")], delete=[ids[8], ids[9]]))
    _fill(store, h, n=6, start=500)

    def hits(s: DuckDBStore) -> list[list[tuple[str, float]]]:
        return [[(x.record.record_id, x.score or 0.0) for x in s.keyword_search(q, flt, 10)] for q in QUERIES for flt in _filters(ids)]

    want = hits(store)
    store.close()
    rebuilds.clear()
    again = h.open_store(path, auto_index=False)
    try:
        assert hits(again) == want
        assert rebuilds == [], "the reopened store rebuilt the postings instead of mapping them"
    finally:
        again.close()


# ---- files not used: rebuilt, never an error -----------------------------------------------------
def _store_with_file(tmp_path: Path, h: Any) -> tuple[Path, Path, list[list[str]]]:
    path = tmp_path / "store.duckdb"
    store = h.open_store(path, auto_index=False)
    _fill(store, h)
    store.build_indexes()
    want = [[x.record.record_id for x in store.keyword_search(q, RecordFilter(user_id="u1"), 10)] for q in QUERIES]
    file = store.keyword_index_file
    store.close()
    assert file is not None and file.read_bytes()[:8] == b"AMKWPOST"
    return path, file, want


def _reopen_and_check(path: Path, file: Path, h: Any, want: list[list[str]], rebuilds: list[str]) -> None:
    rebuilds.clear()
    store = h.open_store(path, auto_index=False)
    try:
        assert [[x.record.record_id for x in store.keyword_search(q, RecordFilter(user_id="u1"), 10)] for q in QUERIES] == want
        assert rebuilds, "a file not of this format or not whole was used"
    finally:
        store.close()
    assert file.read_bytes()[:8] == b"AMKWPOST", "the rebuilt postings were not saved again"
    rebuilds.clear()
    store = h.open_store(path, auto_index=False)
    try:
        store.keyword_search(QUERIES[0], RecordFilter(), 5)
        assert rebuilds == []
    finally:
        store.close()


def test_a_format_1_file_is_rebuilt_and_rewritten(tmp_path: Path, h: Any, rebuilds: list[str]) -> None:
    path, file, want = _store_with_file(tmp_path, h)
    store = DuckDBStore(path)
    store.open(dimension=4)
    key = store._keyword_key(store._fts)  # type: ignore[arg-type]
    store.close()
    with open(file, "wb") as fh:  # what FORMAT 1 wrote: an npz with a packed JSON header member
        np.savez(fh, header=pack_texts([json.dumps({"format": 1, "key": key})]), rids=pack_texts(["x"]))
    with pytest.raises(ValueError, match="another format"):
        KeywordIndex.load(file, key)
    _reopen_and_check(path, file, h, want, rebuilds)


def _damage(raw: bytes, how: str) -> bytes:
    header_len = _PREAMBLE.unpack(raw[:_PREAMBLE.size])[2]
    header_end = _PREAMBLE.size + header_len
    if how == "header byte":
        i = _PREAMBLE.size + header_len // 2
        return raw[:i] + bytes([raw[i] ^ 0x20]) + raw[i + 1:]
    if how == "in preamble":
        return raw[:10]
    if how == "in header":
        return raw[:header_end - 5]
    if how == "in arrays":
        return raw[:len(raw) - 3]
    if how == "extended":
        return raw + b"\x00" * 64
    if how == "shapes":  # a whole, CRC-valid header whose arrays disagree with its counts
        header = json.loads(raw[_PREAMBLE.size:header_end])
        header["n"] += 1
        body = json.dumps(header).encode()
        start = -(-(_PREAMBLE.size + header_len) // 64) * 64
        pad = -(-(_PREAMBLE.size + len(body)) // 64) * 64 - _PREAMBLE.size - len(body)
        preamble = _PREAMBLE.pack(b"AMKWPOST", 2, len(body), zlib.crc32(body))
        return preamble + body + b"\x00" * pad + raw[start:]
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["header byte", "in preamble", "in header", "in arrays", "extended", "shapes"])
def test_a_damaged_or_truncated_file_is_rejected_and_rebuilt(tmp_path: Path, h: Any, rebuilds: list[str], how: str) -> None:
    path, file, want = _store_with_file(tmp_path, h)
    store = DuckDBStore(path)
    store.open(dimension=4)
    key = store._keyword_key(store._fts)  # type: ignore[arg-type]
    store.close()
    file.write_bytes(_damage(file.read_bytes(), how))
    with pytest.raises(ValueError):
        KeywordIndex.load(file, key)
    _reopen_and_check(path, file, h, want, rebuilds)


def test_a_file_of_another_key_is_rejected(built: Any, tmp_path: Path) -> None:
    _, kw, _ = built
    kw.save(tmp_path / "p", "one")
    with pytest.raises(ValueError, match="another snapshot"):
        KeywordIndex.load(tmp_path / "p", "two")
    with pytest.raises(FileNotFoundError):
        KeywordIndex.load(tmp_path / "absent", "one")


# ---- the mapping and the file's life -------------------------------------------------------------
def _mapped(file: Path) -> bool:
    """Whether this process maps ``file`` or holds a descriptor of it (Linux: /proc)."""
    maps = Path("/proc/self/maps").read_text()
    fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]
    return str(file) in maps or str(file) in fds


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_close_releases_the_mapping_and_the_directory_can_be_deleted(tmp_path: Path, h: Any) -> None:
    path, file, _ = _store_with_file(tmp_path / "dir", h)
    store = h.open_store(path, auto_index=False)
    store.keyword_search(QUERIES[0], RecordFilter(), 5)
    assert store._kw is not None and _mapped(file), "the postings were read, not mapped"
    store.close()
    gc.collect()
    assert not _mapped(file), "close() left the postings file mapped or open"
    shutil.rmtree(tmp_path / "dir")
    assert not (tmp_path / "dir").exists()


def test_a_mapped_index_survives_the_file_being_replaced_or_deleted(built: Any, tmp_path: Path) -> None:
    """A build saves the next snapshot's postings over the file while searches may still use the
    last one: the rename leaves the mapped file intact (never changed in place)."""
    store, kw, ids = built
    path = tmp_path / "postings"
    kw.save(path, "old")
    loaded = KeywordIndex.load(path, "old")
    want = _search_all(loaded, store, ids, frozenset())
    kw.save(path, "new")
    assert _search_all(loaded, store, ids, frozenset()) == want
    path.unlink()
    assert _search_all(loaded, store, ids, frozenset()) == want


# ---- the look-ups by id, checked against plain filtering ------------------------------------------
def test_stale_rows_and_id_filters_select_exactly_their_documents(built: Any, tmp_path: Path) -> None:
    """Stale rows and id filters find positions through the sorted ids: dropping or keeping those
    documents by hand from an unfiltered search gives the same list (k above the corpus size)."""
    store, kw, ids = built
    kw.save(tmp_path / "p", "k")
    loaded = KeywordIndex.load(tmp_path / "p", "k")
    for index in (kw, loaded):
        for q in QUERIES[:5]:
            terms = store.analyzer.term_set(q)
            for scope in (RecordFilter(), RecordFilter(user_id="u1")):
                every = index.search(terms, scope, 1000, frozenset())
                assert every
                stale = frozenset(rid for rid, _ in every[::2]) | {"absent"}
                assert index.search(terms, scope, 1000, stale) == [x for x in every if x[0] not in stale]
                wanted = tuple(rid for rid, _ in every[1::3]) + ("absent", ids[0][:-1])
                flt = RecordFilter(user_id=scope.user_id, record_ids=wanted)
                assert index.search(terms, flt, 1000, frozenset()) == [x for x in every if x[0] in wanted]


def test_snapshot_scores_equal_an_exact_scan(built: Any, tmp_path: Path, h: Any) -> None:
    """The same records never indexed (keyword search scans them exactly, as the reference
    does) score the same floats as the built and the mapped postings."""
    store, _, ids = built
    twin = h.open_store(tmp_path / "twin.duckdb", auto_index=False)
    try:
        _fill(twin, h)
        assert twin._fts is None
        for q in QUERIES:
            for flt in _filters(ids):
                got = [(x.record.record_id, x.score) for x in store.keyword_search(q, flt, 10)]
                assert got == [(x.record.record_id, x.score) for x in twin.keyword_search(q, flt, 10)], (q, flt)
    finally:
        twin.close()


# ---- the reads of a card at a new time ---------------------------------------------------------
class _Counting:
    """The store's connection, counting the statements run through it."""

    def __init__(self, con: Any) -> None:
        self._con, self.statements = con, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def execute(self, *args: Any) -> Any:
        self.statements += 1
        return self._con.execute(*args)


def test_a_large_scopes_count_at_any_time_is_the_sql_count(tmp_path: Path, h: Any) -> None:
    """A scope too large to keep is counted once per write clock, without ``alive_at``, with its
    expiry times: the planner's count at any time equals the SQL count of the rows alive then,
    the search answers the same rows, and a search at another time runs no count."""
    store = h.open_store(tmp_path / "s.duckdb", auto_index=False, exact_max_rows=5)
    rng = np.random.default_rng(3)
    store.write(WriteBatch(add=[
        h.new(f"m{i:02d}", rng.standard_normal(4), f"memo {i}", user_id="u1",
              expires_at=None if i % 3 == 0 else T0 + timedelta(hours=i % 17))
        for i in range(30)
    ]))
    con = store._con
    try:
        for hours in (-1.0, 0.0, 4.0, 4.5, 9.0, 16.0, 40.0):
            at = T0 + timedelta(hours=hours)
            counting = store._con = _Counting(con)
            hits = store.vector_search(V, RecordFilter(user_id="u1", alive_at=at), 50)
            store._con = con
            (want,) = con.execute(
                "SELECT count(*) FROM am_records WHERE has_vec AND user_id = 'u1' AND (expires_us IS NULL OR expires_us > ?)",
                [int(at.timestamp() * 1_000_000)],
            ).fetchone()
            assert store.last_plan.matching == want == len(hits), hours
            assert all(x.record.expires_at is None or x.record.expires_at > at for x in hits)
            if hours > -1.0:
                assert counting.statements == 1, "a search at a new time counted its scope again"  # the scan itself
    finally:
        store._con = con
        store.close()


def test_the_keyword_deltas_ids_follow_the_search_time(tmp_path: Path, h: Any) -> None:
    """Rows written after the BM25 snapshot are read once without ``alive_at``, with their expiry
    times; each search keeps those alive at its own time, as an exact scan does."""
    path = tmp_path / "s.duckdb"
    store = h.open_store(path, auto_index=False)
    twin = h.open_store(tmp_path / "twin.duckdb", auto_index=False)
    try:
        base = [h.new(f"b{i:02d}", V, f"maya invoice {i}", user_id="u1") for i in range(20)]
        late = [h.new(f"d{i:02d}", V, "maya " * (1 + i % 3), user_id="u1", expires_at=T0 + timedelta(hours=i)) for i in range(12)]
        for s in (store, twin):
            s.write(WriteBatch(add=base))
        store.build_indexes()
        for s in (store, twin):
            s.write(WriteBatch(add=late))
        assert store._fts is not None and twin._fts is None
        for hours in (-1.0, 0.0, 3.5, 7.0, 11.0, 20.0):
            flt = RecordFilter(user_id="u1", alive_at=T0 + timedelta(hours=hours))
            got = {x.record.record_id for x in store.keyword_search("maya", flt, 40)}
            assert got == {x.record.record_id for x in twin.keyword_search("maya", flt, 40)}
            assert {r for r in got if r.startswith("d")} == {f"d{i:02d}" for i in range(12) if i > hours}
    finally:
        store.close()
        twin.close()


def test_the_snapshots_fts_statistics_are_kept_with_the_postings(built: Any, tmp_path: Path) -> None:
    """The fts extension's ``num_docs`` and ``avgdl`` (what the keyword delta's statistics start
    from) are saved with the postings, the same numbers the stats table holds, so a search with a
    delta after a reopen reads no stats table."""
    store, kw, _ = built
    table = store._fts.table
    want = store._con.execute(f"SELECT num_docs, avgdl FROM fts_main_{table}.stats").fetchone()
    assert kw.fts_stats == (want[0], want[1]) and isinstance(kw.fts_stats[1], float)
    kw.save(tmp_path / "p", "k")
    assert KeywordIndex.load(tmp_path / "p", "k").fts_stats == kw.fts_stats
