"""Warm restarts (#31): the keyword postings' base is persisted and a reopened store loads it
(no rebuild), caught up with the commits after it; a stale, damaged or foreign file is refused
and the postings rebuilt, with the same results as a fresh build."""

from __future__ import annotations

from pathlib import Path

from agentmemory_hnswlib import HnswlibStore
from agentmemory_hnswlib._postings import FILE
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

WORDS = ["apple", "banana", "cherry", "damson", "elder"]


def _fill(path: Path) -> dict[str, list[tuple[str, float]]]:
    store = HnswlibStore(path)
    store.open(dimension=4)
    records = [make_record(f"r{i:03d}", user=f"u{i % 3}", thread=f"t{i % 5}",
                           content=f"{WORDS[i % 5]} {WORDS[(i * 7) % 5]} note {i}") for i in range(200)]
    add_all(store, records, clustered(200, 4, seed=5))
    store.settle()
    assert store.postings_builds == 1 and (path / FILE).exists()
    out = _answers(store)
    store.close()
    return out


def _answers(store: HnswlibStore) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for flt_name, flt in (("all", RecordFilter()), ("u1", RecordFilter(user_id="u1")),
                          ("u2t3", RecordFilter(user_id="u2", thread_id="t3"))):
        for word in WORDS:
            out[f"{flt_name}:{word}"] = [(h.record.record_id, round(h.score or 0.0, 9))
                                         for h in store.keyword_search(f"{word} note", flt, 20)]
    return out


def _reopen(path: Path) -> HnswlibStore:
    store = HnswlibStore(path)
    store.open(dimension=4)
    return store


def test_reopen_loads_the_persisted_postings(tmp_path: Path) -> None:
    before = _fill(tmp_path / "s")
    store = _reopen(tmp_path / "s")
    try:
        assert store.postings_source == "loaded"
        assert _answers(store) == before
        assert store.postings_builds == 0
    finally:
        store.close()


def test_commits_after_the_persisted_base_are_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "s"
    _fill(path)
    saved = (path / FILE).read_bytes()
    store = _reopen(path)
    store.write(WriteBatch(patch=[RecordPatch(record_id="r001", content="elder elder note")], delete=["r002"]))
    add_all(store, [make_record("new", user="u1", thread="t1", content="cherry note fresh")], clustered(1, 4, seed=9))
    store.close()
    (path / FILE).write_bytes(saved)  # the base as of before those commits (close saved nothing new anyway)
    store = _reopen(path)
    try:
        assert store.postings_source == "loaded" and store.postings_builds == 0
        got = _answers(store)
        store.settle()  # a fresh base from the records
        assert store.postings_builds == 1
        assert _answers(store) == got
        assert any(rid == "new" for rid, _ in got["u1:cherry"])
        assert all(rid != "r002" for rows in got.values() for rid, _ in rows)
    finally:
        store.close()


def test_damaged_or_foreign_postings_are_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "s"
    before = _fill(path)
    data = (path / FILE).read_bytes()
    middle = len(data) // 2
    other = tmp_path / "other"
    _fill(other)
    for damaged in (data[:middle], data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1:],
                    b"not a zip", (other / FILE).read_bytes()):
        (path / FILE).write_bytes(damaged)
        store = _reopen(path)
        try:
            assert store.postings_source is None
            assert _answers(store) == before
            assert store.postings_builds == 1
        finally:
            store.close()
        assert (path / FILE).read_bytes() != damaged  # close persisted the rebuilt base
