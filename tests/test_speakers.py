"""Speaker names (``add_messages([{"name": ...}])``, OpenAI's ``name``): validated, kept through
edits, indexed and embedded with the turn, shown in the card, and a query that names a
participant favours that participant's turns (``search.speaker_boost``)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentmemory import InvalidArgument, RecordType
from agentmemory.index_text import embedding_text, speaker_label, speaker_name
from agentmemory.operations.search import speaker_boost
from agentmemory.records import Record
from agentmemory.spi import RecordFilter

from .conftest import dump, make_memory

T = datetime(2023, 5, 8, 13, tzinfo=timezone.utc)


def _group_chat():
    memory = make_memory()
    thread = memory.create_thread(thread_id="t", user_id="u")
    ids = thread.add_messages([
        {"role": "user", "name": "Caroline Lee", "content": "I started a pottery class last week.", "timestamp": T},
        {"role": "user", "name": "Melanie", "content": "I finished a painting of the lake at sunrise.", "timestamp": T},
        {"role": "user", "name": "Caroline Lee", "content": "I might try painting too, someday.", "timestamp": T},
        {"role": "assistant", "content": "Both sound lovely.", "timestamp": T},
    ])
    return memory, thread, ids


def test_the_name_is_stored_apart_from_the_callers_metadata_and_shown_with_the_turn():
    memory, thread, ids = _group_chat()
    first = thread.get_message(ids[0])
    assert first.content == "I started a pottery class last week."  # the words stay the turn's own
    assert speaker_name(first) == "Caroline Lee" and speaker_label(first) == "Caroline Lee"
    assert speaker_name(thread.get_message(ids[3])) is None and speaker_label(thread.get_message(ids[3])) == "assistant"
    rec = memory.store.query(RecordFilter(record_ids=(ids[1],)))[0]
    assert rec.index_text is not None and rec.index_text.endswith("Caroline Lee: I started a pottery class last week.\nMelanie: I finished a painting of the lake at sunrise.")
    assert embedding_text(rec) == "Melanie: I finished a painting of the lake at sunrise."
    assert "<name>Caroline Lee</name>" in thread.search("pottery", max_results=1)[0].formatted_content


def test_an_edit_keeps_the_speaker():
    _, thread, ids = _group_chat()
    thread.update_message(ids[1], content="I finished a painting of the harbour.", metadata={"mood": "proud"})
    rec = thread.get_message(ids[1])
    assert speaker_name(rec) == "Melanie" and rec.metadata["mood"] == "proud"
    assert rec.index_text is not None and rec.index_text.endswith("Melanie: I finished a painting of the harbour.")


@pytest.mark.parametrize(("name", "problem"), [
    ("", "empty"), ("   ", "empty"), ("Ann\nBob", "one line"), ("x" * 101, "one line"), (7, "string"),
])
def test_a_bad_name_is_refused_and_nothing_is_written(name, problem):
    memory = make_memory()
    thread = memory.create_thread(thread_id="t", user_id="u")
    before = dump(memory)
    with pytest.raises(InvalidArgument, match=r"messages\[1\]\.name") as err:
        thread.add_messages([{"role": "user", "content": "fine"}, {"role": "user", "content": "hi", "name": name}])
    assert problem in str(err.value)
    assert dump(memory) == before


def test_a_query_naming_a_speaker_favours_their_turns():
    _, thread, ids = _group_chat()
    hits = thread.search("What did Melanie paint?", record_types=["message"], max_results=3)
    assert hits[0].record.record_id == ids[1]
    hits = thread.search("What is Caroline painting?", record_types=["message"], max_results=3)
    assert hits[0].record.record_id == ids[2]


def test_the_card_names_the_speakers():
    _, thread, _ = _group_chat()
    card = thread.get_context_card(max_recent_messages=4).content
    assert "<name>Melanie</name>" in card and "<name>Caroline Lee</name>" in card
    thread.add_messages([{"role": "user", "name": "Melanie", "content": "Where is that lake painting now?"}])
    card = thread.get_context_card(max_relevant_results=3).content
    # a relevant record names its speaker in place of the role: the same markup as an unnamed turn
    assert '<message name="Melanie">I finished a painting of the lake at sunrise.</message>' in card


def _rec(rid: str, name: str | None) -> Record:
    meta = {"$agent_memory": {"name": name}} if name else {}
    return Record(record_id=rid, record_type=RecordType.MESSAGE, content=rid, thread_id="t", seq=1,
                  timestamp=T, created_at=T, metadata=meta)


def test_speaker_boost_lifts_only_the_named_speakers_turns():
    scored = [(_rec("a", "Caroline Lee"), None, 1.0), (_rec("b", "Melanie"), None, 0.8),
              (_rec("c", None), None, 0.75), (_rec("d", "Caroline Lee"), None, 0.5)]
    out = {r.record_id: s for r, _, s in speaker_boost(scored, "when did melanie go camping?", weight=0.4)}
    assert out == {"a": 1.0, "b": pytest.approx(0.8 * 1.4), "c": 0.75, "d": 0.5}
    assert [r.record_id for r, _, _ in speaker_boost(scored, "melanie?", weight=0.4)][:2] == ["b", "a"]
    # the first word of a name counts, as whole words only
    lifted = {r.record_id: s for r, _, s in speaker_boost(scored, "Caroline's plans", weight=0.4)}
    assert lifted["d"] == pytest.approx(0.5 * 1.4) and lifted["b"] == 0.8
    assert speaker_boost(scored, "Carolineville", weight=0.4) == scored


@pytest.mark.parametrize("query", ["what happened?", "Did Melanie and Caroline meet?"])
def test_speaker_boost_changes_nothing_when_no_speaker_or_every_speaker_is_named(query):
    scored = [(_rec("a", "Caroline"), None, 1.0), (_rec("b", "Melanie"), None, 0.8)]
    assert speaker_boost(scored, query, weight=0.4) == scored
    assert speaker_boost(scored, "Melanie", weight=0.0) == scored
