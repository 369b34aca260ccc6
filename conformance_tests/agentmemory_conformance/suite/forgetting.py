"""Deletion that forgets (SPEC §3; users ask for it, e.g. under the GDPR's right to erasure):
once a message, a memory or a whole thread is deleted, no read path returns its text.

The core derives the deletes (links with the record, the next turn's index text re-indexed in
the same batch, a thread's records by scope), but they only forget if the backend drops the
record from every structure it keeps: rows, vector index, keyword index and its statistics
snapshots, caches, link tables. Each deleted text carries a unique marker word; every output of
every read path is searched for it, before the delete (to prove the path did show it) and
after (it must not)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from agentmemory.records import RecordStatus, jsonable
from agentmemory.spi import Capability, MemoryStore, RecordFilter

from ..support import ClientApi, clause

MSG_MARKER = "quokkamsgmark"
MEM_MARKER = "quokkamemmark"
THREAD_MARKER = "quokkathreadmark"
MARKERS = (MSG_MARKER, MEM_MARKER, THREAD_MARKER)


def _text(value: Any) -> str:
    """Everything a read returned, as one lower-cased text (models, hits, cards, lists)."""
    if isinstance(value, str):
        return value.lower()
    if isinstance(value, (list, tuple)):
        return "\n".join(_text(v) for v in value)
    if hasattr(value, "model_dump"):
        return repr(jsonable(value)).lower()
    return repr(value).lower()


class ForgettingTests:
    """After ``thread.delete_message``, ``delete_memory`` and ``delete_thread`` the deleted text is
    gone from search (vector, keyword, hybrid), the context card, the summary, listings,
    links, every stored record's ``index_text`` and the export dump."""

    # ---- the read paths ----------------------------------------------------------------------
    def _outputs(self, memory: ClientApi, kept: ClientApi, store: MemoryStore) -> Iterator[tuple[str, str]]:
        """Every read path's output for the kept thread's user, named."""
        from agentmemory.transfer import export_records
        from agentmemory.transfer.dump_format import encode_entry

        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        strategies = ["vector", "keyword", "hybrid"] if keyword else ["vector"]
        for marker in MARKERS:
            query = f"secret {marker} code"
            for strategy in strategies:
                hits = memory.search(query, user_id="u", strategy=strategy, max_results=50, num_hops=2, include_invalid_results=True)
                yield f"client search strategy={strategy} query={query!r}", _text(hits)
            yield f"thread search query={query!r}", _text(kept.search(query, max_results=50, num_hops=2))
            vector = np.asarray(memory.target.embedder.embed([query], is_query=True)[0], dtype=np.float32)
            yield f"store.vector_search({marker})", _text(store.vector_search(vector, RecordFilter(), 100))
            if keyword:
                yield f"store.keyword_search({marker!r})", _text(store.keyword_search(marker, RecordFilter(), 100))
        card = kept.get_context_card(max_recent_messages=20, max_relevant_results=20)
        yield "thread.get_context_card().content", _text(card.content)
        yield "thread.get_context_card() (every field)", _text(card)
        yield "thread.get_summary()", _text(kept.get_summary())
        yield "thread.get_messages()", _text(kept.get_messages(0, 100))
        yield "client.list_messages()", _text(memory.list_messages(user_id="u", limit=1000))
        yield "client.list_memories()", _text(memory.list_memories(user_id="u", include_invalid=True, limit=1000))
        yield "client.list_threads()", _text(memory.list_threads())
        yield "client.list_record_links()", _text(memory.list_record_links())
        yield "store.links()", _text(store.links())
        for rec in store.query(RecordFilter()):
            yield f"stored record {rec.record_id!r} ({rec.record_type.value}) content/index_text/metadata", _text(rec)
        dump = "\n".join(encode_entry(e) for e in export_records(memory.target))
        yield "agentmemory.transfer.export_records (the dump)", dump.lower()

    def _survivors(self, memory: ClientApi, kept: ClientApi, store: MemoryStore, markers: tuple[str, ...]) -> list[str]:
        return [f"{marker!r} in {where}" for where, text in self._outputs(memory, kept, store) for marker in markers if marker in text]

    # ---- the test ------------------------------------------------------------------------------
    @clause("3.forget", "3.cascade", "2.links")
    def test_deleted_text_is_forgotten_by_every_read_path(self, memory: ClientApi) -> None:
        """A deleted message, memory and thread leave no trace: their marker words are found by
        no search strategy (client, thread and SPI level), no card, summary or listing, no link,
        no other record's ``index_text`` and not the export dump; links of the deleted memory are
        gone and what it superseded is valid again.

        Troubleshooting: a delete must reach every structure the backend keeps beside the rows —
        the vector index (tombstones the search still returns), the keyword index and its
        snapshot or statistics tables, caches of records or hits, the link table — in the same
        transaction, and patches of ``index_text`` in the delete's batch must be applied (the next
        turn quoted the deleted one). The message names the read path that still returned the text.
        """
        store: MemoryStore = memory.target.store
        kept = memory.create_thread("t-kept", user_id="u", agent_id="bot")
        ids = kept.add_messages([
            {"role": "user", "content": "hello, I need help with my locker"},
            {"role": "user", "content": f"my secret locker code is {MSG_MARKER} seven"},
            {"role": "assistant", "content": "noted, I will keep that in mind"},
            {"role": "user", "content": "what was the code again"},
        ])
        deleted_msg = ids[1]
        memory.add_memory("the locker is on the second floor", user_id="u", agent_id="bot", memory_id="kept-mem")
        memory.add_memory("an older locker fact", user_id="u", agent_id="bot", memory_id="kept-old")
        memory.add_memory(f"the secret code word is {MEM_MARKER}", user_id="u", agent_id="bot", memory_id="gone-mem",
                          metadata={"note": f"tagged {MEM_MARKER}"})
        memory.link_records("gone-mem", "kept-mem", "supports", link_id="l-gone-supports", metadata={"why": MEM_MARKER})
        memory.link_records("gone-mem", "kept-old", "supersedes", link_id="l-gone-supersedes")
        memory.link_records("kept-mem", "kept-old", "refines", link_id="l-kept")
        doomed = memory.create_thread("t-doomed", user_id="u", agent_id="bot", metadata={"topic": THREAD_MARKER})
        doomed.add_messages([
            {"role": "user", "content": f"the secret code of this thread is {THREAD_MARKER}"},
            {"role": "assistant", "content": f"I see, {THREAD_MARKER} it is"},
            {"role": "user", "content": "and one more turn"},
        ])
        doomed.add_memory(f"thread memory about {THREAD_MARKER}", memory_id="doomed-mem")
        memory.link_records("doomed-mem", "kept-mem", "duplicates", link_id="l-doomed")

        store.settle()  # indexes the backend builds (at its thresholds) hold the text too
        before = self._survivors(memory, kept, store, MARKERS)
        for marker in MARKERS:  # the test is only as good as the paths that showed the text
            assert any(repr(marker) in line and "export" in line for line in before), f"{marker} not exported before the delete"
            assert any(repr(marker) in line and "search" in line for line in before), f"{marker} not found by search before the delete"
        assert any(MSG_MARKER in (r.index_text or "") for r in store.query(RecordFilter(record_ids=(ids[2],)))), (
            "the turn after the message quotes it in its index text (before the delete)"
        )

        assert kept.delete_message(deleted_msg) == 1
        assert memory.delete_memory("gone-mem") == 1
        assert memory.delete_thread("t-doomed") > 0

        survivors = self._survivors(memory, kept, store, MARKERS)
        assert survivors == [], "deleted text is still returned (before settle()):\n  " + "\n  ".join(survivors)
        store.settle()
        survivors = self._survivors(memory, kept, store, MARKERS)
        assert survivors == [], "deleted text is still returned (after settle()):\n  " + "\n  ".join(survivors)
        assert store.links(record_ids=["gone-mem", "doomed-mem"]) == [], "links of deleted records must be gone"
        assert sorted(lk.link_id for lk in store.links()) == ["l-kept"]
        assert memory.get_memory("kept-old").status is RecordStatus.INVALID, "still refined by kept-mem (l-kept)"
        memory.delete_record_link("l-kept")
        assert memory.get_memory("kept-old").status is RecordStatus.VALID, "its superseding memory was deleted"
        assert store.query(RecordFilter(record_ids=(deleted_msg, "gone-mem", "doomed-mem"))) == []
        assert store.query(RecordFilter(thread_id="t-doomed")) == []
        assert [m.record_id for m in kept.get_messages(0, 10)] == [ids[0], ids[2], ids[3]]
        assert store.count(RecordFilter()) == len(store.query(RecordFilter()))
