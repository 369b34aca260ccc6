"""Differential test: random operation sequences (with failing batches, ties, tricky tokens and
reopens) applied to ``InMemoryStore`` and ``HnswlibStore`` must read back the same: queries,
counts, links, vector search (exact at this scale) and keyword search (BM25 scores)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from agentmemory_hnswlib import _postings as hnswlib_postings
from hnswlib_testutil import T0, make_record

from agentmemory.errors import AgentMemoryError
from agentmemory.records import Link, LinkType, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, Order, RecordFilter, RecordPatch, WriteBatch

DIM = 8
WORDS = ["alpha", "beta", "Gamma", "foo_bar", "naïve", "ÜBER", "x1", "don't", "café", "東京",
         "a-b", "alpha", "alpha", "beta", "ﬁne", "İstanbul", "ß", "e\u0301t\u00e9", "42", "_"]
TYPES = [RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE, RecordType.PREFERENCE, RecordType.USER]
METADATA: list[dict[str, Any]] = [{}, {"k": 1}, {"k": 1.0}, {"k": True}, {"tags": ["x", "y"]},
                                  {"n": {"a": "b"}}, {"k": "1"}]
FILTERS: list[dict[str, Any]] = [{"k": 1}, {"tags": {"$array_contains": "x"}}, {"n": {"a": "b"}},
                                 {"k": {"$not": 1}}, {"tags": {"$array_contains_any": ["y", "z"]}}]


class Pair:
    """Both stores, driven together."""

    def __init__(self, path: Path, rnd: random.Random) -> None:
        self.path = path
        self.rnd = rnd
        self.ref = InMemoryStore()
        self.ref.open(dimension=DIM)
        self.hs = HnswlibStore(path, synchronous="normal")
        self.hs.open(dimension=DIM)
        self.vectors: list[np.ndarray] = []
        self.next_id = 0
        self.next_link = 0

    def ids(self) -> list[str]:
        return [r.record_id for r in self.ref.query(RecordFilter())]

    def vector(self) -> np.ndarray:
        rnd = self.rnd
        if self.vectors and rnd.random() < 0.2:
            return rnd.choice(self.vectors)  # exact duplicates: ties must break by record id
        vec = np.array([rnd.choice([-1.0, 0.0, 0.5, 1.0, 2.0]) for _ in range(DIM)], np.float32)
        if not vec.any():
            vec[0] = 1.0
        self.vectors.append(vec)
        return vec

    def content(self) -> str:
        return " ".join(self.rnd.choice(WORDS) for _ in range(self.rnd.randint(1, 6)))

    def random_batch(self) -> WriteBatch:
        rnd, ids = self.rnd, self.ids()
        adds, patches, links, unlinks, deletes = [], [], [], [], []
        for _ in range(rnd.choice([0, 1, 1, 2, 4])):
            self.next_id += 1
            rid = f"r{self.next_id:03d}" if rnd.random() > 0.03 or not ids else rnd.choice(ids)
            rtype = rnd.choice(TYPES + [RecordType.THREAD])
            rec = make_record(
                rid, type=rtype, content=self.content(), user=rnd.choice(["u1", "u2", None]),
                agent=rnd.choice(["a1", None]), thread=rnd.choice(["t1", "t2", None]),
                metadata=rnd.choice(METADATA),
                expires=rnd.choice([None, None, T0 - timedelta(days=1), T0 + timedelta(days=1), T0]),
            )
            if rnd.random() < 0.2:
                rec = rec.model_copy(update={"status": RecordStatus.INVALID})
            adds.append(NewRecord(rec, None if rtype is RecordType.THREAD else self.vector()))
        for _ in range(rnd.choice([0, 0, 1, 2])):
            target = rnd.choice(ids) if ids and rnd.random() > 0.05 else "missing"
            fields: dict[str, Any] = {}
            if rnd.random() < 0.4:
                fields["content"] = self.content()
            if rnd.random() < 0.3:
                fields["metadata"] = rnd.choice(METADATA)
            if rnd.random() < 0.3:
                fields["status"] = rnd.choice(list(RecordStatus))
            if rnd.random() < 0.3:
                fields["expires_at"] = rnd.choice([None, T0 + timedelta(hours=1), T0 - timedelta(hours=1)])
            if rnd.random() < 0.3:
                fields["vector"] = rnd.choice([None, self.vector(), self.vector()])
            patches.append(RecordPatch(target, **fields))
        current = self.ref.links()
        if current and rnd.random() < 0.2:
            unlinks.append(rnd.choice([x.link_id for x in current] + ["nolink"]))
        if len(ids) >= 2 and rnd.random() < 0.3:
            a, b = rnd.sample(ids, 2)
            self.next_link += 1
            links.append(Link(link_id=f"l{self.next_link:03d}", source_id=a, target_id=b,
                              link_type=rnd.choice(list(LinkType)), created_at=T0))
        if ids and rnd.random() < 0.25:
            deletes.extend(rnd.sample(ids, min(len(ids), rnd.choice([1, 2]))))
            if rnd.random() < 0.05:
                deletes.append("missing")
        return WriteBatch(add=adds, patch=patches, add_links=links, delete_links=unlinks, delete=deletes)

    def write(self, batch: WriteBatch) -> None:
        outcome: list[Any] = []
        for store in (self.ref, self.hs):
            try:
                outcome.append([r.model_dump() for r in store.write(batch)])
            except AgentMemoryError as exc:
                outcome.append(type(exc))
        assert outcome[0] == outcome[1]

    def random_filter(self) -> RecordFilter:
        rnd, ids = self.rnd, self.ids()
        kw: dict[str, Any] = {}
        if rnd.random() < 0.15 and ids:
            kw["record_ids"] = tuple(rnd.sample(ids, min(len(ids), 3))) + ("ghost",)
        if rnd.random() < 0.3:
            kw["record_types"] = frozenset(rnd.sample(TYPES, rnd.randint(0, 2)))
        for dim, pool in (("user_id", ["u1", "u2", "u9"]), ("agent_id", ["a1"]), ("thread_id", ["t1", "t2"])):
            if rnd.random() < 0.3:
                kw[dim] = rnd.choice([None, *pool])
        if rnd.random() < 0.2:
            kw["statuses"] = frozenset(rnd.sample(list(RecordStatus), rnd.randint(0, 2)))
        if rnd.random() < 0.3:
            kw["alive_at"] = T0
        if rnd.random() < 0.1:
            kw["expired_at"] = T0
        if rnd.random() < 0.1:
            kw["min_seq"] = rnd.randint(0, max(1, self.next_id))
        if rnd.random() < 0.1:
            kw["max_seq"] = rnd.randint(0, max(1, self.next_id))
        if rnd.random() < 0.25:
            kw["metadata_filter"] = rnd.choice(FILTERS)
        return RecordFilter(**kw)

    def compare_reads(self) -> None:
        rnd = self.rnd
        for _ in range(3):
            flt = self.random_filter()
            order = rnd.choice(list(Order))
            limit, offset = rnd.choice([None, 0, 1, 5]), rnd.choice([0, 0, 2])
            assert self.hs.query(flt, order=order, limit=limit, offset=offset) == self.ref.query(
                flt, order=order, limit=limit, offset=offset
            )
            assert self.hs.count(flt) == self.ref.count(flt)
            k = rnd.choice([1, 3, 10])
            query = self.vector() if rnd.random() < 0.5 or not self.vectors else rnd.choice(self.vectors)
            _same_hits(self.hs.vector_search(query, flt, k), self.ref.vector_search(query, flt, k), "distance")
            text = self.content()
            _same_hits(self.hs.keyword_search(text, flt, k), self.ref.keyword_search(text, flt, k), "score")
        ids = self.ids()
        some = rnd.sample(ids, min(3, len(ids)))
        assert self.hs.links() == self.ref.links()
        assert self.hs.links(record_ids=some) == self.ref.links(record_ids=some)

    def reopen(self) -> None:
        self.hs.close()
        self.hs = HnswlibStore(self.path, synchronous="normal")
        self.hs.open(dimension=DIM)

    def close(self) -> None:
        self.hs.close()


def _same_hits(got: list, want: list, attr: str) -> None:
    assert [h.record for h in got] == [h.record for h in want]
    assert np.allclose([getattr(h, attr) for h in got], [getattr(h, attr) for h in want], atol=1e-6)


@pytest.mark.parametrize(("seed", "keyword_path"), [(1, "base"), (2, "overlay"), (3, "base"), (4, "overlay")])
def test_random_operations_match_the_reference_store(
    tmp_path: Path, seed: int, keyword_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``keyword_path``: keyword postings rebuilt before every search that follows a write
    (all from the base segment), or never rebuilt after the first search (every later write
    scored from the overlay, over masked base entries); both must score exactly like the
    reference."""
    if keyword_path == "base":
        monkeypatch.setattr(hnswlib_postings, "REBUILD_MIN", 0)
        monkeypatch.setattr(hnswlib_postings, "REBUILD_FRACTION", 0.0)
        monkeypatch.setattr(hnswlib_postings, "_BUILD_CHUNK", 3)  # bases built over many chunks
    else:
        monkeypatch.setattr(hnswlib_postings, "REBUILD_MIN", 10**9)
    rnd = random.Random(seed)
    pair = Pair(tmp_path / "db", rnd)
    try:
        for step in range(120):
            pair.write(pair.random_batch())
            pair.compare_reads()
            if step % 40 == 39:
                pair.reopen()
                pair.compare_reads()
    finally:
        pair.close()


