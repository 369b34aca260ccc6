"""The seed scenarios end to end through ``create_agent`` with scripted LangChain chat models:
Maya (seed 000) answered from a compacted prompt, and Bob (seed 002) whose name survives
compaction here, beside LangChain's own ``SummarizationMiddleware`` which loses it when the
summary model drops it (as the seed's small model did)."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.integrations.langgraph import AgentMemoryMiddleware
from agentmemory.integrations.langgraph.middleware import CARD_SOURCE, message_text
from agentmemory.integrations.langgraph.testing import ScriptedChatModel

MAYA_TURNS = [
    "I'm Maya. I'm migrating our nightly invoice reconciliation workflow from cron jobs to LangGraph.",
    "The failing step right now is ledger enrichment after reconciliation.",
    "What workflow am I migrating, which step is failing, and who am I?",
]
CATS = "Soft paws on the windowsill, a tail that flicks the evening still.\n" * 8
DOGS = "A wagging tail, a muddy paw, the happiest bark you ever saw.\n" * 8
# the summaries the seed's small summary model wrote: the name is gone
SEED_SUMMARIES = [
    "## SESSION INTENT\nThe user's primary goal in this conversation is to request information about a topic.\n\n"
    "## SUMMARY\n- The user wants to know about the highest quality/most relevant context from their message history.\n"
    "- No specific choices or conclusions were made during the session;\n- None",
    "## SESSION INTENT\nThe user's primary goal in this conversation is to request information about a topic.\n\n"
    "## SUMMARY\n- No specific choices or conclusions were made during the session;\n"
    "- The user chose not to pursue any rejected options and was satisfied with their current understanding of the task.\n- None",
]


@pytest.fixture
def memory() -> Any:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(128))
    yield mem
    mem.close()


def prompt_text(prompt: list[BaseMessage]) -> str:
    return "\n".join(message_text(m) for m in prompt)


def maya_model(prompt: list[BaseMessage]) -> str:
    """Answers only from what the prompt holds; otherwise a neutral acknowledgement."""
    if "who am I" not in message_text(prompt[-1]):
        return "Noted."
    text = prompt_text(prompt)
    name = re.search(r"(?:I'm|name is) (Maya)", text)
    workflow = re.search(r"(nightly invoice reconciliation workflow)", text)
    step = re.search(r"failing step (?:right now )?is (ledger enrichment)", text)
    if not (name and workflow and step):
        return "I don't have enough context to answer."
    return (
        f"You're {name.group(1)}, migrating your {workflow.group(1)} from cron jobs to LangGraph, "
        f"and the {step.group(1)} step after reconciliation is currently failing."
    )


def bob_model(prompt: list[BaseMessage]) -> str:
    """The seed's conversation: greet, two poems, then the name — only if the prompt has it."""
    question = message_text(prompt[-1])
    if question == "hi, my name is bob":
        return "Hi! It's nice to meet you. How can I help you today?"
    if "cats" in question:
        return CATS
    if "dogs" in question:
        return DOGS
    if "bob" in prompt_text(prompt[:-1]).lower():
        return "Your name is Bob."
    return "I do not know your name. You have not told me what it is yet!"


