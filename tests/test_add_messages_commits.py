"""How many commits one ``add_messages`` costs (issue #31): inline extraction without a summary
update is one store ``write`` holding the messages, the memories and the thread's extraction
state; the paths that keep more commits (background mode, calls over ``ONE_COMMIT_LIMIT``)
still extract every message exactly once. ``Stamped`` (no model) writes one memory per
extraction naming the orders it saw, so a repeated extraction shows (an extractor whose
memories repeat would be hidden by the duplicate filter); the model paths are in
``test_extraction.py``."""

from __future__ import annotations

from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, MemoryExtractionConfig, MemoryExtractionMode, Record, RecordType
from agentmemory.extraction.base import Extractor
from agentmemory.extraction.models import ExtractionContext, ExtractionOutput, MemoryCandidate
from agentmemory.ids import new_id, thread_record_id
from agentmemory.operations.extraction import NEWEST, ONE_COMMIT_LIMIT
from agentmemory.operations.lookup import thread_state
from agentmemory.records import MEMORY_TYPES
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import Order, RecordFilter, RecordPatch, WriteBatch


class CountingStore(InMemoryStore):
    """The reference store, keeping every batch handed to ``write``."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[WriteBatch] = []
        self.queries = []

    def _write(self, batch: WriteBatch) -> list[Record]:
        self.batches.append(batch)
        return super()._write(batch)

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        self.queries.append(filter)
        return super()._query(filter, order, limit, offset)

    queries: list[RecordFilter] = []


def order(n: int) -> list[dict[str, Any]]:
    """One turn whose user message the rule-based extractor turns into one memory."""
    return [
        {"role": "user", "content": f"Order {7000 + n} arrived damaged and I need a return."},
        {"role": "assistant", "content": "Sorry to hear that."},
    ]


class Stamped(Extractor):
    """One memory per extraction: the orders of the new user messages and a fresh id."""

    name = "stamped"

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        orders = [m.content.split()[1] for m in context.messages if m.record_id in context.new_message_ids and m.role == "user"]
        return ExtractionOutput(memories=[MemoryCandidate(type="fact", content=f"orders {' '.join(orders)} [{new_id()}]")] if orders else [])


def memories(client: AgentMemory) -> list[str]:
    return [m.content for m in client.store.query(RecordFilter(record_types=MEMORY_TYPES))]


def extracted_once(client: AgentMemory, count: int) -> None:
    """Orders 0..count-1 were each extracted exactly once."""
    seen = [int(o) - 7000 for m in memories(client) for o in m.split("[")[0].split()[1:]]
    assert sorted(seen) == list(range(count)), "a message was extracted twice, or not at all"


@pytest.fixture
def store() -> CountingStore:
    return CountingStore()


def client_on(store: CountingStore, **config: Any) -> AgentMemory:
    return AgentMemory(store=store, embedder=HashingEmbedder(64), extractor=Stamped(), memory_extraction_config=MemoryExtractionConfig(**config))


def test_an_inline_turn_is_one_write_with_messages_memories_and_state(store: CountingStore) -> None:
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    for n in range(3):
        store.batches.clear()
        thread.add_messages(order(n))
        [batch] = store.batches
        types = [item.record.record_type for item in batch.add]
        assert types[:2] == [RecordType.MESSAGE, RecordType.MESSAGE]
        assert set(types[2:]) <= MEMORY_TYPES and len(types) == 3
        assert batch.patch[-1].record_id == thread_record_id("t")
    extracted_once(client, 3)
    assert [m.content for m in thread.get_messages()][::2] == [order(n)[0]["content"] for n in range(3)]


def test_the_state_names_the_turn_committed_with_its_extraction(store: CountingStore) -> None:
    """The messages of the last call are extracted by id (their seq was unknown when the state
    was written); the call after turns them into ``extracted_seq``."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    first = thread.add_messages(order(0))
    state = thread_state(client.store.query(RecordFilter(record_ids=(thread_record_id("t"),)))[0])
    assert state["extracted_ids"] == first
    thread.add_messages(order(1))
    stored = {m.record_id: m.seq for m in thread.get_messages()}
    state = thread_state(client.store.query(RecordFilter(record_ids=(thread_record_id("t"),)))[0])
    assert state["extracted_seq"] == stored[first[1]]


def test_a_turn_not_yet_due_is_one_write_and_the_due_one_extracts_all_once(store: CountingStore) -> None:
    client = client_on(store, memory_extraction_frequency=4)
    thread = client.create_thread(thread_id="t", user_id="u")
    store.batches.clear()
    thread.add_messages(order(0))
    assert len(store.batches) == 1 and memories(client) == []
    thread.add_messages(order(1))  # four pending messages: due
    assert len(store.batches) == 2
    extracted_once(client, 2)
    thread.add_messages(order(2))
    thread.add_messages(order(3))
    extracted_once(client, 4)


