"""AgentMemoryMiddleware: persistence (once, by id or content), triggers, the two card patterns,
tool-call safety, the newest human turn, scope from the LangGraph config, async, and a SQLite
checkpointer across real process restarts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.integrations.langgraph import AgentMemoryMiddleware
from agentmemory.integrations.langgraph.middleware import CARD_SOURCE, message_text
from agentmemory.integrations.langgraph.testing import ScriptedChatModel


@pytest.fixture
def memory() -> Any:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(128))
    yield mem
    mem.close()


def stored(memory: AgentMemory, thread_id: str) -> list[tuple[str | None, str]]:
    return [(r.role, r.content) for r in memory.get_thread(thread_id).get_messages(0, -1)]


def is_card(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and message.additional_kwargs.get("lc_source") == CARD_SOURCE


def apply(update: dict[str, Any] | None, messages: list[BaseMessage]) -> list[BaseMessage]:
    """What LangGraph's add_messages reducer makes of a before_model update."""
    if update is None:
        return messages
    out = update["messages"]
    assert isinstance(out[0], RemoveMessage)
    return list(out[1:])


def conversation(n_turns: int, size: int = 40) -> list[BaseMessage]:
    msgs: list[BaseMessage] = []
    for i in range(n_turns):
        msgs.append(HumanMessage(content=f"user turn {i} " + "lorem " * size, id=f"h{i}"))
        msgs.append(AIMessage(content=f"assistant turn {i} " + "ipsum " * size, id=f"a{i}"))
    return msgs


# ---- persistence ---------------------------------------------------------------------------------
def test_turns_are_persisted_once_with_a_checkpointer(memory: AgentMemory) -> None:
    model = ScriptedChatModel(respond=lambda p: f"reply {len(p)}")
    mw = AgentMemoryMiddleware(memory, llm=None, trigger=None)
    agent = create_agent(model=model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-1", "user_id": "bob"}}
    for text in ("hi, my name is bob", "write a short poem about cats", "what's my name?"):
        agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    rows = stored(memory, "t-1")
    assert rows == [
        ("user", "hi, my name is bob"), ("assistant", "reply 1"),
        ("user", "write a short poem about cats"), ("assistant", "reply 3"),
        ("user", "what's my name?"), ("assistant", "reply 5"),
    ]
    assert memory.get_thread("t-1").user_id == "bob"
    # the LangChain message id is kept with the record
    state = agent.get_state(config).values["messages"]
    meta = [r.metadata.get("langgraph_message_id") for r in memory.get_thread("t-1").get_messages(0, -1)]
    assert meta == [m.id for m in state]


def test_missing_ids_fall_back_to_content_and_survive_a_new_instance(memory: AgentMemory) -> None:
    msgs = [HumanMessage(content="hello there"), AIMessage(content="hi!"), HumanMessage(content="how are you?")]
    assert all(m.id is None for m in msgs)
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="fallback", trigger=None)
    mw.before_model({"messages": msgs}, None)  # type: ignore[arg-type]
    mw.before_model({"messages": msgs}, None)  # type: ignore[arg-type]
    fresh = AgentMemoryMiddleware(memory, llm=None, thread_id="fallback", trigger=None)  # empty cache: the store decides
    fresh.before_model({"messages": [*msgs, AIMessage(content="fine")]}, None)  # type: ignore[arg-type]
    assert stored(memory, "fallback") == [
        ("user", "hello there"), ("assistant", "hi!"), ("user", "how are you?"), ("assistant", "fine"),
    ]


