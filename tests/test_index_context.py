"""Contextual index text: a message is indexed with its role, date and previous turn, and still
returned with its own words (``AgentMemory(index_context=...)``, ``Record.index_text``)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from agentmemory import AgentMemory
from agentmemory.errors import InvalidArgument
from agentmemory.index_text import embedding_text
from agentmemory.spi import RecordFilter

from .conftest import make_memory


def _chat(memory: AgentMemory) -> tuple[object, list[str]]:
    thread = memory.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages([
        {"role": "user", "content": "Where did you go hiking with the dog?", "timestamp": datetime(2023, 5, 8, 13, tzinfo=timezone.utc)},
        {"role": "assistant", "content": "Up to the lake, twice!", "timestamp": datetime(2023, 5, 8, 13, 1, tzinfo=timezone.utc)},
    ])
    # a second call: its first message takes the previous call's last message as context
    ids += thread.add_messages([{"role": "user", "content": "Lovely.", "timestamp": datetime(2023, 5, 9, tzinfo=timezone.utc)}])
    return thread, ids


def test_messages_are_indexed_with_role_date_and_previous_turn() -> None:
    memory = make_memory()
    _, ids = _chat(memory)
    first, reply, later = (memory.store.query(RecordFilter(record_ids=(i,)))[0] for i in ids)
    assert reply.content == "Up to the lake, twice!"  # the stored words are the turn's own
    assert reply.index_text == "8 May 2023\nuser: Where did you go hiking with the dog?\nassistant: Up to the lake, twice!"
    assert first.index_text == "8 May 2023\nuser: Where did you go hiking with the dog?"
    assert later.index_text is not None and "assistant: Up to the lake, twice!" in later.index_text


def test_a_reply_is_found_by_the_words_of_the_turn_it_answers() -> None:
    memory = make_memory()
    thread, ids = _chat(memory)
    hits = thread.search("hiking dog", strategy="keyword", max_results=5)  # type: ignore[attr-defined]
    assert ids[1] in [h.record.record_id for h in hits]
    assert all(h.content in {"Where did you go hiking with the dog?", "Up to the lake, twice!", "Lovely."} for h in hits)
    off = make_memory(index_context=False)
    thread_off, ids_off = _chat(off)
    assert ids_off[1] not in [h.record.record_id for h in thread_off.search("hiking dog", strategy="keyword", max_results=5)]  # type: ignore[attr-defined]
    assert off.store.query(RecordFilter(record_ids=(ids_off[1],)))[0].index_text is None


def test_an_edited_message_is_indexed_again_with_its_context() -> None:
    memory = make_memory()
    thread, ids = _chat(memory)
    thread.update_message(ids[1], content="Only to the river.")  # type: ignore[attr-defined]
    rec = memory.store.query(RecordFilter(record_ids=(ids[1],)))[0]
    assert rec.content == "Only to the river."
    assert rec.index_text == "8 May 2023\nuser: Where did you go hiking with the dog?\nassistant: Only to the river."
    assert "lake" not in rec.index_text


def test_index_context_must_be_a_bool() -> None:
    with pytest.raises(InvalidArgument, match="index_context"):
        make_memory(index_context="yes")


def _everything_text(memory: AgentMemory) -> str:
    """Every stored content and index text (what search, embeddings and an export can show)."""
    rows = memory.store.query(RecordFilter())
    return "\n".join(f"{r.content}\n{r.index_text or ''}" for r in rows)


def test_deleting_a_message_forgets_it_in_the_next_turns_index() -> None:
    memory = make_memory()
    thread, ids = _chat(memory)
    thread.delete_message(ids[1])  # type: ignore[attr-defined]
    later = memory.store.query(RecordFilter(record_ids=(ids[2],)))[0]
    assert later.index_text == "9 May 2023\nuser: Where did you go hiking with the dog?\nuser: Lovely."  # from its new previous turn
    assert "lake" not in _everything_text(memory)
    assert thread.search("lake twice", strategy="keyword", max_results=5) == []  # type: ignore[attr-defined]
    [vec] = memory.store.read_vectors([ids[2]]).values()  # re-embedded from the same text
    assert np.allclose(vec, memory.embedder.embed([embedding_text(later)])[0], atol=1e-6)


def test_deleting_consecutive_messages_reindexes_from_the_turn_before_them() -> None:
    memory = make_memory()
    thread = memory.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages([{"role": "user", "content": f"turn {w}"} for w in ("alpha", "bravo", "charlie", "delta")])
    thread.delete_message(ids[1])  # type: ignore[attr-defined]
    thread.delete_message(ids[2])  # type: ignore[attr-defined]
    last = memory.store.query(RecordFilter(record_ids=(ids[3],)))[0]
    assert last.index_text is not None and "user: turn alpha\nuser: turn delta" in last.index_text
    assert "bravo" not in _everything_text(memory) and "charlie" not in _everything_text(memory)


def test_editing_a_message_reindexes_the_turn_after_it() -> None:
    memory = make_memory()
    thread, ids = _chat(memory)
    thread.update_message(ids[1], content="Only to the river.")  # type: ignore[attr-defined]
    later = memory.store.query(RecordFilter(record_ids=(ids[2],)))[0]
    assert later.index_text is not None and "assistant: Only to the river." in later.index_text
    assert "lake" not in _everything_text(memory)
