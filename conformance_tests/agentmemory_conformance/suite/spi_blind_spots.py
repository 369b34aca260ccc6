"""Behaviours an independent set of buggy backends walked through (issue #32), each checked from
the SPI's documented contract: results larger than common page and cap sizes, read isolation
while a many-part batch commits, id-keyed batched reads asked in another order than storage
order, keyword search after deletes once a keyword index is built (and queries without an
indexable word), JSON equality of objects nested in arrays, the async close path, the
store-assigned ``seq`` on every kind of hit, and small newest-first windows read again after
every kind of write (what a backend that keeps a card's windows in memory must follow)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory.bulk import RecordColumns
from agentmemory.errors import BackendUnavailable, InvalidArgument
from agentmemory.records import RecordType
from agentmemory.spi import Capability, MemoryStore, Order, RecordFilter, RecordPatch, WriteBatch

from ..support import (
    DIM,
    E1,
    E2,
    E3,
    T0,
    Api,
    assert_reads_agree,
    assert_same,
    assert_vector_hits,
    clause,
    ids,
    is_approximate,
    link,
    loop_for,
    new,
    rec,
    reference_twin,
    requires,
    vec,
    write_both,
)

LARGE = 1_300
"""Records of the large-result test: more than the 1,000 (and 1,024) that drivers, ORMs and
search engines commonly use as a page size or a result cap."""
ASK = 1_100
"""What the large-result test asks for: more than 1,000, fewer than match."""

_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf")


def _read_vectors(store: MemoryStore, mode: str, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
    if mode == "sync":
        return store.read_vectors(record_ids)
    return loop_for(store).run_until_complete(store.aread_vectors(record_ids))


def _settle(api: Api) -> dict[str, bool]:
    store = api.store
    if api.mode == "sync":
        return store.settle()
    return loop_for(store).run_until_complete(store.asettle())


def _cosine(a: Any, b: Any) -> float:
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


class BlindSpotTests:
    """Large results, read isolation, batched reads out of storage order, keyword search after
    deletes on a built index, nested-object equality in arrays, ``aclose``, and ``seq`` on hits."""

    # ---- 1. results larger than a page or a cap ----------------------------------------------
    @clause("spi.query", "spi.vector-search", "spi.keyword-search", "spi.async-parity")
    def test_results_beyond_a_thousand_hits(self, api: Api, store: MemoryStore) -> None:
        """With 1,300 matching records, asking for 1,100 (``query`` with ``limit``, vector and
        keyword search with ``k``) returns 1,100, exactly the reference's; no limit (and
        ``k=10000``) returns all 1,300; ``offset=1000`` returns the last 300.

        Troubleshooting: never cap a result at a driver's or engine's default (1,000 rows, a
        1,024 top-k, a search engine's ``max_result_window``): fetch pages until the requested
        number is reached or the matches end, in the sync and the async path.
        """
        rng = np.random.default_rng(32)
        columns = RecordColumns(
            record_id=[f"big{i:04d}" for i in range(LARGE)],
            content=[f"common {_WORDS[i % 7]} {_WORDS[(i * 3) % 7]}" for i in range(LARGE)],
            record_type=RecordType.MEMORY,
            user_id=["u1" if i % 10 else "u2" for i in range(LARGE)],
            timestamp=T0,
            vectors=rng.normal(size=(LARGE, DIM)).astype(np.float32),
        )
        ref = reference_twin(store)
        assert api.bulk_add(columns) == ref.bulk_add(columns) == LARGE
        every = list(columns.record_id)
        got = ids(api.query())
        assert got == every, f"query() returned {len(got)} of {LARGE} rows (a hidden page size?)"
        got = ids(api.query(limit=ASK))
        assert got == every[:ASK], f"query(limit={ASK}) returned {len(got)} rows, expected {ASK}"
        got = ids(api.query(order=Order.SEQ_DESC, limit=ASK))
        assert got == every[::-1][:ASK], f"query(SEQ_DESC, limit={ASK}) returned {len(got)} rows"
        got = ids(api.query(offset=1000))
        assert got == every[1000:], f"query(offset=1000) returned {len(got)} rows, expected {LARGE - 1000}"
        u1 = RecordFilter(user_id="u1")  # 1,170 of the 1,300 match
        assert_same(api.query(u1, limit=ASK), ref.query(u1, limit=ASK), seq=False, what=f"query(user u1, limit={ASK}) [{api.mode}]")
        assert api.count() == LARGE and api.count(u1) == ref.count(u1)

        probe = vec(1, 0.5, -0.25, 2)
        for flt, k in ((RecordFilter(), ASK), (u1, ASK), (RecordFilter(), 10_000)):
            want = ref.vector_search(probe, flt, k)
            hits = api.vector_search(probe, flt, k)
            label = f"vector_search(k={k}, {flt}) [{api.mode}]"
            if is_approximate(store):
                assert_vector_hits(store, hits, [(h.record.record_id, float(h.distance or 0.0)) for h in ref.vector_search(probe, flt, 10_000)], k)
            else:
                assert len(hits) == len(want), f"{label}: {len(hits)} hits, expected {len(want)} (a cap at {len(hits)}?)"
                assert_same(hits, want, seq=False, what=label)
        if Capability.KEYWORD_SEARCH in store.capabilities():
            for text, flt, k in (("common", RecordFilter(), ASK), ("common alpha", u1, ASK), ("common", RecordFilter(), 10_000)):
                want = ref.keyword_search(text, flt, k)
                hits = api.keyword_search(text, flt, k)
                label = f"keyword_search({text!r}, k={k}, {flt}) [{api.mode}]"
                assert len(hits) == len(want), f"{label}: {len(hits)} hits, expected {len(want)} (a cap at {len(hits)}?)"
                assert_same(hits, want, seq=False, what=label)

    # ---- 2. read isolation -----------------------------------------------------------------
    @clause("9.atomic", "9.concurrency")
    @requires(Capability.CONCURRENT_WRITERS)
    def test_readers_never_see_half_a_batch(self, store: MemoryStore) -> None:
        """While 20 batches commit one after another (each: 10 adds, 8 patches of content,
        metadata and vectors, 5 link adds, 4 record deletes taking their links along), readers
        on other threads (``query``, ``count``, ``links``, vector search on exact backends,
        sync and async) only ever see the state before or after a whole batch.

        Troubleshooting: apply a batch in one transaction, readers must read from one snapshot
        (one statement, or a read transaction at snapshot isolation); never commit the sections
        of a batch (adds, patches, links, deletes) one by one, nor let reads see uncommitted
        rows.
        """
        rounds = 20
        seed = [new(rec(f"s{i:02d}", content=f"seed {i}", metadata={"round": -1}), vec(1, i % 5, 1)) for i in range(30)]
        store.write(WriteBatch(add=seed, add_links=[link(f"sl{i:02d}", f"s{i:02d}", f"s{i + 1:02d}") for i in range(0, 28, 2)]))
        alive = [f"s{i:02d}" for i in range(30)]
        batches: list[WriteBatch] = []
        for r in range(rounds):
            added = [f"r{r:02d}-{i}" for i in range(10)]
            patched, doomed = alive[:8], alive[8:12]
            batches.append(WriteBatch(
                add=[new(rec(rid, content=f"round {r}", metadata={"round": r}), vec(1, r % 3, i)) for i, rid in enumerate(added)],
                patch=[RecordPatch(rid, content=f"patched in {r}", metadata={"round": r}, vector=vec(r % 2, 1, 1)) for rid in patched],
                add_links=[link(f"rl{r:02d}-{i}", added[i], added[i + 1]) for i in range(0, 10, 2)],
                delete=doomed,
            ))
            alive = [rid for rid in alive[12:] + patched + added]
        exact = not is_approximate(store)  # vector search must read one state too

        def state() -> tuple[Any, ...]:
            rows = store.query(RecordFilter())
            return (
                tuple((r.record_id, r.content, json.dumps(r.metadata, sort_keys=True)) for r in rows),
                len(rows),
                tuple(ids(store.links())),
                frozenset(ids(store.vector_search(E1, RecordFilter(), 10_000))) if exact else None,
            )

        legit = [state()]
        seen: list[tuple[str, Any]] = []
        errors: list[BaseException] = []
        done = threading.Event()

        def writer() -> None:
            try:
                for batch in batches:
                    store.write(batch)
                    legit.append(state())
                    time.sleep(0.001)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                done.set()

        def reader(kind: str) -> None:
            try:
                while not done.is_set():
                    if kind == "query":
                        seen.append(("query", tuple((r.record_id, r.content, json.dumps(r.metadata, sort_keys=True)) for r in store.query(RecordFilter()))))
                    elif kind == "count":
                        seen.append(("count", store.count(RecordFilter())))
                        seen.append(("links", tuple(ids(store.links()))))
                    elif kind == "vector" and exact:
                        seen.append(("vector", frozenset(ids(store.vector_search(E1, RecordFilter(), 10_000)))))
                    elif kind == "async":
                        rows = loop_for(store).run_until_complete(store.aquery(RecordFilter()))
                        seen.append(("query", tuple((r.record_id, r.content, json.dumps(r.metadata, sort_keys=True)) for r in rows)))
                    else:
                        return
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader, args=(kind,)) for kind in ("query", "count", "vector", "async")]
        threads.append(threading.Thread(target=writer))
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        assert not errors, errors[:3]
        assert len(legit) == rounds + 1
        index = {"query": 0, "count": 1, "links": 2, "vector": 3}
        allowed = {kind: {s[i] for s in legit} for kind, i in index.items()}
        torn = [(kind, value) for kind, value in seen if value not in allowed[kind]]
        if torn:
            kind, value = torn[0]
            shown = value if kind in ("count",) else (sorted(value)[:8] if isinstance(value, frozenset) else value[-12:])
            pytest.fail(
                f"{len(torn)} of {len(seen)} concurrent reads saw a state that is neither before nor after a batch; "
                f"the first: {kind} -> {shown!r} (legitimate {kind} states: "
                f"{sorted(allowed['count']) if kind == 'count' else len(allowed[kind])})"
            )

    # ---- 3. id-keyed batched reads out of storage order -------------------------------------
    @clause("spi.read-vectors", "spi.query")
    @requires(Capability.READ_VECTORS)
    def test_read_vectors_in_any_order(self, api: Api, store: MemoryStore) -> None:
        """``read_vectors`` keys each vector by its own id whatever the order of the ids asked:
        reversed, sorted, shuffled, with duplicates, unknown ids, ids without a vector and
        deleted ids (those are absent), over 64 ids at once; ``query(record_ids=...)`` likewise
        returns each id's own record, in seq order.

        Troubleshooting: a ``WHERE id IN (...)`` (or ``= ANY``) returns rows in storage order:
        key each vector by the id of its row, never zip the rows with the ids as asked.
        """
        rng = np.random.default_rng(7)
        n = 150
        order = [int(i) for i in rng.permutation(n)]  # storage order: neither id order nor request order
        written = {f"rv{i:03d}": rng.normal(size=DIM).astype(np.float32) for i in order}
        batch = [new(rec(rid, content=f"text of {rid}"), v) for rid, v in written.items()]
        batch += [new(rec(f"nv{i}", content=f"text of nv{i}"), None) for i in range(3)]
        for start in range(0, len(batch), 40):
            api.write(WriteBatch(add=batch[start:start + 40]))
        gone = [f"rv{i:03d}" for i in (3, 77, 140)]
        api.write(WriteBatch(delete=gone))
        for rid in gone:
            del written[rid]
        stored = [r.record_id for r in api.query()]
        shuffled = list(rng.permutation(stored + gone + ["nope", "rv999"]))
        asks = {
            "reversed storage order": stored[::-1],
            "sorted by id": sorted(stored),
            "shuffled with unknown and deleted ids": [str(x) for x in shuffled],
            "with duplicates": [str(x) for x in shuffled[:40]] + stored[::-3] + [str(x) for x in shuffled[:40]],
            "one id": [stored[-1]],
            "the last two, newest first": stored[:-3:-1],
        }
        for name, asked in asks.items():
            got = _read_vectors(store, api.mode, asked)
            expected = {rid for rid in asked if rid in written}
            assert set(got) == expected, (
                f"read_vectors({name}) [{api.mode}]: missing {sorted(expected - set(got))[:5]}, "
                f"unexpected {sorted(set(got) - expected)[:5]}"
            )
            for rid, value in got.items():
                arr = np.asarray(value)
                assert arr.shape == (DIM,), f"read_vectors({name}): {rid} has shape {arr.shape}"
                assert arr.dtype == np.float32, f"read_vectors({name}): {rid} is {arr.dtype}, expected float32"
                cos = _cosine(arr, written[rid])
                assert cos > 0.99999, (
                    f"read_vectors({name}) [{api.mode}]: {rid!r} came back with another record's vector "
                    f"(cos {cos:.4f} to its own): values keyed in storage order?"
                )
        for name in ("reversed storage order", "shuffled with unknown and deleted ids", "with duplicates"):
            rows = api.query(RecordFilter(record_ids=tuple(asks[name])))
            want = [rid for rid in stored if rid in set(asks[name])]
            assert ids(rows) == want, f"query(record_ids={name}) [{api.mode}]: rows not in seq order or not each id once"
            wrong = [r.record_id for r in rows if r.content != f"text of {r.record_id}"]
            assert not wrong, f"query(record_ids={name}) [{api.mode}]: {wrong[:5]} carry another record's fields"

    # ---- 4. keyword search after deletes on a built index, and queries without a term ------
    @clause("spi.keyword-search", "spi.index-tier")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_search_after_deletes_on_a_built_index(self, api: Api, store: MemoryStore, request: pytest.FixtureRequest) -> None:
        """The store filled past its ``"keyword"`` threshold (up to 3,000 records) and settled;
        then records are deleted (every one holding a rare word, some top hits, some others) and
        one deleted id is added again with other words. Deleted records never come back: the
        matching sets equal the reference's before ``settle`` (the index may score with its last
        statistics until then) and hits, order and scores equal it after ``settle``.

        Troubleshooting: a keyword snapshot or index built before a delete must not answer for
        the deleted record (filter the hits through the live rows, or tombstone them); after
        ``settle`` the corpus statistics (N, df, average length) count the live records only.
        """
        threshold = store.index_thresholds().get("keyword", 0)
        n = threshold + 40 if threshold + 40 <= 3_000 else 300
        request.node.user_properties.append(("agentmemory_blind_spot_keyword", {"rows": n, "keyword_threshold": threshold}))
        rng = np.random.default_rng(4)
        vocab = ("apple", "banana", "cherry", "invoice", "running", "garden", "piano", "report", "travel", "Paris")
        content = []
        for i in range(n):
            words = [str(w) for w in rng.choice(vocab, size=int(rng.integers(2, 7)))]
            if i % 97 == 5:
                words.append("quokka")
            content.append(" ".join(words))
        columns = RecordColumns(
            record_id=[f"kw{i:04d}" for i in range(n)], content=content, record_type=RecordType.MEMORY,
            timestamp=T0, user_id=["u1" if i % 3 else "u2" for i in range(n)],
            vectors=rng.normal(size=(n, DIM)).astype(np.float32),
        )
        ref = reference_twin(store)
        assert api.bulk_add(columns) == ref.bulk_add(columns) == n
        _settle(api)
        rare = [rid for rid, text in zip(columns.record_id, content) if "quokka" in text]
        assert ids(api.keyword_search("quokka", k=50)) == ids(ref.keyword_search("quokka", RecordFilter(), 50))
        top = ids(ref.keyword_search("apple cherry", RecordFilter(), 5))
        doomed = list(dict.fromkeys(rare + top + [f"kw{i:04d}" for i in range(0, n, 11)]))
        write_both(api, ref, WriteBatch(delete=doomed))
        write_both(api, ref, WriteBatch(add=[new(rec(rare[0], content="banana split"), vec(1, 1))]))
        queries = ("quokka", "apple cherry", "banana", "running garden", "Paris travel report", "piano")
        for flt in (RecordFilter(), RecordFilter(user_id="u2")):
            for text in queries:
                where = f"keyword_search({text!r}, {flt}) [{api.mode}] after deletes, before settle"
                every = api.keyword_search(text, flt, 10_000)
                back = sorted(set(ids(every)) & set(doomed) - {rare[0]})
                assert not back, f"{where}: deleted records came back: {back[:5]}"
                want = ref.keyword_search(text, flt, 10_000)
                assert set(ids(every)) == set(ids(want)), (
                    f"{where}: missing {sorted(set(ids(want)) - set(ids(every)))[:5]}, "
                    f"unexpected {sorted(set(ids(every)) - set(ids(want)))[:5]}"
                )
        assert ids(api.keyword_search("quokka", k=10)) == []
        _settle(api)
        for flt in (RecordFilter(), RecordFilter(user_id="u2")):
            for text in queries:
                for k in (10, 10_000):
                    assert_same(api.keyword_search(text, flt, k), ref.keyword_search(text, flt, k), seq=False,
                                what=f"keyword_search({text!r}, k={k}, {flt}) [{api.mode}] after deletes and settle")

    @clause("spi.keyword-search", "spi.errors")
    @requires(Capability.KEYWORD_SEARCH)
    def test_queries_without_an_indexable_word(self, api: Api, store: MemoryStore) -> None:
        """A query of stop words only (``"the of and"``), punctuation only (``"!!!"``,
        ``"?! -- ..."``) or both finds nothing: an empty list, not an error, on a fresh store
        and after ``settle``. A blank query (``""``, ``"   "``) is refused with
        ``InvalidArgument`` (the SPI's rule), never a backend error.

        Troubleshooting: analyse the query with ``Analyzer.query_terms``; when it yields no term,
        return ``[]`` without asking the engine (an empty ``MATCH ''`` or ``to_tsquery('')`` is a
        syntax error in many engines).
        """
        empty = ("the of and", "!!!", "?! -- ...", "The, of & and!", "(*)", '""', "'", "AND OR NOT")
        for text in empty:
            assert api.keyword_search(text, k=10) == [], f"keyword_search({text!r}) on an empty store [{api.mode}]"
        ref = reference_twin(store)
        write_both(api, ref, WriteBatch(add=[
            new(rec("w1", content="the apple and the tree"), E1), new(rec("w2", content="of mice and men!!!"), E2),
            new(rec("w3", content="AND OR NOT"), E3),
        ]))
        _settle(api)
        for text in empty:
            want = ref.keyword_search(text, RecordFilter(), 10)
            got = api.keyword_search(text, k=10)
            assert_same(got, want, seq=False, what=f"keyword_search({text!r}) [{api.mode}]")
            if not ref.analyzer.query_terms(text):  # stop words (English) or no word at all
                assert got == [], f"keyword_search({text!r}) [{api.mode}] found {ids(got)}"
        for blank in ("", "   ", "\t\n"):
            with pytest.raises(InvalidArgument):
                api.keyword_search(blank, k=10)
        assert ids(api.keyword_search("apple", k=10)) == ["w1"]

    # ---- 5. JSON equality of objects nested in arrays ----------------------------------------
    @clause("7.metadata-filter", "2.metadata")
    def test_objects_nested_in_arrays_compare_without_key_order(self, api: Api, store: MemoryStore) -> None:
        """Metadata equality and ``$array_contains`` / ``$array_contains_any`` / ``$not`` over
        objects inside arrays: ``{"x": 1, "y": 2}`` equals ``{"y": 2, "x": 1}`` (stored or asked
        either way, at any depth), numbers compare as numbers (``2`` equals ``2.0``), ``true`` is
        not ``1``, an extra or a missing key makes objects unequal; ``query``, ``count`` and vector search
        select exactly what the reference does.

        Troubleshooting: compare JSON objects as key sets with equal values (use
        ``agentmemory.filters.metadata_matches_json`` as a UDF), never as serialized text or with
        a JSON containment operator that ignores extra keys or array length.
        """
        docs: dict[str, dict[str, Any]] = {
            "n0": {},
            "n1": {"a": [{"x": 1, "y": 2}]},
            "n2": {"a": [{"y": 2, "x": 1}]},
            "n3": {"a": [{"x": 1, "y": 3}]},
            "n4": {"a": [{"x": 1}]},
            "n5": {"a": [{"x": 1, "y": 2, "z": 0}]},
            "n6": {"a": {"y": 2, "x": 1}},
            "n7": {"a": [{"p": {"q": 1, "r": [{"s": 1, "t": 2}]}}, 5]},
            "n8": {"a": [7, {"y": 2.0, "x": 1}]},
            "n9": {"a": [{"x": True, "y": 2}]},
        }
        ref = reference_twin(store)
        write_both(api, ref, WriteBatch(add=[new(rec(rid, metadata=m), vec(1, i)) for i, (rid, m) in enumerate(docs.items())]))
        cases: list[tuple[dict[str, Any], list[str]]] = [
            ({"a": [{"x": 1, "y": 2}]}, ["n1", "n2"]),
            ({"a": [{"y": 2, "x": 1}]}, ["n1", "n2"]),
            ({"a": [{"y": 2.0, "x": 1.0}]}, ["n1", "n2"]),
            ({"a": [7, {"x": 1, "y": 2}]}, ["n8"]),
            ({"a": {"$array_contains": {"x": 1, "y": 2}}}, ["n1", "n2", "n8"]),
            ({"a": {"$array_contains": {"y": 2, "x": 1}}}, ["n1", "n2", "n8"]),
            ({"a": {"$array_contains": [{"y": 2, "x": 1}, 7]}}, ["n8"]),
            ({"a": {"$array_contains": {"p": {"r": [{"t": 2, "s": 1}], "q": 1}}}}, ["n7"]),
            ({"a": {"$array_contains_any": [{"y": 3, "x": 1}, {"x": 1}]}}, ["n3", "n4"]),
            ({"a": {"$array_contains_any": [{"y": 2, "x": True}]}}, ["n9"]),
            ({"a": {"$not": {"$array_contains": {"y": 2, "x": 1}}}}, ["n0", "n3", "n4", "n5", "n6", "n7", "n9"]),
            ({"a": {"y": 2, "x": 1}}, ["n6"]),
        ]
        for flt, want in cases:
            f = RecordFilter(metadata_filter=flt)
            assert ids(api.query(f)) == want, f"metadata_filter {flt} [{api.mode}]: got {ids(api.query(f))}, expected {want}"
            assert_reads_agree(api, ref, f, vector=E1, k=20, what=f"metadata_filter {flt}")
        for rid, meta in docs.items():
            [got] = api.query(RecordFilter(record_ids=(rid,)))
            assert got.metadata == meta, f"{rid}: metadata read back as {got.metadata!r}, expected {meta!r}"

    # ---- 6. the async close path ----------------------------------------------------------
    @clause("spi.lifecycle", "spi.async-parity")
    def test_aclose_really_closes(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """After ``await store.aclose()`` the store is closed: ``is_open`` is False, every sync
        and async operation raises ``BackendUnavailable``, a second ``aclose`` (and ``close``) is
        harmless, and (``PERSISTENCE``) a new instance on the same storage opens and reads
        everything written.

        Troubleshooting: the default ``aclose`` runs ``close`` in a thread; a native async
        driver's ``aclose`` must also release the connections (pools, files, locks) and mark the
        store closed, exactly as ``close`` does.
        """
        store = build_store(store_path)
        loop = loop_for(store)
        store.write(WriteBatch(add=[new(rec("c1", content="closing time"), E1), new(rec("c2"), E2)], add_links=[link("cl", "c1", "c2")]))
        loop.run_until_complete(store.aclose())
        assert not store.is_open, "is_open is still True after aclose()"
        calls: dict[str, Callable[[], Any]] = {
            "query": lambda: store.query(RecordFilter()),
            "count": lambda: store.count(RecordFilter()),
            "links": lambda: store.links(),
            "write": lambda: store.write(WriteBatch(add=[new(rec("c3"))])),
            "vector_search": lambda: store.vector_search(E1, RecordFilter(), 3),
            "settle": lambda: store.settle(),
            "aquery": lambda: loop.run_until_complete(store.aquery(RecordFilter())),
            "acount": lambda: loop.run_until_complete(store.acount(RecordFilter())),
            "alinks": lambda: loop.run_until_complete(store.alinks()),
            "awrite": lambda: loop.run_until_complete(store.awrite(WriteBatch(add=[new(rec("c4"))]))),
            "avector_search": lambda: loop.run_until_complete(store.avector_search(E1, RecordFilter(), 3)),
        }
        if Capability.KEYWORD_SEARCH in store.capabilities():
            calls["keyword_search"] = lambda: store.keyword_search("closing", RecordFilter(), 3)
            calls["akeyword_search"] = lambda: loop.run_until_complete(store.akeyword_search("closing", RecordFilter(), 3))
        if Capability.READ_VECTORS in store.capabilities():
            calls["read_vectors"] = lambda: store.read_vectors(["c1"])
        for name, call in calls.items():
            with pytest.raises(BackendUnavailable):
                call()
                pytest.fail(f"{name} succeeded on a store closed with aclose()")
        loop.run_until_complete(store.aclose())
        store.close()
        if Capability.PERSISTENCE in store.capabilities():
            again = build_store(store_path)
            assert ids(again.query(RecordFilter())) == ["c1", "c2"]
            assert ids(again.links()) == ["cl"]

    # ---- 7. store-assigned seq on every hit and after deletes -------------------------------
    @clause("spi.write", "spi.query", "spi.vector-search", "spi.keyword-search", "spi.bulk_add")
    def test_seq_on_every_hit_and_after_deletes(self, api: Api, store: MemoryStore) -> None:
        """The ``seq`` a record got at ``write`` is the one ``query``, vector search and keyword
        search hits carry (an ``int``), also after patches; seq ranges (``min_seq`` inclusive,
        ``max_seq`` exclusive) select the same records in every read; after deleting the newest
        and other records, later ``write`` and ``bulk_add`` records get larger seq values than
        any ever assigned (never reused), increasing in batch order (``bulk_add``: consecutive).

        Troubleshooting: return ``seq`` from the record's row in every read path (search paths
        often build records from an index or a vector table that lacks it); keep the seq counter
        in storage (a sequence), not ``max(seq) + 1``.
        """
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        first = api.write(WriteBatch(add=[new(rec(f"q{i}", content=f"shared word{i} text"), vec(1, i, i % 2)) for i in range(6)]))
        seq = {r.record_id: r.seq for r in first}
        ever = set(seq.values())

        def check_hits(when: str) -> None:
            queried = {r.record_id: r.seq for r in api.query()}
            assert queried == seq, f"query() seq values {queried} differ from those write() returned {seq} ({when})"
            reads: list[tuple[str, list[Any]]] = [("vector_search", api.vector_search(E1, k=50)),
                                                  ("vector_search(E2)", api.vector_search(E2, k=50))]
            if keyword:
                reads += [("keyword_search", api.keyword_search("shared text", k=50))]
            for name, hits in reads:
                assert hits, f"{name} found nothing ({when})"
                for h in hits:
                    got = h.record.seq
                    assert type(got) is int and got == seq[h.record.record_id], (
                        f"{name} [{api.mode}] hit {h.record.record_id!r} carries seq {got!r}, query() says "
                        f"{seq[h.record.record_id]} ({when})"
                    )

        check_hits("after the first write")
        api.write(WriteBatch(patch=[RecordPatch("q1", content="shared text patched", vector=E2), RecordPatch("q4", metadata={"p": 1})]))
        check_hits("after patches")
        newest = max(seq, key=seq.__getitem__)
        api.write(WriteBatch(delete=[newest, "q2"]))
        for rid in (newest, "q2"):
            del seq[rid]
        check_hits("after deleting the newest record")
        second = api.write(WriteBatch(add=[new(rec(f"q{i}", content=f"shared again {i}"), vec(1, 1, i)) for i in (7, 8, 9)]))
        later = [r.seq for r in second]
        assert all(type(s) is int for s in later), later
        assert later == sorted(later) and len(set(later)) == 3, f"seq must increase in batch order: {later}"
        assert min(later) > max(ever), f"seq {later} reuses or goes below seq values assigned before ({sorted(ever)})"
        ever |= set(later)
        seq.update({r.record_id: r.seq for r in second})
        check_hits("after adding after deletes")
        api.write(WriteBatch(delete=["q9"]))
        del seq["q9"]
        assert api.bulk_add(RecordColumns(
            record_id=["b1", "b2", "b3", "b4"], content=["shared bulk one", "shared bulk two", "shared bulk three", "shared bulk four"],
            record_type="memory", timestamp=T0, vectors=np.stack([vec(1, 2, 3), vec(3, 2, 1), vec(1, -1), vec(0, 1, -1)]),
        )) == 4
        bulk = {r.record_id: r.seq for r in api.query(RecordFilter(record_ids=("b1", "b2", "b3", "b4")))}
        values = [bulk[b] for b in ("b1", "b2", "b3", "b4")]
        assert min(values) > max(ever), f"bulk_add seq {values} reuses seq values assigned before ({sorted(ever)})"
        assert values == list(range(values[0], values[0] + 4)), f"bulk_add seq must be consecutive in row order: {values}"
        seq.update(bulk)
        check_hits("after bulk_add")
        ordered = sorted(seq, key=seq.__getitem__)
        lo, hi = seq[ordered[2]], seq[ordered[-2]]
        rng_flt = RecordFilter(min_seq=lo, max_seq=hi)
        want = [rid for rid in ordered if lo <= seq[rid] < hi]
        assert ids(api.query(rng_flt)) == want, f"query(min_seq={lo}, max_seq={hi}) [{api.mode}]"
        assert api.count(rng_flt) == len(want)
        got = ids(api.vector_search(E1, rng_flt, k=50))
        assert set(got) <= set(want) and (set(got) == set(want) or is_approximate(store)), (
            f"vector_search(min_seq={lo}, max_seq={hi}) [{api.mode}]: {sorted(got)}, expected {sorted(want)}"
        )
        if keyword:
            got = ids(api.keyword_search("shared", rng_flt, k=50))
            assert sorted(got) == sorted(want), f"keyword_search(min_seq={lo}, max_seq={hi}) [{api.mode}]: {sorted(got)}, expected {sorted(want)}"


    # ---- newest-first windows read again after every kind of write --------------------------
    @clause("spi.query", "spi.write", "spi.async-parity")
    def test_newest_windows_follow_every_write(self, api: Api, store: MemoryStore) -> None:
        """A context card asks the same small newest-first windows every turn (a thread's newest
        messages, its newest valid memories, a user's): read once, then again after each kind of
        write (an add, a status change out of and back into the window's scope, a content patch,
        a delete, an expiry), they return exactly what the reference returns at that moment.

        Troubleshooting: a backend that keeps such a window in memory must bring it along with
        every committed write, or drop it: a record whose status patch brings it back into scope
        belongs in its place by ``seq`` (also when the window did not hold it), one patched out
        must leave, the next older row must take the place of one removed, and expiry is judged
        at each query's ``alive_at``.
        """
        from agentmemory.records import MEMORY_TYPES, RecordStatus

        ref = reference_twin(store)
        kinds = (RecordType.MESSAGE, RecordType.FACT, RecordType.MESSAGE, RecordType.PREFERENCE)
        records = [rec(f"w{i:02d}", type=kinds[i % 4], user="wu", thread="wt" if i % 5 else "wt2",
                       content=f"turn {i}", ts=T0) for i in range(24)]
        write_both(api, ref, WriteBatch(add=[new(r) for r in records]))
        valid = frozenset({RecordStatus.VALID})
        windows = {
            "thread messages": RecordFilter(user_id="wu", thread_id="wt", record_types=frozenset({RecordType.MESSAGE}), statuses=valid),
            "thread memories": RecordFilter(user_id="wu", thread_id="wt", record_types=frozenset(MEMORY_TYPES), statuses=valid),
            "user memories": RecordFilter(user_id="wu", record_types=frozenset(MEMORY_TYPES), statuses=valid),
            "thread, any status": RecordFilter(thread_id="wt"),
            "user, alive later": RecordFilter(user_id="wu", alive_at=T0 + timedelta(days=2)),
        }

        def check(after: str) -> None:
            for name, flt in windows.items():
                for limit, offset in ((3, 0), (5, 1), (20, 0)):
                    got = api.query(flt, order=Order.SEQ_DESC, limit=limit, offset=offset)
                    want = ref.query(flt, order=Order.SEQ_DESC, limit=limit, offset=offset)
                    assert ids(got) == ids(want), f"{name}, limit={limit}, offset={offset}, after {after} [{api.mode}]"
                    assert_same(got, want, seq=False, what=f"{name} after {after}")

        check("the first add")  # each window read (and perhaps kept) once before the writes
        memories = [r.record_id for r in records if r.record_type is not RecordType.MESSAGE and r.thread_id == "wt"]
        steps: list[tuple[str, WriteBatch]] = [
            ("an add", WriteBatch(add=[new(rec("w90", type=RecordType.FACT, user="wu", thread="wt", content="newest fact", ts=T0))])),
            ("the newest memory invalidated", WriteBatch(patch=[RecordPatch("w90", status=RecordStatus.INVALID)])),
            ("an old memory invalidated", WriteBatch(patch=[RecordPatch(memories[0], status=RecordStatus.INVALID)])),
            ("the old memory valid again", WriteBatch(patch=[RecordPatch(memories[0], status=RecordStatus.VALID)])),
            ("the newest memory valid again", WriteBatch(patch=[RecordPatch("w90", status=RecordStatus.VALID)])),
            ("a held memory's content patched", WriteBatch(patch=[RecordPatch(memories[-1], content="patched fact")])),
            ("a held memory deleted", WriteBatch(delete=[memories[-2]])),
            ("a message given an expiry", WriteBatch(patch=[RecordPatch("w23", expires_at=T0 + timedelta(days=1))])),
            ("messages added", WriteBatch(add=[new(rec(f"w9{i}", type=RecordType.MESSAGE, user="wu", thread="wt", content=f"late {i}", ts=T0)) for i in range(1, 4)])),
        ]
        for after, batch in steps:
            write_both(api, ref, batch)
            check(after)


# ``-k BlindSpotTests`` (or ``-k BlindSpot``) selects these tests in any class that inherits them
# (``BackendConformance``, the zero-code run): pytest counts a test function's attributes among
# its keywords.
for _name, _func in list(vars(BlindSpotTests).items()):
    if _name.startswith("test_"):
        _func.BlindSpotTests = True