def test_tool_system_synthetic_and_empty_messages_are_not_persisted(memory: AgentMemory) -> None:
    msgs: list[BaseMessage] = [
        SystemMessage(content="be brief", id="s"),
        HumanMessage(content="where is bob?", id="h1"),
        AIMessage(content="", tool_calls=[{"name": "where_is_bob", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage(content="he is in Chicago", tool_call_id="c1", id="t1"),
        AIMessage(content="Bob is in Chicago.", id="a2"),
        HumanMessage(content="summary text", additional_kwargs={"lc_source": "summarization"}, id="sum"),
        HumanMessage(content="<context_card>old</context_card>", name="memory_context_card", id="card"),
        HumanMessage(content=[{"type": "text", "text": "block text"}, {"type": "image_url", "image_url": {"url": "x"}}], id="h2"),
        HumanMessage(content="   ", id="blank"),
    ]
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="roles", trigger=None)
    mw.before_model({"messages": msgs}, None)  # type: ignore[arg-type]
    assert stored(memory, "roles") == [("user", "where is bob?"), ("assistant", "Bob is in Chicago."), ("user", "block text")]


# ---- triggers ----------------------------------------------------------------------------------
def test_the_card_is_not_measured(memory: AgentMemory) -> None:
    big_card = HumanMessage(content="<context_card>" + "x " * 5000 + "</context_card>", name="memory_context_card", id="c")
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="organic", trigger=("tokens", 500), keep=("messages", 1))
    small = [HumanMessage(content="short question", id="h")]
    assert mw.before_model({"messages": [big_card, *small]}, None) is None  # type: ignore[arg-type]
    assert mw.organic_messages([big_card, *small]) == small


def test_message_token_and_fraction_triggers(memory: AgentMemory) -> None:
    msgs = conversation(3, size=10)  # 6 messages, ~150 tokens
    by_count = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger=("messages", 6))
    assert by_count.should_compact(msgs) and not by_count.should_compact(msgs[:5])
    by_tokens = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger=("tokens", 100))
    assert by_tokens.should_compact(msgs) and not by_tokens.should_compact(msgs[:2])
    model = ScriptedChatModel(profile={"max_input_tokens": 1000})
    by_fraction = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger=("fraction", 0.1), model=model)
    assert by_fraction.max_input_tokens == 1000
    assert by_fraction.should_compact(msgs) and not by_fraction.should_compact(msgs[:2])
    both = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger={"messages": 6, "tokens": 10_000})  # AND
    assert not both.should_compact(msgs)
    either = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger=[("messages", 100), ("tokens", 100)])  # OR
    assert either.should_compact(msgs)
    never = AgentMemoryMiddleware(memory, llm=None, thread_id="a", trigger=None)
    assert not never.should_compact(msgs * 10)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"trigger": ("pages", 3)}, "trigger"),
        ({"trigger": ("messages", 0)}, "trigger"),
        ({"trigger": ("tokens", 1.5)}, "trigger"),
        ({"trigger": ("messages", True)}, "trigger"),
        ({"trigger": []}, "trigger"),
        ({"trigger": "tokens"}, "trigger"),
        ({"keep": ("fraction", 2.0), "max_input_tokens": 100}, "keep"),
        ({"keep": [("messages", 2)]}, "keep"),
        ({"trigger": ("fraction", 0.5)}, "max_input_tokens"),
        ({"max_input_tokens": 0}, "max_input_tokens"),
        ({"card_options": {"except_last_messages": 2}}, "card_options"),
        ({"pattern": "inline"}, "pattern"),
        ({"thread_id": ""}, "thread_id"),
    ],
)
def test_bad_options_raise_invalid_argument_naming_it(memory: AgentMemory, kwargs: dict[str, Any], argument: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        AgentMemoryMiddleware(memory, llm=None, **kwargs)
    assert err.value.argument == argument


def test_a_run_without_thread_is_refused(memory: AgentMemory) -> None:
    agent = create_agent(model=ScriptedChatModel(respond=lambda p: "ok"), tools=[], middleware=[AgentMemoryMiddleware(memory, llm=None)])
    with pytest.raises(InvalidArgument) as err:
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert err.value.argument == "thread_id"


# ---- the two patterns --------------------------------------------------------------------------
def test_external_tail_is_one_card_plus_the_last_n_raw_messages(memory: AgentMemory) -> None:
    msgs = conversation(4)
    msgs.append(HumanMessage(content="final question about turn zero", id="hq"))
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="ext", trigger=("messages", 5), keep=("messages", 3))
    update = mw.before_model({"messages": msgs}, None)  # type: ignore[arg-type]
    assert update is not None
    assert isinstance(update["messages"][0], RemoveMessage)
    new = apply(update, msgs)
    assert is_card(new[0]) and new[0].name == "memory_context_card"
    assert new[1:] == msgs[-3:]
    card = message_text(new[0])
    assert card.startswith("<context_card>") and "<recent_messages>" not in card
    # the raw tail is not repeated inside the card; older turns are summarised there
    assert "assistant turn 3" not in card and "final question" not in card
    assert "turn 2" in card or "turn 1" in card
    assert len(stored(memory, "ext")) == 9


def test_self_contained_card_holds_the_tail(memory: AgentMemory) -> None:
    msgs = conversation(4)
    msgs.append(HumanMessage(content="final question", id="hq"))
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="self", trigger=("messages", 5), keep=("messages", 3), pattern="self_contained")
    new = apply(mw.before_model({"messages": msgs}, None), msgs)  # type: ignore[arg-type]
    assert len(new) == 1 and is_card(new[0])
    card = message_text(new[0])
    recent = card.split("<recent_messages>")[1]
    assert "assistant turn 3" in recent and "final question" in recent and "user turn 3" in recent
    assert "user turn 2" not in recent


