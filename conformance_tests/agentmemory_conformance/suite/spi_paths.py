"""Answers that must not depend on the path a backend takes to find them: vectors of any length
next to records without one (in-process scans of a small scope assume unit vectors), keyword
search through a built keyword index scoped by user and by thread (indexes keep per-scope
ranges), and BM25 over a built index plus the records written since, under filters.

Each check is the SPI's documented behaviour: cosine distance compares directions only and
``read_vectors`` returns the written direction at unit length; keyword search scores BM25 over
every searchable record; ``settle`` changes only which path answers (before it, scores of
records changed since the last build may use that build's corpus statistics)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import numpy as np
import pytest

from agentmemory.bm25 import bm25
from agentmemory.bulk import RecordColumns
from agentmemory.records import Record, RecordType
from agentmemory.spi import Capability, Hit, MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..support import (
    DIM,
    SCORE_TOLERANCE,
    T0,
    Api,
    assert_hits_ordered,
    assert_reads_agree,
    assert_same,
    clause,
    ids,
    loop_for,
    new,
    rec,
    reference_twin,
    requires,
    write_both,
)
from .indexed import TierReference

_USERS = ("u1", "u2", "U1", None, "u3")
_THREADS = (None, "t1", "t2", "t3")
_VOCAB = ("apple", "banana", "cherry", "invoice", "running", "garden", "piano", "report", "travel", "Paris")
_QUERIES = ("apple cherry", "banana", "running garden", "Paris travel report", "quokka", "piano invoice")


def _settle(api: Api) -> dict[str, bool]:
    store = api.store
    if api.mode == "sync":
        return store.settle()
    return loop_for(store).run_until_complete(store.asettle())


def _read_vectors(api: Api, record_ids: list[str]) -> dict[str, np.ndarray]:
    if api.mode == "sync":
        return api.store.read_vectors(record_ids)
    return loop_for(api.store).run_until_complete(api.store.aread_vectors(record_ids))


def _scope_filters() -> dict[str, RecordFilter]:
    """Every user alone, every user with every thread (absent ones included), threads alone,
    and combinations no record holds."""
    out: dict[str, RecordFilter] = {"all": RecordFilter()}
    for user in _USERS:
        out[f"user {user}"] = RecordFilter(user_id=user)
        for thread in _THREADS:
            out[f"user {user} thread {thread}"] = RecordFilter(user_id=user, thread_id=thread)
    for thread in _THREADS:
        out[f"thread {thread}"] = RecordFilter(thread_id=thread)
    out["agent a1"] = RecordFilter(agent_id="a1")
    out["user u1 agent absent"] = RecordFilter(user_id="u1", agent_id=None)
    out["alive at T0"] = RecordFilter(alive_at=T0)
    out["user u2 expired at T0"] = RecordFilter(user_id="u2", expired_at=T0)
    out["some ids"] = RecordFilter(record_ids=tuple(f"kx{i:04d}" for i in range(0, 400, 3)))
    out["user u9"] = RecordFilter(user_id="u9")
    out["user u2 thread t9"] = RecordFilter(user_id="u2", thread_id="t9")
    out["user u1 type fact"] = RecordFilter(user_id="u1", record_types=frozenset({RecordType.FACT}))
    return out


class _BuildStats:
    """The corpus statistics of the reference at one moment (the last ``settle``): what a
    backend may score records changed since with, until the next build."""

    def __init__(self, ref: MemoryStore) -> None:
        rows = ref.query(RecordFilter())
        with_vec = set(ref.read_vectors([r.record_id for r in rows])) if rows else set()
        analyzer = ref.analyzer  # type: ignore[attr-defined]
        self.terms = analyzer.terms
        self.docs = [Counter(analyzer.terms(r.indexed_text)) for r in rows if r.record_id in with_vec]
        self.n = len(self.docs)
        self.avg_len = sum(sum(c.values()) for c in self.docs) / self.n if self.n else 1.0

        self._df: dict[str, int] = {}

    def score(self, record: Record, text: str) -> float:
        """BM25 of ``record`` for ``text`` with these statistics."""
        terms = set(self.terms(text))
        for t in terms - self._df.keys():
            self._df[t] = sum(1 for c in self.docs if t in c)
        return bm25(Counter(self.terms(record.indexed_text)), terms, self._df, self.n, self.avg_len or 1.0)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SCORE_TOLERANCE, abs_tol=1e-12)


class SearchPathTests:
    """The same answers whatever path a backend takes: non-unit vectors in mixed batches, the
    keyword index's user and thread ranges, a built keyword index plus its delta under filters."""

    # ---- vectors of any length -----------------------------------------------------------------
    @clause("spi.write", "spi.bulk_add", "spi.vector-search", "spi.read-vectors", "7.scope")
    def test_vectors_of_any_length_next_to_records_without_one(self, api: Api, store: MemoryStore) -> None:
        """Vectors of lengths from 0.01 to 100, written in batches that also add records
        without a vector, patched to other lengths, and bulk-added: vector search (unfiltered
        and scoped to one user, one thread, a user and a type) finds them at the reference's
        cosine distances, in its order; ``read_vectors`` returns each in the written direction
        at unit length, like the reference.

        Troubleshooting: divide every present vector by its own norm (``v / |v|``) when the
        batch also holds rows without a vector (a masked or zero-filled matrix), in ``write``,
        in patches and in ``bulk_add``; an in-process scan that computes ``1 - v @ q`` is only
        a cosine distance over unit vectors.
        """
        rng = np.random.default_rng(44)
        lengths = (0.01, 0.5, 3.0, 100.0, 7.5, 0.2)
        ref = reference_twin(store)
        adds = []
        for i in range(36):
            has_vec = i % 3 != 1
            vector = (rng.normal(size=DIM) * lengths[i % len(lengths)]).astype(np.float32) if has_vec else None
            adds.append(new(rec(f"nv{i:02d}", content=f"length {i}", user=("u1", "u2")[i % 2],
                                thread=("t1", "t2", None)[i % 3], type=(RecordType.MEMORY, RecordType.FACT)[(i // 2) % 2]),
                            vector))
        for start in range(0, len(adds), 12):
            write_both(api, ref, WriteBatch(add=adds[start:start + 12]))
        write_both(api, ref, WriteBatch(patch=[
            RecordPatch("nv00", vector=np.full(DIM, 40.0, dtype=np.float32)),
            RecordPatch("nv01", vector=(rng.normal(size=DIM) * 0.05).astype(np.float32)),
        ]))
        bulk = RecordColumns(
            record_id=[f"bk{i}" for i in range(6)], content=[f"bulk {i}" for i in range(6)], record_type=RecordType.MEMORY,
            user_id=["u1", "u2", "u1", "u2", "u1", "u2"], timestamp=T0,
            vectors=(rng.normal(size=(6, DIM)) * np.asarray(lengths)[:, None]).astype(np.float32),
        )
        assert api.bulk_add(bulk) == ref.bulk_add(bulk) == 6
        filters = {
            "all": RecordFilter(), "user u1": RecordFilter(user_id="u1"), "thread t2": RecordFilter(thread_id="t2"),
            "user u2 facts": RecordFilter(user_id="u2", record_types=frozenset({RecordType.FACT})),
        }
        for probe in (rng.normal(size=DIM).astype(np.float32) * 9.0, rng.normal(size=DIM).astype(np.float32) * 0.1):
            for name, flt in filters.items():
                assert_reads_agree(api, ref, flt, vector=probe, k=8, what=f"vectors of any length, {name}")
        if Capability.READ_VECTORS in store.capabilities():
            every = [r.record_id for r in ref.query(RecordFilter())]
            got, want = _read_vectors(api, every), ref.read_vectors(every)
            assert set(got) == set(want), f"read_vectors [{api.mode}]: ids {sorted(set(got) ^ set(want))[:5]} differ"
            for rid, vector in want.items():
                arr = np.asarray(got[rid], dtype=np.float64)
                assert np.allclose(arr, vector, atol=1e-5), (
                    f"read_vectors [{api.mode}] {rid!r}: {arr.tolist()} (length {np.linalg.norm(arr):.4g}), expected the "
                    f"written direction at unit length {np.asarray(vector).tolist()}"
                )

    # ---- keyword search through a built index, by user and thread ---------------------------
    def _keyword_corpus(self, store: MemoryStore) -> tuple[RecordColumns, int]:
        """Past the store's ``"keyword"`` threshold (up to 3,000 records; else 300): users that
        differ in case or are absent, each with several threads (absent ones too), thread ids
        shared between users, ids in an order unrelated to scope, the last row (the newest one
        a build copies) matching the first query in scope ``u1``/``t1``."""
        threshold = store.index_thresholds().get("keyword", 0)
        n = threshold + 60 if threshold + 60 <= 3_000 else 300
        rng = np.random.default_rng(32)
        perm = rng.permutation(n)
        content, users, threads = [], [], []
        for i in range(n):
            words = [str(w) for w in rng.choice(_VOCAB, size=int(rng.integers(2, 7)))]
            if i % 89 == 5:
                words.append("quokka")
            content.append(" ".join(words))
            users.append(_USERS[(i * 7 + i // 5) % len(_USERS)])
            threads.append(_THREADS[(i // 3) % len(_THREADS)])
        content[-1], users[-1], threads[-1] = "apple cherry apple quokka", "u1", "t1"
        columns = RecordColumns(
            record_id=[f"kx{int(p):04d}" for p in perm], content=content,
            record_type=[(RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE)[i % 3] for i in range(n)],
            role=[("user", "assistant")[i % 2] if i % 3 == 2 else None for i in range(n)],
            timestamp=T0, user_id=users, thread_id=threads, agent_id=[("a1", "a2", None)[i % 3 // 2 + i % 2] for i in range(n)],
            expires_at=[None if i % 4 else (T0 if i % 8 == 0 else T0 + timedelta(microseconds=1)) for i in range(n)],
            vectors=rng.normal(size=(n, DIM)).astype(np.float32),
        )
        return columns, n

    @clause("spi.keyword-search", "spi.index-tier", "7.scope")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_index_scoped_by_user_and_thread(self, api: Api, store: MemoryStore, request: pytest.FixtureRequest) -> None:
        """Filled past the ``"keyword"`` threshold and settled: keyword search scoped to each
        user (case-distinct, absent), each user and thread (absent threads too), each thread
        alone, agents (absent too), record ids, expiry at the instant some records expire, and
        scopes nobody holds gives the reference's hits, order and BM25 scores, at ``k`` 3 and
        10,000.

        Troubleshooting: a keyword index that groups its documents by scope must key each
        range by the exact (user, thread) pair, with absent values as their own group, and a
        user's range must span all of that user's threads; scores use the statistics of every
        searchable record, never those of the scope.
        """
        columns, n = self._keyword_corpus(store)
        request.node.user_properties.append(("agentmemory_keyword_scopes", {"rows": n}))
        ref = TierReference(language=getattr(getattr(store, "analyzer", None), "language", None))
        ref.open(dimension=DIM)
        assert api.bulk_add(columns) == ref.bulk_add(columns) == n
        _settle(api)
        for name, flt in _scope_filters().items():
            for text in _QUERIES:
                for k in (3, 10_000):
                    assert_same(api.keyword_search(text, flt, k), ref.keyword_search(text, flt, k), seq=False,
                                what=f"keyword_search({text!r}, k={k}, {name}) [{api.mode}] on a settled index")
        # seq ranges through the settled index, bounded at a matching record's own seq (min_seq
        # includes it, max_seq leaves it out); seq values are each store's own, so each side's
        # bound is the seq that side gave the same record
        store_seq = {r.record_id: r.seq for r in api.query(RecordFilter())}
        ref_seq = {r.record_id: r.seq for r in ref.query(RecordFilter())}
        ranges: dict[str, Callable[[int], RecordFilter]] = {
            "from": lambda s: RecordFilter(min_seq=s), "before": lambda s: RecordFilter(max_seq=s),
            "user u1 from": lambda s: RecordFilter(user_id="u1", min_seq=s),
            "only": lambda s: RecordFilter(min_seq=s, max_seq=s + 1),
        }
        for text in _QUERIES:
            matches = sorted(ids(ref.keyword_search(text, RecordFilter(), 10_000)), key=ref_seq.__getitem__)
            if not matches:
                continue
            pivot = matches[len(matches) // 2]
            for name, make in ranges.items():
                assert_same(api.keyword_search(text, make(store_seq[pivot]), 10_000),
                            ref.keyword_search(text, make(ref_seq[pivot]), 10_000), seq=False,
                            what=f"keyword_search({text!r}, seq {name} {pivot!r}'s) [{api.mode}] on a settled index")

    @clause("spi.keyword-search", "spi.index-tier", "7.scope", "spi.write")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_index_plus_new_records_under_filters(self, api: Api, store: MemoryStore) -> None:
        """Settled past the ``"keyword"`` threshold, then records added in several scopes:
        before the next ``settle``, keyword search under scope, type and metadata-free filters
        (each also right after a vector search with the same filter) finds exactly the
        reference's records, each once, best first, every score the reference's or the one the
        last build's corpus statistics give (the SPI's allowance); after ``settle`` hits, order
        and scores are the reference's.

        Then one record changes and one goes among the new ones (checked the same way), and
        after a last single write ``settle`` reports the keyword index current.

        Troubleshooting: the records written since the last build are those *after* its
        watermark (never the build's own last row again: it would be counted twice, or scored
        twice); score them with the statistics of the whole corpus (the build's documents plus
        every new one, not only the filtered ones).
        """
        columns, n = self._keyword_corpus(store)
        ref = TierReference(language=getattr(getattr(store, "analyzer", None), "language", None))
        ref.open(dimension=DIM)
        assert api.bulk_add(columns) == ref.bulk_add(columns) == n
        _settle(api)
        built = _BuildStats(ref)
        rng = np.random.default_rng(5)
        later = [
            new(rec(f"new{i:02d}", content=" ".join(str(w) for w in rng.choice(_VOCAB, size=4)) + (" apple" if i % 4 == 0 else ""),
                    user=_USERS[i % len(_USERS)], thread=_THREADS[(i // 2) % len(_THREADS)]),
                rng.normal(size=DIM).astype(np.float32))
            for i in range(24)
        ]
        # two new records with the same text, the larger id written first: a tie among new records
        later += [new(rec(rid, content="piano invoice garden", user="u1", thread="t1"), rng.normal(size=DIM).astype(np.float32))
                  for rid in ("new-tie-b", "new-tie-a")]
        write_both(api, ref, WriteBatch(add=later[:12]))
        write_both(api, ref, WriteBatch(add=later[12:]))
        filters = {name: _scope_filters()[name] for name in (
            "all", "user u1", "user u1 thread t1", "user None", "user U1 thread None", "thread t1", "user u1 type fact")}

        def check(when: str) -> None:
            for name, flt in filters.items():
                for text in _QUERIES:
                    for with_vector_first in (False, True):
                        if with_vector_first:
                            api.vector_search(np.ones(DIM, dtype=np.float32), flt, 5)
                        where = f"keyword_search({text!r}, {name}) [{api.mode}] {when}, before settle"
                        got = api.keyword_search(text, flt, 10_000)
                        self._check_before_settle(got, ref.keyword_search(text, flt, 10_000), built, text, where)

        check("after new records")
        # records written since the build change again or go: the new ones' statistics follow
        write_both(api, ref, WriteBatch(patch=[RecordPatch("new00", content="travel travel Paris")], delete=["new04"]))
        check("after changing and deleting new records")
        _settle(api)
        for name, flt in filters.items():
            for text in _QUERIES:
                for k in (3, 10_000):
                    assert_same(api.keyword_search(text, flt, k), ref.keyword_search(text, flt, k), seq=False,
                                what=f"keyword_search({text!r}, k={k}, {name}) [{api.mode}] after new records and settle")
        # one change after a build: settle must fold it in and report the index current
        write_both(api, ref, WriteBatch(add=[new(rec("new-last", content="apple cherry"), rng.normal(size=DIM).astype(np.float32))]))
        status = _settle(api)
        threshold = store.index_thresholds().get("keyword")
        if threshold is not None and threshold <= n:
            assert status.get("keyword") is True, f"settle() [{api.mode}] after one change past the keyword threshold returned {status!r}"
        assert_same(api.keyword_search("apple cherry", k=10), ref.keyword_search("apple cherry", RecordFilter(), 10), seq=False,
                    what=f"keyword_search('apple cherry') [{api.mode}] after one change and settle")
        # one more record after that second build: the pending record is scored with the live
        # corpus or with *this* build's statistics, never with those of the build before it
        built = _BuildStats(ref)
        write_both(api, ref, WriteBatch(add=[new(rec("new-after", content="apple quokka", user="u1", thread="t1"),
                                                 rng.normal(size=DIM).astype(np.float32))]))
        for name in ("all", "user u1 thread t1"):
            self._check_before_settle(api.keyword_search("apple", filters[name], 10_000),
                                      ref.keyword_search("apple", filters[name], 10_000), built, "apple",
                                      f"keyword_search('apple', {name}) [{api.mode}] one record after a second build")

    @staticmethod
    def _check_before_settle(got: list[Hit], want: list[Hit], built: _BuildStats, text: str, where: str) -> None:
        """Each record once, the reference's matching set, best first, and each score either the
        live reference's or the last build's statistics' one."""
        got_ids = ids(got)
        assert len(got_ids) == len(set(got_ids)), f"{where}: records returned twice: {sorted(r for r, c in Counter(got_ids).items() if c > 1)[:5]}"
        assert set(got_ids) == set(ids(want)), (
            f"{where}: missing {sorted(set(ids(want)) - set(got_ids))[:5]}, unexpected {sorted(set(got_ids) - set(ids(want)))[:5]}"
        )
        assert_hits_ordered(got, by="score")
        live = {h.record.record_id: float(h.score or 0.0) for h in want}
        for hit in got:
            rid, score = hit.record.record_id, float(hit.score or 0.0)
            if not (_close(score, live[rid]) or _close(score, built.score(hit.record, text))):
                pytest.fail(
                    f"{where}: {rid!r} scored {score!r}; BM25 over the live corpus gives {live[rid]!r}, over the last "
                    f"build's corpus {built.score(hit.record, text)!r} (corpus statistics counted wrong?)"
                )