@pytest.mark.parametrize("language", ["english", "none", "german"])
def test_keyword_tokens_match_the_reference(tmp_path: Path, language: str) -> None:
    """Underscores, accents, ligatures, CJK, apostrophes, case, stems and stop words are
    analysed exactly as the reference does (same analyzer, same BM25 scores), and new rows are
    searchable at once."""
    ref, hs = InMemoryStore(language=language), HnswlibStore(tmp_path / "db", language=language)
    ref.open(dimension=2)
    hs.open(dimension=2)
    try:
        texts = ["Foo_bar baz", "foo bar", "CAFÉ naïve", "東京 tower", "don't stop", "ﬁne print", "ÜBER über",
                 "The runner was running", "she runs and runs", "the and of", "Häuser und Hauses"]
        batch = WriteBatch(add=[NewRecord(make_record(f"k{i}", content=t), np.array([1.0, i], np.float32))
                                for i, t in enumerate(texts)])
        ref.write(batch)
        hs.write(batch)
        for query in ["foo_bar", "foo", "café", "東京", "don", "t", "ﬁne", "fine", "über", "UBER", "baz bar",
                      "running", "RUNS", "the", "the runner", "haus", "häuser"]:
            _same_hits(hs.keyword_search(query, RecordFilter(), 10), ref.keyword_search(query, RecordFilter(), 10), "score")
        assert [h.record.record_id for h in hs.keyword_search("foo_bar", RecordFilter(), 10)] == ["k0"]
        running = {h.record.record_id for h in hs.keyword_search("running", RecordFilter(), 10)}
        assert running == ({"k7", "k8"} if language == "english" else {"k7"})
        assert (hs.keyword_search("the", RecordFilter(), 10) == []) == (language == "english")
        assert hs.info().extra["language"] == language
    finally:
        hs.close()