def test_recompaction_replaces_the_previous_card(memory: AgentMemory) -> None:
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="again", trigger=("messages", 4), keep=("messages", 2))
    state = conversation(2)
    state = apply(mw.before_model({"messages": state}, None), state)  # type: ignore[arg-type]
    assert sum(is_card(m) for m in state) == 1
    state += [HumanMessage(content="another question", id="h9"), AIMessage(content="another answer", id="a9")]
    state = apply(mw.before_model({"messages": state}, None), state)  # type: ignore[arg-type]
    assert sum(is_card(m) for m in state) == 1 and is_card(state[0])
    assert [m.id for m in state[1:]] == ["h9", "a9"]
    assert len(stored(memory, "again")) == 6  # the card is never stored


def test_system_messages_in_the_cut_part_are_kept(memory: AgentMemory) -> None:
    msgs = [SystemMessage(content="You are terse.", id="sys"), *conversation(3)]
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="sys", trigger=("messages", 3), keep=("messages", 2))
    new = apply(mw.before_model({"messages": msgs}, None), msgs)  # type: ignore[arg-type]
    assert isinstance(new[0], SystemMessage) and is_card(new[1]) and new[2:] == msgs[-2:]


# ---- safety of the cut ---------------------------------------------------------------------------
def tool_history() -> list[BaseMessage]:
    return [
        *conversation(2, size=5),
        HumanMessage(content="where is bob?", id="hq"),
        AIMessage(content="", tool_calls=[{"name": "where_is_bob", "args": {}, "id": "c1"}, {"name": "where_is_bob", "args": {}, "id": "c2"}], id="call"),
        ToolMessage(content="he is in Chicago", tool_call_id="c1", id="r1"),
        ToolMessage(content="really, Chicago", tool_call_id="c2", id="r2"),
    ]


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_a_tool_call_is_never_separated_from_its_results(memory: AgentMemory, keep: int) -> None:
    msgs = tool_history()
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id=f"tools{keep}", trigger=("messages", 2), keep=("messages", keep))
    cut = mw.cutoff_index(msgs)
    assert msgs[cut].id == "hq"  # back past the tool call to the newest human turn
    new = apply(mw.before_model({"messages": msgs}, None), msgs)  # type: ignore[arg-type]
    assert [m.id for m in new[1:]] == ["hq", "call", "r1", "r2"]


def test_self_contained_keeps_trailing_tool_traffic_raw(memory: AgentMemory) -> None:
    msgs = tool_history()
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="tools-self", trigger=("messages", 2), keep=("messages", 1), pattern="self_contained")
    new = apply(mw.before_model({"messages": msgs}, None), msgs)  # type: ignore[arg-type]
    assert is_card(new[0]) and "where is bob?" in message_text(new[0]).split("<recent_messages>")[1]
    assert [m.id for m in new[1:]] == ["call", "r1", "r2"]


def test_the_newest_human_message_is_never_dropped(memory: AgentMemory) -> None:
    long_question = HumanMessage(content="please remember " + "detail " * 300, id="hq")
    msgs = [*conversation(2), long_question, AIMessage(content="ok", id="ok")]
    mw = AgentMemoryMiddleware(memory, llm=None, thread_id="newest", trigger=("tokens", 50), keep=("tokens", 5))
    new = apply(mw.before_model({"messages": msgs}, None), msgs)  # type: ignore[arg-type]
    assert [m.id for m in new[1:]] == ["hq", "ok"]


def test_tool_loop_in_an_agent_keeps_pairs_and_the_question(memory: AgentMemory) -> None:
    @tool
    def where_is_bob() -> str:
        """Tell Bob where he is."""
        return "he is in Chicago"

    def respond(prompt: list[BaseMessage]) -> AIMessage | str:
        if isinstance(prompt[-1], HumanMessage) and "where" in message_text(prompt[-1]):
            return AIMessage(content="", tool_calls=[{"name": "where_is_bob", "args": {}, "id": f"call-{len(prompt)}"}])
        if isinstance(prompt[-1], ToolMessage):
            return "Bob is in Chicago."
        return "Sure. " + "words " * 30

    model = ScriptedChatModel(respond=respond)
    mw = AgentMemoryMiddleware(memory, llm=None, trigger=("messages", 3), keep=("messages", 1))
    agent = create_agent(model=model, tools=[where_is_bob], middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "loop"}}
    for text in ("hi, my name is bob", "tell me a story", "where is bob?"):
        result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    assert message_text(result["messages"][-1]) == "Bob is in Chicago."
    for prompt in model.prompts:
        called = {c["id"] for m in prompt if isinstance(m, AIMessage) for c in m.tool_calls}
        answered = {m.tool_call_id for m in prompt if isinstance(m, ToolMessage)}
        assert answered <= called and called <= answered  # no orphan on either side
        assert any(isinstance(m, HumanMessage) and not is_card(m) for m in prompt)
    last = model.prompts[-1]
    assert is_card(last[0]) and "where is bob?" in [message_text(m) for m in last]
    assert ("assistant", "Bob is in Chicago.") in stored(memory, "loop")
    assert all(role in ("user", "assistant") for role, _ in stored(memory, "loop"))


