"""What searches read at one write clock and a write brings along to the next
(``DuckDBStore._carried_memo``): the keyword delta (its rows, their words, their document
frequencies), the stale ids and the rows searches read. After every kind of write, keyword and
vector search give what the same file reopened gives (everything read and counted afresh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import NotFound
from agentmemory.records import RecordStatus
from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

DIM = 4
QUERIES = ("refund tokyo", "maya csv late", "invoice bob export step order", "quiet words")


def _searches(store: DuckDBStore) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    out: dict[str, Any] = {}
    for flt in (RecordFilter(), RecordFilter(user_id="u1")):
        for q in QUERIES:
            out[f"kw {q} {flt.user_id}"] = [(x.record, x.score) for x in store.keyword_search(q, flt, 8)]
        for i in range(3):
            v = rng.normal(size=DIM).astype(np.float32)
            out[f"vec {i} {flt.user_id}"] = [(x.record, x.distance) for x in store.vector_search(v, flt, 8)]
    return out


def _writes(h: Any) -> list[tuple[str, WriteBatch, bool]]:
    """(name, batch, whether the keyword delta is carried across it)."""
    vec = np.ones(DIM, dtype=np.float32)
    return [
        ("adds", WriteBatch(add=[h.new(f"n{i}", vec * (i + 1), f"refund tokyo late {i}", user_id="u1") for i in range(3)]), True),
        ("content", WriteBatch(patch=[RecordPatch("n1", content="maya maya csv"), RecordPatch("d03", content="invoice bob")]), True),
        ("index_text", WriteBatch(patch=[RecordPatch("n0", index_text="quiet words"), RecordPatch("d05", index_text="export step")]), True),
        ("same words, in the delta", WriteBatch(patch=[RecordPatch("n2", metadata={"k": 1}, status=RecordStatus.INVALID)]), True),
        ("same words, a row read by id", WriteBatch(patch=[RecordPatch("d07", metadata={"k": 2})]), True),
        ("same words, nothing at hand", WriteBatch(patch=[RecordPatch("d08", metadata={"k": 3})]), False),
        ("index_text reset, read by id", WriteBatch(patch=[RecordPatch("d05", index_text=None)]), True),
        ("vector taken and given", WriteBatch(patch=[RecordPatch("n0", vector=None), RecordPatch("plain", vector=vec)]), True),
        ("add, patch and delete in one", WriteBatch(
            add=[h.new("n9", vec, "late late invoice", user_id="u1")],
            patch=[RecordPatch("n9", metadata={"x": 1}), RecordPatch("d09", content="tokyo")], delete=["n1", "d10"]), True),
        ("many adds", WriteBatch(add=[h.new(f"m{i}", vec, f"csv maya {i}", user_id="u2") for i in range(12)]), False),
        ("deletes", WriteBatch(delete=["n2", "m3", "d11"]), True),
    ]


@pytest.mark.parametrize("upto", range(1, 12))
def test_searches_after_a_write_equal_a_fresh_store(db_path: Path, h: Any, upto: int) -> None:
    """The writes up to ``upto`` in turn, searches before each (so there is something to carry)
    and after it; after the last one, the answers (records, scores, distances) equal those of
    the file reopened; the keyword delta was carried where the write says it can be, and a
    failed batch between changes nothing."""
    rng = np.random.default_rng(5)
    words = ["order", "refund", "late", "maya", "invoice", "csv", "step", "bob", "export", "tokyo"]
    store = h.open_store(db_path, auto_index=False, fts_min_rows=5, vector_index_min_rows=5)
    store.write(WriteBatch(add=[
        *(h.new(f"d{i:02d}", rng.normal(size=DIM), " ".join(rng.choice(words, 4)), user_id="u1" if i % 2 else "u2") for i in range(20)),
        h.new("plain", None, "order refund"),
    ]))
    store.build_indexes()
    try:
        store.write(WriteBatch(add=[h.new("pre", np.ones(DIM), "order late", user_id="u1")]))  # a delta to keep
        store.query(RecordFilter(record_ids=("d07", "d05", "plain")))  # kept by id: their rows are at hand
        for name, batch, carried in _writes(h)[:upto]:
            _searches(store)
            watermark = store._fts.watermark if store._fts is not None else 0
            with pytest.raises(NotFound):
                store.write(WriteBatch(add=[h.new("lost", None, "tokyo")], patch=[RecordPatch("missing", content="x")]))
            store.write(batch)
            assert (("delta", watermark) in store._memo) is carried, name
        got = _searches(store)
        store.close()
        store = h.open_store(db_path, auto_index=False)
        assert store._fts is not None and store._fts.rows == 20  # the same snapshot, counted afresh
        assert _searches(store) == got
    finally:
        store.close()
