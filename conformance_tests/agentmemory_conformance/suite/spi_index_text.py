"""SPI 1.1: ``Record.index_text``, what keyword search indexes in place of the content."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from agentmemory.bulk import RecordColumns
from agentmemory.spi import Capability, MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..support import T0, Api, assert_same, clause, ids, new, rec, reference_twin, requires, vec, write_both

_DOCS = {
    "m1": ("Yes, twice!", "8 May 2023\nuser: did you hike to the lake?"),  # the content's words left out
    "m2": ("The lake was frozen.", None),
    "m3": ("Pottery class on Sunday.", "7 May 2023\nassistant: Pottery class on Sunday."),
}


def _batch() -> WriteBatch:
    return WriteBatch(add=[
        new(rec(rid, content=content).model_copy(update={"index_text": index}), vec(1, i))
        for i, (rid, (content, index)) in enumerate(_DOCS.items())
    ])


def _one(api: Api, rid: str):  # type: ignore[no-untyped-def]
    [record] = api.query(RecordFilter(record_ids=(rid,)))
    return record


class IndexTextTests:
    """A record's ``index_text`` is stored and returned as written; keyword search scores it (not
    the content) exactly as the reference does; patches reindex; it survives a reopen."""

    @clause("spi.index-text", "spi.keyword-search")
    def test_index_text_is_returned_as_written(self, api: Api) -> None:
        """Reads return ``content`` and ``index_text`` unchanged (None stays None).

        Troubleshooting: store ``index_text`` in a nullable column beside ``content`` and
        decode it into every ``Record`` you build (query, search hits, caches)."""
        api.write(_batch())
        for rid, (content, index) in _DOCS.items():
            got = _one(api, rid)
            assert (got.content, got.index_text) == (content, index), rid
        for hit in api.vector_search(vec(1, 0), k=3):
            assert (hit.record.content, hit.record.index_text) == _DOCS[hit.record.record_id]

    @clause("spi.index-text", "spi.keyword-search")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_search_scores_the_index_text(self, api: Api, store: MemoryStore) -> None:
        """A word only in a record's ``index_text`` finds it; a word only in its content does not;
        scores equal the reference's (BM25 over ``indexed_text``), hits carry the content.

        Troubleshooting: analyse ``record.indexed_text`` (``index_text`` when set, else the
        content) for the keyword index and its length statistics."""
        ref = reference_twin(store)
        write_both(api, ref, _batch())
        assert "m1" in ids(api.keyword_search("hike", k=10))
        assert "m1" not in ids(api.keyword_search("twice", k=10))
        assert ids(api.keyword_search("pottery", k=10)) == ["m3"]
        for text in ("lake", "hike lake", "frozen", "pottery sunday", "May 2023"):
            assert_same(api.keyword_search(text, k=10), ref.keyword_search(text, RecordFilter(), 10), seq=False,
                        what=f"keyword_search({text!r}) [{api.mode}]")

    @clause("spi.index-text", "spi.patch")
    @requires(Capability.KEYWORD_SEARCH)
    def test_patches_reindex(self, api: Api, store: MemoryStore) -> None:
        """Patching ``index_text`` reindexes the record; patching ``content`` alone resets
        ``index_text`` to None, so the new content is what is indexed.

        Troubleshooting: a content patch without ``index_text`` must clear the stored one."""
        ref = reference_twin(store)
        write_both(api, ref, _batch())
        write_both(api, ref, WriteBatch(patch=[RecordPatch("m2", index_text="the glacier froze over")]))
        assert ids(api.keyword_search("glacier", k=10)) == ["m2"]
        assert "m2" not in ids(api.keyword_search("frozen", k=10))
        write_both(api, ref, WriteBatch(patch=[RecordPatch("m1", content="Only to the river.")]))
        got = _one(api, "m1")
        assert (got.content, got.index_text) == ("Only to the river.", None)
        assert ids(api.keyword_search("river", k=10)) == ["m1"]
        assert "m1" not in ids(api.keyword_search("hike", k=10))
        for text in ("glacier", "river", "lake", "hike"):
            assert_same(api.keyword_search(text, k=10), ref.keyword_search(text, RecordFilter(), 10), seq=False,
                        what=f"keyword_search({text!r}) after patches [{api.mode}]")

    @clause("spi.index-text", "spi.patch")
    def test_other_patches_keep_index_text_and_none_clears_it(self, api: Api, store: MemoryStore) -> None:
        """A patch that sets neither ``content`` nor ``index_text`` (metadata, a vector) keeps
        the stored ``index_text``; ``index_text=None`` alone clears it (the content is indexed
        again) and keeps the content. Keyword search follows, as the reference's does.

        Troubleshooting: tell "not in the patch" (``UNSET``) from an explicit None: only a new
        ``content`` or an explicit None resets the stored ``index_text``."""
        ref = reference_twin(store)
        write_both(api, ref, _batch())
        write_both(api, ref, WriteBatch(patch=[RecordPatch("m1", metadata={"seen": True}), RecordPatch("m3", vector=vec(0, 1))]))
        for rid in ("m1", "m3"):
            got = _one(api, rid)
            assert (got.content, got.index_text) == _DOCS[rid], f"{rid}: a patch without content or index_text changed them"
        write_both(api, ref, WriteBatch(patch=[RecordPatch("m3", index_text=None)]))
        got = _one(api, "m3")
        assert (got.content, got.index_text) == (_DOCS["m3"][0], None), "index_text=None must clear index_text only"
        if Capability.KEYWORD_SEARCH in store.capabilities():
            assert "m1" in ids(api.keyword_search("hike", k=10))
            assert "m3" not in ids(api.keyword_search("assistant", k=10))
            for text in ("hike", "assistant", "pottery", "lake"):
                assert_same(api.keyword_search(text, k=10), ref.keyword_search(text, RecordFilter(), 10), seq=False,
                            what=f"keyword_search({text!r}) after patches [{api.mode}]")

    @clause("spi.index-text", "spi.bulk-add")
    def test_bulk_add_takes_an_index_text_column(self, api: Api, store: MemoryStore) -> None:
        """``bulk_add`` with ``RecordColumns.index_text`` stores it like ``write`` does.

        Troubleshooting: a columnar insert must carry the ``index_text`` column too."""
        texts = [index for _, index in _DOCS.values()]
        store.bulk_add(RecordColumns(
            record_id=list(_DOCS), content=[c for c, _ in _DOCS.values()], record_type="memory", timestamp=T0,
            index_text=texts, vectors=np.stack([vec(1, i) for i in range(len(_DOCS))]),
        ))
        for rid, (content, index) in _DOCS.items():
            got = _one(api, rid)
            assert (got.content, got.index_text) == (content, index), rid
        if Capability.KEYWORD_SEARCH in store.capabilities():
            assert "m1" in ids(api.keyword_search("hike", k=10))

    @clause("spi.index-text", "9.persistence")
    @requires(Capability.PERSISTENCE)
    def test_index_text_survives_reopen(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """After close and reopen, ``index_text`` is returned and indexed as before.

        Troubleshooting: persist the column; rebuild keyword indexes from ``indexed_text``."""
        store = build_store(store_path)
        store.write(_batch())
        store.close()
        again = build_store(store_path)
        for rid, (content, index) in _DOCS.items():
            [got] = again.query(RecordFilter(record_ids=(rid,)))
            assert (got.content, got.index_text) == (content, index), rid
        if Capability.KEYWORD_SEARCH in again.capabilities():
            assert "m1" in ids(again.keyword_search("hike", RecordFilter(), 10))