def test_deleting_a_message_named_in_the_state_extracts_nothing_twice(store: CountingStore) -> None:
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(order(0))
    ids = thread.add_messages(order(1))
    thread.delete_message(ids[1])  # the newest message, named in the state
    thread.add_messages(order(2))
    extracted_once(client, 3)
    thread.delete_message(thread.get_messages()[-1].record_id)
    thread.add_messages(order(3))
    extracted_once(client, 4)


def test_a_deleted_id_used_again_is_extracted_as_a_new_message(store: CountingStore) -> None:
    client = client_on(store, memory_extraction_frequency=3)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages([*order(0), {"role": "assistant", "content": "ok", "id": "m-last"}])  # due: state names m-last
    thread.delete_message("m-last")
    thread.add_messages([{**order(1)[0], "id": "m-last"}])  # not due yet: only its id leaves the state
    thread.add_messages(order(2))
    extracted_once(client, 3)


def test_background_mode_commits_the_messages_first_and_extracts_once(store: CountingStore) -> None:
    client = client_on(store, extraction_mode=MemoryExtractionMode.BACKGROUND)
    try:
        thread = client.create_thread(thread_id="t", user_id="u")
        store.batches.clear()
        thread.add_messages(order(0))
        assert client.wait_for_memory_extraction(timeout=10)
        assert len(store.batches) == 2
        assert {item.record.record_type for item in store.batches[0].add} == {RecordType.MESSAGE}
        thread.add_messages(order(1))
        assert client.wait_for_memory_extraction(timeout=10)
        extracted_once(client, 2)
    finally:
        client.close()


def test_a_call_over_the_limit_commits_its_messages_first_and_extracts_once(store: CountingStore) -> None:
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    turns = ONE_COMMIT_LIMIT // 2 + 1
    store.batches.clear()
    thread.add_messages([m for n in range(turns) for m in order(n)])
    assert len(store.batches) == 2
    assert {item.record.record_type for item in store.batches[0].add} == {RecordType.MESSAGE}
    thread.add_messages(order(turns))
    extracted_once(client, turns + 1)


def test_a_store_written_in_the_old_state_format_goes_on_without_repeats(store: CountingStore) -> None:
    """A thread whose state has only ``extracted_seq`` (written before ``extracted_ids``)."""
    client = client_on(store, extraction_mode=MemoryExtractionMode.BACKGROUND)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(order(0))
    assert client.wait_for_memory_extraction(timeout=10)
    state = thread_state(store.query(RecordFilter(record_ids=(thread_record_id("t"),)))[0])
    assert set(state) == {"extracted_seq"}
    again = client_on(store)  # inline, on the same open store
    again.get_thread("t").add_messages(order(1))
    extracted_once(again, 2)


def state_of(store: CountingStore) -> dict[str, Any]:
    return thread_state(store.query(RecordFilter(record_ids=(thread_record_id("t"),)))[0])


def message_scans(store: CountingStore) -> list[RecordFilter]:
    """The thread's messages read other than by id (the unextracted ones, the newest one)."""
    return [f for f in store.queries if f.thread_id == "t" and f.record_ids is None]


def index_text(store: CountingStore, record_id: str) -> str:
    text = store.query(RecordFilter(record_ids=(record_id,)))[0].index_text
    assert text is not None
    return text


def test_a_turn_after_an_extracting_one_reads_only_the_newest_message_by_id(store: CountingStore) -> None:
    """The state names the newest message (``NEWEST``) when nothing is left pending: the next
    turn reads it by id (the turn its first message's index text quotes) and no other message."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(order(0))
    last = thread.add_messages(order(1))
    assert state_of(store)[NEWEST] == last[1]
    store.queries.clear()
    now = thread.add_messages(order(2))
    assert message_scans(store) == []
    assert [f.record_ids for f in store.queries if f.thread_id == "t"] == [(last[1],)]
    assert "assistant: Sorry to hear that." in index_text(store, now[0])
    assert state_of(store)[NEWEST] == now[1]
    assert state_of(store)["extracted_seq"] == store.query(RecordFilter(record_ids=(last[1],)))[0].seq
    extracted_once(client, 3)


def test_the_next_turn_quotes_the_newest_message_as_edited(store: CountingStore) -> None:
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages(order(0))
    thread.update_message(ids[1], content="Edited: a refund is on its way.")
    store.queries.clear()
    now = thread.add_messages(order(1))
    assert message_scans(store) == []
    assert "assistant: Edited: a refund is on its way." in index_text(store, now[0])
    extracted_once(client, 2)


def test_the_next_turn_after_the_newest_message_is_deleted_quotes_the_one_before(store: CountingStore) -> None:
    """The newest message gone, the turn reads the thread's unextracted messages as before."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages(order(0))
    thread.delete_message(ids[1])
    store.queries.clear()
    now = thread.add_messages(order(1))
    assert len(message_scans(store)) == 1
    text = index_text(store, now[0])
    assert "user: Order 7000 arrived damaged" in text and "Sorry" not in text
    assert state_of(store)[NEWEST] == now[1]
    extracted_once(client, 2)


