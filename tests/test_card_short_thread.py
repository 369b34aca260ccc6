"""A card on a thread shorter than its own markup (#29 item 4): it says so, or the caller gets
the transcript itself (``short_thread="transcript"``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument, MemoryExtractionConfig, Thread
from agentmemory.tokens import estimate_tokens

BOB = [
    {"role": "user", "content": "hi, my name is bob"},
    {"role": "assistant", "content": "Hi Bob! It's nice to meet you. How can I help you today?"},
    {"role": "user", "content": "what's my name?"},
]
TRANSCRIPT = "user: hi, my name is bob\nassistant: Hi Bob! It's nice to meet you. How can I help you today?\nuser: what's my name?"


@pytest.fixture
def memory() -> Iterator[AgentMemory]:
    with AgentMemory("memory://", embedder=HashingEmbedder(), memory_extraction_config=MemoryExtractionConfig(extract_memories=False)) as mem:
        yield mem


def thread_of(memory: AgentMemory, messages: list[dict[str, str]]) -> Thread:
    thread = memory.create_thread(user_id="u1")
    thread.add_messages(messages)
    return thread


def test_a_card_larger_than_its_short_thread_says_so(memory: AgentMemory) -> None:
    card = thread_of(memory, BOB).get_context_card()
    assert card.content.startswith("<context_card>") and not card.is_transcript
    assert card.transcript_tokens == estimate_tokens(TRANSCRIPT)
    assert card.larger_than_transcript and card.tokens > card.transcript_tokens
    assert "larger than the 3 messages" in card.note and "short_thread='transcript'" in card.note
    assert card.note not in card.content  # said to the caller, not to the model


def test_the_transcript_itself_when_the_caller_asks_for_it(memory: AgentMemory) -> None:
    thread = thread_of(memory, BOB)
    card = thread.get_context_card(short_thread="transcript")
    assert card.is_transcript and card.content == TRANSCRIPT
    assert card.tokens == card.transcript_tokens == estimate_tokens(TRANSCRIPT)
    assert [m.content for m in card.recent_messages] == [m["content"] for m in BOB]
    assert not card.relevant and not card.summary and not card.note
    assert card.tokens < thread.get_context_card().tokens


def test_a_card_smaller_than_its_thread_is_kept_in_either_mode(memory: AgentMemory) -> None:
    long_turns = [
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": f"Turn {i}: the nightly ledger job for region {i} failed again after the currency step, "
                    "and the retry policy, the snapshot location and the parity test plan were discussed at length."}
        for i in range(14)
    ]
    thread = thread_of(memory, long_turns)
    for mode in ("card", "transcript"):
        card = thread.get_context_card(token_budget=200, short_thread=mode)
        assert card.transcript_tokens is not None and card.tokens <= card.transcript_tokens
        assert not card.larger_than_transcript and not card.is_transcript and not card.note
        assert card.content.startswith("<context_card>")


def test_a_thread_longer_than_the_card_reads_has_no_transcript_figure(memory: AgentMemory) -> None:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"ok {i}"} for i in range(40)]
    card = thread_of(memory, turns).get_context_card(short_thread="transcript")
    assert card.transcript_tokens is None and not card.is_transcript and not card.note


def test_the_transcript_is_what_the_card_stands_for(memory: AgentMemory) -> None:
    """External tail: the caller appends the last turns raw, so they are not part of it;
    self-contained: the tail is inside the card, so it is."""
    thread = thread_of(memory, BOB)
    external = thread.get_context_card(except_last_messages=1, short_thread="transcript")
    assert external.transcript_tokens == estimate_tokens(TRANSCRIPT.rsplit("\n", 1)[0])
    inside = thread.get_context_card(except_last_messages=1, max_recent_messages=1)
    assert inside.transcript_tokens == estimate_tokens(TRANSCRIPT)


@pytest.mark.parametrize("bad", ["full", "", None, 1])
def test_an_unknown_short_thread_mode_is_an_invalid_argument(memory: AgentMemory, bad: object) -> None:
    thread = thread_of(memory, BOB)
    with pytest.raises(InvalidArgument, match="short_thread"):
        thread.get_context_card(short_thread=bad)  # type: ignore[arg-type]