# ---- scope and async -------------------------------------------------------------------------------
def test_one_agentmemory_thread_per_langgraph_thread(memory: AgentMemory) -> None:
    mw = AgentMemoryMiddleware(memory, llm=None, agent_id="poet", trigger=None)
    agent = create_agent(model=ScriptedChatModel(respond=lambda p: "ok"), tools=[], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "I'm Ann"}]}, {"configurable": {"thread_id": "ann-1", "user_id": "ann"}})
    agent.invoke({"messages": [{"role": "user", "content": "I'm Ben"}]}, {"configurable": {"thread_id": "ben-1", "user_id": "ben"}})
    info = {t.thread_id: (t.user_id, t.agent_id) for t in memory.list_threads()}
    assert info == {"ann-1": ("ann", "poet"), "ben-1": ("ben", "poet")}
    assert stored(memory, "ann-1") == [("user", "I'm Ann"), ("assistant", "ok")]


async def test_async_agent_compacts_and_persists(memory: AgentMemory) -> None:
    model = ScriptedChatModel(respond=lambda p: "Noted. " + "filler " * 20)
    mw = AgentMemoryMiddleware(memory, llm=None, trigger=("messages", 4), keep=("messages", 1))
    agent = create_agent(model=model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "async-bob"}}
    for text in ("hi, my name is bob", "write a poem about cats", "now dogs", "what's my name?"):
        await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
    last = model.prompts[-1]
    assert is_card(last[0]) and "Bob" in message_text(last[0])
    assert message_text(last[-1]) == "what's my name?"
    assert len(stored(memory, "async-bob")) == 8


# ---- a SQLite checkpointer across process restarts ------------------------------------------------------
RESTART_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver
    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.integrations.langgraph import AgentMemoryMiddleware
    from agentmemory.integrations.langgraph.testing import ScriptedChatModel
    from agentmemory.integrations.langgraph.middleware import message_text

    folder, texts = sys.argv[1], sys.argv[2:]
    memory = AgentMemory(f"duckdb://{folder}/memory.duckdb", embedder=HashingEmbedder(128))
    model = ScriptedChatModel(respond=lambda p: "Your name is Bob." if "name is bob" in "".join(
        message_text(m).lower() for m in p) and "my name?" in message_text(p[-1]) else f"A poem for {text}: " + "line " * 40)
    with SqliteSaver.from_conn_string(f"{folder}/checkpoints.sqlite") as saver:
        middleware = AgentMemoryMiddleware(memory, llm=None, user_id="bob", trigger=("messages", 4), keep=("messages", 2))
        agent = create_agent(model=model, tools=[], middleware=[middleware], checkpointer=saver)
        for text in texts:
            result = agent.invoke({"messages": [{"role": "user", "content": text}]}, {"configurable": {"thread_id": "1"}})
    rows = [[r.role, r.content] for r in memory.get_thread("1").get_messages(0, -1)]
    memory.close()
    print(json.dumps({"prompt": [[type(m).__name__, message_text(m)] for m in model.prompts[-1]],
                      "answer": message_text(result["messages"][-1]), "stored": rows}))
    """
)


def test_sqlite_checkpointer_and_duckdb_survive_process_restarts(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    pytest.importorskip("agentmemory_duckdb")
    script = tmp_path / "turn.py"
    script.write_text(RESTART_SCRIPT)
    outputs = []
    runs = [["hi, my name is bob", "write a short poem about cats", "now do the same but for dogs"], ["what's my name?"]]
    for texts in runs:  # two processes: the second starts from the checkpoint and the store on disk
        done = subprocess.run([sys.executable, str(script), str(tmp_path), *texts], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    final = outputs[-1]
    kinds = [kind for kind, _ in final["prompt"]]
    assert kinds[0] == "HumanMessage" and final["prompt"][0][1].startswith("<context_card>")
    assert "Bob" in final["prompt"][0][1]
    assert final["prompt"][-1] == ["HumanMessage", "what's my name?"]
    assert len(kinds) == 3  # card + the kept tail of 2, restored from the checkpoint after restarts
    assert final["answer"] == "Your name is Bob."
    # every turn stored exactly once, although each process saw the checkpointed tail again
    contents = [c for _, c in final["stored"]]
    assert len(contents) == 8 and len(set(contents)) == 8
    assert contents[0] == "hi, my name is bob" and contents[-1] == "Your name is Bob."


def test_importing_agentmemory_does_not_import_langchain() -> None:
    code = (
        "import sys, agentmemory, agentmemory.integrations; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'langgraph')); "
        "print(heavy); assert not heavy"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