def test_a_thread_written_without_the_newest_id_reads_its_unextracted_messages(store: CountingStore) -> None:
    """A state written before ``NEWEST`` existed: the turn reads as before, then writes it."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages(order(0))
    rec = store.query(RecordFilter(record_ids=(thread_record_id("t"),)))[0]
    meta = dict(rec.metadata)
    meta["$agent_memory"] = {**meta["$agent_memory"], "state": {k: v for k, v in state_of(store).items() if k != NEWEST}}
    store.write(WriteBatch(patch=[RecordPatch(rec.record_id, metadata=meta)]))
    store.queries.clear()
    now = thread.add_messages(order(1))
    assert len(message_scans(store)) == 1
    assert "assistant: Sorry to hear that." in index_text(store, now[0])
    assert state_of(store)[NEWEST] == now[1] and ids[1] not in state_of(store)["extracted_ids"]
    extracted_once(client, 2)


@pytest.mark.parametrize("how", ["not extracting", "not due", "background", "over the limit"])
def test_messages_committed_without_their_extraction_drop_the_newest_id(store: CountingStore, how: str) -> None:
    """Messages left pending are committed with a state without ``NEWEST`` (same batch), so the
    next inline turn reads the thread's unextracted messages, extracts them once and quotes the
    newest of them."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(order(0))
    assert NEWEST in state_of(store)
    store.batches.clear()
    if how == "over the limit":
        many = [{"role": "tool", "content": f"log line {i}"} for i in range(ONE_COMMIT_LIMIT)] + order(1)
        thread.add_messages(many)
    elif how == "background":
        thread.add_messages(order(1), memory_extraction_config={"extraction_mode": "background"})
        assert client.wait_for_memory_extraction(timeout=10)
    elif how == "not due":
        thread.add_messages(order(1), memory_extraction_config={"memory_extraction_frequency": 5})
    else:
        thread.add_messages(order(1), memory_extraction_config={"extract_memories": False})
    first = store.batches[0]
    assert [p.record_id for p in first.patch] == [thread_record_id("t")]
    assert NEWEST not in first.patch[0].metadata["$agent_memory"]["state"]
    store.queries.clear()
    now = thread.add_messages(order(2))
    assert message_scans(store)  # (two when the background job left nothing pending: the newest by seq)
    assert "assistant: Sorry to hear that." in index_text(store, now[0])
    assert state_of(store)[NEWEST] == now[1]
    extracted_once(client, 3)
    client.close()


def test_a_failed_commit_keeps_the_messages_pending_without_the_newest_id(store: CountingStore) -> None:
    """The turn's one commit fails (here: once, at a memory): its messages are written alone with
    the state's ``NEWEST`` dropped, and the next turn extracts them once and quotes the newest."""
    client = client_on(store)
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(order(0))
    failing = [True]
    plain_write = store._write

    def write_once_failing(batch: WriteBatch) -> list[Record]:
        if failing[0] and any(item.record.record_type in MEMORY_TYPES for item in batch.add):
            failing[0] = False
            raise RuntimeError("the disk is full")
        return plain_write(batch)

    store._write = write_once_failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        thread.add_messages(order(1))
    assert NEWEST not in state_of(store)
    now = thread.add_messages(order(2))
    assert "assistant: Sorry to hear that." in index_text(store, now[0])
    assert [m.content for m in thread.get_messages()][::2] == [order(n)[0]["content"] for n in range(3)]
    extracted_once(client, 3)


def test_messages_imported_into_a_thread_are_read_by_its_next_turn(store: CountingStore) -> None:
    """An import that adds messages to a thread whose state names its newest message drops that
    name in the same batch: the next turn quotes the imported newest message and extracts the
    imported ones, as it did before the state named a newest message."""
    from agentmemory.transfer import export_records, import_records

    client = client_on(store)
    client.create_thread(thread_id="t", user_id="u").add_messages(order(0))
    assert NEWEST in state_of(store)
    source = client_on(InMemoryStore(), extract_memories=False)
    source.create_thread(thread_id="t", user_id="u").add_messages(order(1))
    report = import_records(client, export_records(source), on_conflict="skip")
    assert report.records_written == 2  # the two messages; the differing thread record is kept
    assert NEWEST not in state_of(store)
    now = client.get_thread("t").add_messages(order(2))
    assert "assistant: Sorry to hear that." in index_text(store, now[0])
    extracted_once(client, 3)