def test_store_written_with_an_older_analyzer_is_reanalysed_on_open(tmp_path: Path) -> None:
    """A version-1 store (FTS rows of lower-cased words, no analyzer recorded) opened by this
    code: its documents are re-analysed, stemmed queries find them and BM25 equals the
    reference's, even though the open starts from an index snapshot taken before."""
    import re
    import sqlite3

    texts = ["She runs every morning", "The runner was running late", "nothing of the sort", "runs runs"]
    batch = WriteBatch(add=[NewRecord(make_record(f"d{i}", content=t), np.array([1.0, i], np.float32))
                            for i, t in enumerate(texts)])
    # language "none" indexes what version 1 did for these texts (lower-cased words), and its
    # index snapshot holds their term counts
    hs = HnswlibStore(tmp_path / "db", language="none")
    hs.open(dimension=2)
    hs.write(batch)
    hs.close()
    con = sqlite3.connect(tmp_path / "db" / "records.sqlite3")
    for label, content in con.execute("SELECT v.label, r.content FROM vectors v JOIN records r USING (record_id)").fetchall():
        words = re.findall(r"\w+", content.lower())
        assert con.execute("SELECT body FROM fts WHERE rowid = ?", (label,)).fetchone() == (" ".join(words),)
    con.execute("DELETE FROM meta WHERE key IN ('language', 'analyzer')")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.commit()
    con.close()

    hs = HnswlibStore(tmp_path / "db")
    hs.open(dimension=2)
    ref = InMemoryStore()
    ref.open(dimension=2)
    ref.write(batch)
    try:
        assert hs.last_reconcile.source == "snapshot"
        got = hs.keyword_search("running", RecordFilter(), 10)
        assert {h.record.record_id for h in got} == {"d0", "d1", "d3"}
        _same_hits(got, ref.keyword_search("running", RecordFilter(), 10), "score")
        assert hs.keyword_search("the of", RecordFilter(), 10) == []
        assert hs.info().extra["analyzer"] == ref.analyzer.fingerprint
    finally:
        hs.close()
    # and a language change on open re-analyses too
    hs = HnswlibStore(tmp_path / "db", language="none")
    hs.open(dimension=2)
    try:
        assert {h.record.record_id for h in hs.keyword_search("running", RecordFilter(), 10)} == {"d1"}
    finally:
        hs.close()
    hs = HnswlibStore(tmp_path / "db")  # no language given: the stored one ("none") stays
    hs.open(dimension=2)
    try:
        assert hs.info().extra["language"] == "none"
    finally:
        hs.close()


def test_failed_batch_leaves_nothing_behind(open_store: Callable[..., HnswlibStore]) -> None:
    store = open_store(dimension=4)
    store.write(WriteBatch(add=[NewRecord(make_record("a"), np.ones(4, np.float32))]))
    bad = WriteBatch(
        add=[NewRecord(make_record("b"), np.ones(4, np.float32))],
        patch=[RecordPatch("a", content="changed", vector=np.arange(1, 5, dtype=np.float32))],
        delete=["nope"],
    )
    with pytest.raises(AgentMemoryError):
        store.write(bad)
    assert [r.record_id for r in store.query(RecordFilter())] == ["a"]
    assert store.query(RecordFilter())[0].content == "content of a"
    assert store.keyword_search("changed", RecordFilter(), 5) == []
    assert store.info().extra["vectors"] == 1
    added = store.write(WriteBatch(add=[NewRecord(make_record("c"), None)]))
    assert added[0].seq == 2  # the failed batch consumed no sequence number