# ---- seed 000: Maya ---------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", ["external_tail", "self_contained"])
def test_maya_is_answered_from_a_compacted_prompt(memory: AgentMemory, pattern: str) -> None:
    model = ScriptedChatModel(respond=maya_model)
    middleware = AgentMemoryMiddleware(
        memory, llm=None, thread_id="langgraph_short_term_demo", user_id="user_123", agent_id="assistant_456",
        memory_extraction_config={"context_summary_update_frequency": 4},
        trigger=("tokens", 50), keep=("messages", 1), pattern=pattern,  # compaction forced by a small trigger
    )
    agent = create_agent(model=model, tools=[], middleware=[middleware])
    messages: list[BaseMessage] = []

    def run_turn(user_text: str) -> str:  # the seed's loop: the caller keeps the message list
        messages.append(HumanMessage(content=user_text))
        result = agent.invoke({"messages": messages})
        messages[:] = list(result["messages"])
        return message_text(next(m for m in reversed(messages) if isinstance(m, AIMessage)))

    for text in MAYA_TURNS[:-1]:
        run_turn(text)
    final_answer = run_turn(MAYA_TURNS[-1])

    prompt = model.prompts[-1]
    card = prompt[0]
    assert isinstance(card, HumanMessage) and card.additional_kwargs.get("lc_source") == CARD_SOURCE
    assert card.name == "memory_context_card"
    if pattern == "external_tail":
        assert [message_text(m) for m in prompt[1:]] == [MAYA_TURNS[-1]]  # compact: card + the question
    else:  # the card compacted turn 2 with its tail inside; the organic part since is below the trigger
        assert MAYA_TURNS[1] in message_text(card).split("<recent_messages>")[1]
        assert [message_text(m) for m in prompt[1:]] == ["Noted.", MAYA_TURNS[-1]]
    card_text = message_text(card)
    for fact in ("Maya", "invoice reconciliation", "ledger enrichment"):
        assert fact in card_text, f"{fact!r} missing from the compacted prompt"
    assert final_answer == (
        "You're Maya, migrating your nightly invoice reconciliation workflow from cron jobs to LangGraph, "
        "and the ledger enrichment step after reconciliation is currently failing."
    )
    # the state the caller holds is compact too, and every turn was stored once
    assert sum(1 for m in messages if m.additional_kwargs.get("lc_source") == CARD_SOURCE) == 1
    rows = memory.get_thread("langgraph_short_term_demo").get_messages(0, -1)
    assert [r.content for r in rows if r.role == "user"] == MAYA_TURNS
    assert len(rows) == 6


# ---- seed 002: Bob -----------------------------------------------------------------------------------
def run_bob(middleware: Any) -> tuple[ScriptedChatModel, str]:
    model = ScriptedChatModel(respond=bob_model)
    agent = create_agent(model=model, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "1"}}
    result: dict[str, Any] = {}
    for text in ("hi, my name is bob", "write a short poem about cats", "now do the same but for dogs", "what's my name?"):
        result = agent.invoke({"messages": text}, config)
    return model, message_text(result["messages"][-1])


def test_bob_keeps_his_name_after_compaction(memory: AgentMemory) -> None:
    ours = AgentMemoryMiddleware(memory, llm=None, user_id="bob", trigger=("messages", 5), keep=("messages", 3))
    model, answer = run_bob(ours)
    final = model.prompts[-1]
    card = message_text(final[0])
    assert final[0].additional_kwargs.get("lc_source") == CARD_SOURCE
    assert "Bob" in card
    assert [message_text(m) for m in final[1:]] == ["now do the same but for dogs", DOGS, "what's my name?"]
    assert "hi, my name is bob" not in [message_text(m) for m in final]  # the turn itself was compacted away
    assert answer == "Your name is Bob."


def test_comparison_with_langchain_summarization_middleware(memory: AgentMemory, capsys: pytest.CaptureFixture[str]) -> None:
    """Same scripted agent model, same trigger and keep; LangChain's middleware summarises with a
    scripted summary model that drops the name as the seed's did, ours compacts into a card."""
    summary_model = FakeListChatModel(responses=SEED_SUMMARIES)
    theirs_mw = SummarizationMiddleware(model=summary_model, trigger=("messages", 5), keep=("messages", 3))
    theirs_model, theirs_answer = run_bob(theirs_mw)
    ours_mw = AgentMemoryMiddleware(memory, llm=None, user_id="bob", trigger=("messages", 5), keep=("messages", 3))
    ours_model, ours_answer = run_bob(ours_mw)

    theirs_prompt = prompt_text(theirs_model.prompts[-1])
    ours_prompt = prompt_text(ours_model.prompts[-1])
    assert theirs_prompt.startswith("Here is a summary of the conversation to date")  # their compaction ran
    assert len(theirs_model.prompts[-1]) == len(ours_model.prompts[-1]) == 4  # same shape: 1 + keep 3
    theirs_kept = "bob" in theirs_prompt.lower()
    with capsys.disabled():
        print(f"\n[seed 002] LangChain SummarizationMiddleware kept 'Bob': {theirs_kept} -> {theirs_answer!r}")
        print(f"[seed 002] AgentMemoryMiddleware kept 'Bob': {'Bob' in ours_prompt} -> {ours_answer!r}")
    assert "Bob" in ours_prompt and ours_answer == "Your name is Bob."
    assert not theirs_kept and theirs_answer.startswith("I do not know your name")  # the seed's failure, reproduced
