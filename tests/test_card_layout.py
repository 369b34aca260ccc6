"""How the card lays out what it found: relevant records as a timeline grouped by date (each date
written once, so a budget holds more records), and topics that take budget only when the card's
text does not already name them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone
from typing import Any

from agentmemory import AgentMemory
from agentmemory.card_model import CardParts
from agentmemory.embedders import HashingEmbedder
from agentmemory.operations.card import topics_not_named
from agentmemory.records import Record, RecordStatus, RecordType, SearchResult
from agentmemory.reference_store import InMemoryStore
from agentmemory.renderers import MarkdownCardRenderer, XmlCardRenderer, by_date
from agentmemory.tokens import EstimateCounter

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def rec(rid: str, content: str, at: datetime, record_type: RecordType = RecordType.MESSAGE, **fields: object) -> Record:
    return Record(record_id=rid, record_type=record_type, content=content, timestamp=at, created_at=at, **fields)  # type: ignore[arg-type]


def result(record: Record, score: float) -> SearchResult:
    return SearchResult(record=record, distance=None, score=score, formatted_content="")


def test_relevant_records_render_as_a_timeline_dated_where_the_date_changes() -> None:
    late = rec("m2", "we moved to Lisbon", T0 + timedelta(days=3), role="user")
    early = rec("m1", "I work at a <bakery> & café", T0, role="assistant")
    fact = rec("f1", "The user lives in Lisbon.", T0 + timedelta(days=3, hours=1), RecordType.FACT, status=RecordStatus.INVALID)
    parts = CardParts(relevant=(result(fact, 0.9), result(late, 0.8), result(early, 0.5)))
    root = ET.fromstring(XmlCardRenderer()(parts))
    records = list(root.find("relevant_information"))  # type: ignore[arg-type]
    # oldest first; each date written once, on the first record of that day
    assert [(el.tag, el.get("date"), el.get("role"), el.get("status")) for el in records] == [
        ("message", "2024-03-01", "assistant", None), ("message", "2024-03-04", "user", None), ("fact", None, None, "invalid"),
    ]
    assert records[0].text == "I work at a <bakery> & café"
    md = MarkdownCardRenderer()(parts)
    assert md.index("2024-03-01:") < md.index("bakery") < md.index("2024-03-04:") < md.index("moved to Lisbon") < md.index("lives in Lisbon")


def test_by_date_keeps_the_order_of_records_at_the_same_instant() -> None:
    a, b = rec("b", "second", T0), rec("a", "first", T0)
    assert by_date([a, b]) == [("2024-03-01", [a, b])]


def test_grouping_by_date_costs_less_markup_than_a_date_per_record() -> None:
    records = [rec(f"m{i}", f"turn number {i} about the harbour", T0 + timedelta(minutes=i), role="user") for i in range(20)]
    counter = EstimateCounter()
    grouped = counter.count(XmlCardRenderer()(CardParts(relevant=tuple(result(r, 1.0) for r in records))))
    one_each = counter.count("\n".join(XmlCardRenderer().item(r) for r in records))
    assert grouped < one_each


def test_topics_the_card_already_names_are_dropped_as_whole_words() -> None:
    parts = CardParts(
        topics=("harbour", "art", "Lisbon trip", "cats"),
        summary="user: we planned the Lisbon trip",
        relevant=(result(rec("m", "The harbour was full; I started painting.", T0), 1.0),),
    )
    assert topics_not_named(parts) == ("art", "cats")  # "art" is not the word inside "started"


def test_a_word_said_once_is_not_a_topic() -> None:
    """Offline topics are what the user keeps talking about: a content word (or pair) that
    recurs, never the first word of a thread that has none."""
    from agentmemory.operations.card import keyword_topics

    assert keyword_topics(["I definitely want the blue kayak.", "Is the trip still on?"]) == []
    topics = keyword_topics(["The kayak trip is on Sunday.", "Should the kayak trip start early?", "Definitely bring snacks."])
    assert topics == ["kayak trip"]


def test_under_a_budget_named_topics_give_their_tokens_to_results() -> None:
    client = AgentMemory(store=InMemoryStore(), embedder=HashingEmbedder(64))
    thread = client.create_thread(thread_id="t", user_id="u", extract_memories=False, enable_context_summary=False)
    thread.add_messages([{"role": "user", "content": f"The harbour boat number {i} left at dawn with nets."} for i in range(30)])
    thread.add_messages([{"role": "user", "content": "When did the harbour boats leave?"}])
    free = thread.get_context_card()
    budgeted = thread.get_context_card(token_budget=400)
    assert "harbour boat" in free.topics  # without a budget the topics stay as they are
    assert budgeted.relevant and "harbour boat" not in budgeted.topics  # every result names it
    assert budgeted.tokens <= 400
    client.close()


def _support_chat(question: str) -> tuple[AgentMemory, Any]:
    """A support thread whose first message an extracted fact quotes, then ``question``."""
    client = AgentMemory(store=InMemoryStore(), embedder=HashingEmbedder(64))
    thread = client.create_thread(thread_id="t", user_id="u", extract_memories=False)
    thread.add_messages([
        {"role": "user", "content": "Order 7421 arrived damaged. I need a return."},
        {"role": "assistant", "content": "I can start the return for order 7421."},
        {"role": "user", "content": question},
    ])
    client.add_memory("User reported (order 7421): Order 7421 arrived damaged. I need a return.", user_id="u", memory_type="fact")
    return client, thread


def test_the_summary_leaves_out_a_message_that_a_result_quotes() -> None:
    client, thread = _support_chat("Please hurry with order 7421.")
    card = thread.get_context_card(max_relevant_results=1, min_relevant_results_by_type={"fact": 1})
    assert [r.record.record_type for r in card.relevant] == [RecordType.FACT]
    assert "arrived damaged" not in card.summary  # the fact shows it
    assert "Please hurry" in card.summary
    assert card.content.count("arrived damaged") == 1
    client.close()


def test_fit_card_keeps_what_adding_one_by_one_would() -> None:
    """The card holds the results that adding them one by one in rank order keeps: under a hard
    budget alone a result that does not fit is passed over and shorter ones below it still go in
    (the card is a set shown as a timeline); with a soft budget the card stops at the first that
    does not fit or the one that reaches the soft budget."""
    from agentmemory.operations.card import fit_card

    renderer, counter = XmlCardRenderer(), EstimateCounter()
    candidates = [result(rec(f"m{i}", "word " * (1 + i % 7), T0 + timedelta(days=i % 3), role="user"), 1.0) for i in range(40)]
    parts = CardParts(summary="user: a summary line")

    def one_by_one(budget: int | None, soft: int | None) -> list[str]:
        chosen: list[SearchResult] = []
        for r in candidates:
            cost = counter.count(renderer(parts.model_copy(update={"relevant": (*chosen, r)})))
            if budget is not None and cost > budget:
                if soft is None:
                    continue
                break
            chosen.append(r)
            if soft is not None and cost >= soft:
                break
        return [r.record.record_id for r in chosen]

    passed_over = 0
    for budget in (None, 0, 10, 40, 120, 333, 10_000):
        for soft in (None, 1, 50, 200, 10_000):
            got = [r.record.record_id for r in fit_card(renderer, parts, candidates, budget, soft, counter=counter).relevant]
            want = one_by_one(budget, soft)
            assert got == want, (budget, soft)
            if budget is not None and soft is None and len(want) < len(candidates):
                passed_over += int(want != [r.record.record_id for r in candidates[: len(want)]])
            if got:
                assert counter.count(renderer(parts.model_copy(update={"relevant": tuple(
                    r for r in candidates if r.record.record_id in got)}))) <= (budget if budget is not None else 10**9)
    assert passed_over, "some budget must pass a long result over for shorter ones below it"


def test_a_reserved_slot_goes_to_a_record_the_card_does_not_already_show() -> None:
    client, thread = _support_chat("Thanks, and what about order 7421?")
    card = thread.get_context_card(min_relevant_results_by_type={"fact": 1, "message": 1})
    shown = [r.record.content for r in card.relevant]
    assert "I can start the return for order 7421." in shown  # not the message the fact quotes
    assert "Order 7421 arrived damaged. I need a return." not in shown
    assert card.content.count("arrived damaged") == 1
    client.close()


def test_under_a_hard_budget_offline_topics_take_only_the_room_the_results_leave(monkeypatch: Any) -> None:
    """Offline topics (frequent words) are not what the question asks for: under a hard budget the
    card holds the same results as a card without topics, and any topic it shows fits the room
    they leave."""
    import agentmemory.operations.card as card_ops

    client = AgentMemory(store=InMemoryStore(), embedder=HashingEmbedder(64))
    thread = client.create_thread(thread_id="t", user_id="u", extract_memories=False, enable_context_summary=False)
    words = ["glacier", "orchard", "lantern", "compass"]
    thread.add_messages([{"role": "user", "content": f"The {words[i % 4]} walk on day {i} was long, the {words[(i + 1) % 4]} too."}
                         for i in range(30)])
    thread.add_messages([{"role": "user", "content": f"The ferry left late on day {i}."} for i in range(30, 40)])
    thread.add_messages([{"role": "user", "content": "When did the ferry leave late?"}])
    assert thread.get_context_card().topics  # without a budget the offline topics are shown
    for budget in (120, 250, 400):
        card = thread.get_context_card(token_budget=budget)
        with monkeypatch.context() as m:
            m.setattr(card_ops, "topics_not_named", lambda parts: ())
            m.setattr(card_ops, "keyword_topics", lambda texts, n=5: [])
            bare = thread.get_context_card(token_budget=budget)
        assert bare.topics == ()
        assert [r.record.record_id for r in card.relevant] == [r.record.record_id for r in bare.relevant]
        assert card.tokens <= budget
    client.close()


def test_under_a_budget_the_offline_summary_takes_only_the_room_the_results_leave(monkeypatch: Any) -> None:
    """The offline summary quotes recent messages that ranked below the results shown (here the
    question being asked, the card's query): under a budget it never costs a result, only fills
    the room they leave, and without a budget it is shown as before."""
    import agentmemory.operations.card as card_ops

    client = AgentMemory(store=InMemoryStore(), embedder=HashingEmbedder(64))
    thread = client.create_thread(thread_id="t", user_id="u", extract_memories=False, enable_context_summary=False)
    thread.add_messages([{"role": "user", "content": f"The ferry left late on day {i}, after the storm had passed the cape."} for i in range(40)])
    thread.add_messages([{"role": "user", "content": "Which days did the ferry leave late after a storm?"}])
    assert "Which days" in thread.get_context_card().summary
    for budget in (100, 200, 400):
        card = thread.get_context_card(token_budget=budget)
        with monkeypatch.context() as m:
            m.setattr(card_ops, "offline_card_summary", lambda *args: "")
            bare = thread.get_context_card(token_budget=budget)
        assert bare.summary == "" and card.tokens <= budget
        assert [r.record.record_id for r in card.relevant] == [r.record.record_id for r in bare.relevant]
    client.close()
