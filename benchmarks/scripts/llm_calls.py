"""LLM calls and tokens per turn with an LLM configured: agentmemory's default (one call per
``add_messages``) next to the earlier layout (``SEPARATE_LLM_CALLS``: extraction, linking and
summary calls) and, when it is installed, mem0 on the same conversation (a measurement, not a test).

    .venv/bin/python benchmarks/scripts/llm_calls.py [--turns 100] [--seed 0] [--json PATH]

    # mem0 next to it (mem0ai is not a dependency of this project; measured with 2.2.1):
    python -m venv /tmp/mem0venv && /tmp/mem0venv/bin/pip install mem0ai pluggy numpy bpe-openai
    PYTHONPATH=.:benchmarks MEM0_TELEMETRY=False /tmp/mem0venv/bin/python benchmarks/scripts/llm_calls.py --mem0

Every chat request goes over HTTP to the local scripted OpenAI-compatible server
(``agentmemory.testing.ScriptedServer``), which sees each one, so the counts are exact. A turn is
one ``add_messages`` of a user message and the assistant's reply, taken in order from the
benchmark's synthetic conversation (``generate_conversation(0, seed)``: 20 turns per session, one
thread per session, one user; facts planted among small talk, some of them updated later).

Tokens are counted with the ``cl100k_base`` tokenizer (bpe-openai, offline) on what was sent and
answered: prompt tokens = every message's content plus OpenAI's chat framing (4 per message, 3 per
reply) plus the ``response_format`` (a JSON schema is sent with every structured call and
providers bill it as input); completion tokens = the answer's content. Record ids are random and tokenise
to slightly different lengths, so prompt tokens move by under 1% between runs; calls do not.

The scripted model answers as a model following the prompt would, the same way in every layout:
one fact per user message that states something about the user (the conversation generator
knows which), nothing for small talk; a ``supersedes`` link from an updated fact to the stored
value it replaces when that memory is among the candidates shown; a running summary of at most
150 words. So prompt tokens are those of the real prompts, and completion tokens are those of
equivalent answers in each layout (absolute completion counts depend on the model). The memories,
supersedes links and summaries each layout ends with are printed beside the counts: equal
numbers mean the fewer calls lost nothing on this conversation. Embeddings are computed locally
(``HashingEmbedder``) for agentmemory and through the server for mem0; only chat calls are
counted.

mem0 (``--mem0``) runs offline against the same server: its OpenAI LLM and embedder providers
pointed at the server, a local Qdrant path, history in SQLite, telemetry off. mem0 2.2.1 makes
one ADD-only extraction call per ``add`` and keeps no running summary and no links; without
spaCy (``mem0ai[nlp]``, whose model is a download) its entity linking is skipped, which makes no
LLM call either way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from agentmemory_bench.conversations import Conversation, Message, generate_conversation

from agentmemory import SEPARATE_LLM_CALLS, AgentMemory, HashingEmbedder, LinkType, MemoryExtractionConfig
from agentmemory.llm import OpenAICompatibleLlm
from agentmemory.records import MEMORY_TYPES
from agentmemory.spi import RecordFilter
from agentmemory.testing import ScriptedServer
from agentmemory.tokens import EncodingCounter

TOKENS = EncodingCounter("cl100k_base").count  # the core's offline loader, as locomo.py uses
SUMMARY_WORDS = 150


def tokens(text: str) -> int:
    """cl100k_base tokens of ``text``."""
    return TOKENS(text)


# ---- the scripted model ----------------------------------------------------------------------------
class Model:
    """Answers every kind of request (agentmemory's extraction / links / summary, mem0's
    extraction) from what the conversation generator knows about each message."""

    def __init__(self, conv: Conversation) -> None:
        self.by_content: dict[str, Message] = {m.content: m for m in conv.messages}
        self.replaces: dict[str, set[str]] = {}  # an updated value -> the values it replaces
        for q in conv.questions:
            if q.kind == "update":
                values = [*q.stale_keys, q.evidence[0].key]
                for i, value in enumerate(values):
                    self.replaces[value] = set(values[:i])

    def facts(self, contents: list[str]) -> list[tuple[str, list[str]]]:
        """``(memory text, answer keys)`` for each fact-bearing user message among ``contents``."""
        out = []
        for content in contents:
            msg = self.by_content.get(content)
            if msg is not None and msg.role == "user" and msg.keys:
                out.append((f"The user says: {content}"[:240], list(msg.keys)))
        return out

    def stale_targets(self, keys: list[str], candidates: list[tuple[str, str]]) -> list[str]:
        """Ids of candidate memories holding a value that ``keys`` replace."""
        old = {v for k in keys for v in self.replaces.get(k, ())}
        return [cid for cid, text in candidates if any(re.search(rf"\b{re.escape(v)}\b", text) for v in old)]

    def summary(self, previous: str, contents: list[str]) -> dict[str, Any]:
        """The previous summary plus the new facts, oldest sentences dropped past the cap."""
        said = [f"The user said: {text}" for text, _ in self.facts(contents)]
        words = " ".join([previous, *said]).split() if (previous or said) else "The user is chatting about a project.".split()
        return {"summary": " ".join(words[-SUMMARY_WORDS:]), "topics": ["personal facts", "projects"]}

    def __call__(self, body: dict[str, Any]) -> Any:
        fmt = body.get("response_format") or {}
        props = (fmt.get("json_schema") or {}).get("schema", {}).get("properties", {})
        user = body["messages"][1]["content"] if len(body["messages"]) > 1 else ""
        if "memories" in props:
            return self.extraction(user, "summary" in props)
        if "links" in props:
            return self.links(user)
        if "summary" in props:
            root = ET.fromstring(f"<p>{user}</p>")
            new = [m.findtext("content") or "" for m in root.findall("new_messages/message")]
            return self.summary(root.findtext("previous_summary/content") or "", new)
        if "## New Messages" in user:
            return self.mem0_extraction(user)
        raise ValueError(f"unexpected request: {json.dumps(body)[:300]}")

    def extraction(self, user: str, with_summary: bool) -> dict[str, Any]:
        root = ET.fromstring(f"<p>{user}</p>")
        new = [m.findtext("content") or "" for m in root.findall("conversation/message") if m.get("new") == "true"]
        past = [(m.findtext("id") or "", m.findtext("content") or "") for m in root.findall("past_memories/memory")]
        memories = []
        for text, keys in self.facts(new):
            links = [{"target_id": t, "link_type": "supersedes"} for t in self.stale_targets(keys, past)]
            memories.append({"type": "fact", "content": text, "entities": keys, "valid_until": None, "links": links, "slot": None})
        answer: dict[str, Any] = {"memories": memories}
        if with_summary:
            answer["summary"] = self.summary(root.findtext("summary/content") or "", new)
        return answer

    def links(self, user: str) -> dict[str, Any]:
        root = ET.fromstring(f"<p>{user}</p>")
        candidates = [(m.findtext("id") or "", m.findtext("content") or "") for m in root.findall("candidates/memory")]
        out = []
        for m in root.findall("new_memories/memory"):
            content = (m.findtext("content") or "").removeprefix("The user says: ")
            msg = self.by_content.get(content)
            for target in self.stale_targets(list(msg.keys) if msg else [], candidates):
                out.append({"source_id": m.findtext("id") or "", "target_id": target, "link_type": "supersedes"})
        return {"links": out}

    def mem0_extraction(self, user: str) -> dict[str, Any]:
        section = user.split("## New Messages", 1)[1].split("\n## ", 1)[0]
        contents = [line.split(": ", 1)[1] for line in section.strip().splitlines() if line.startswith("user: ")]
        return {"memory": [{"text": text, "attributed_to": "user"} for text, _ in self.facts(contents)]}


# ---- the meter ---------------------------------------------------------------------------------------
@dataclass
class Row:
    """One setup's totals over the run."""

    setup: str
    turns: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    memories: int | None = None
    supersedes_links: int | None = None
    summaries: int | None = None

    def per_100(self, value: int) -> float:
        return 100 * value / self.turns if self.turns else 0.0


class Meter:
    """Wraps the model: counts every chat request and its tokens into the current row."""

    def __init__(self, model: Callable[[dict[str, Any]], Any]) -> None:
        self.model = model
        self.row = Row("")

    def __call__(self, body: dict[str, Any]) -> Any:
        answer = self.model(body)
        content = answer if isinstance(answer, str) else json.dumps(answer)
        fmt = body.get("response_format")
        prompt = sum(tokens(str(m.get("content") or "")) + 4 for m in body["messages"]) + 3
        prompt += tokens(json.dumps(fmt)) if fmt else 0
        schema = (fmt or {}).get("json_schema", {}).get("schema", {}).get("properties", {})
        kind = "+".join(k for k in ("memories", "links", "summary") if k in schema) or "mem0 extraction"
        self.row.calls += 1
        self.row.kinds[kind.replace("memories", "extraction")] += 1
        self.row.prompt_tokens += prompt
        self.row.completion_tokens += tokens(content)
        return answer


def turns_of(conv: Conversation, limit: int) -> Iterator[tuple[int, list[Message]]]:
    """``(session, [user, assistant])`` for the first ``limit`` turns."""
    count = 0
    for s, session in enumerate(conv.sessions):
        for i in range(0, len(session) - 1, 2):
            if count == limit:
                return
            count += 1
            yield s, session[i : i + 2]


def run_agentmemory(server: ScriptedServer, meter: Meter, conv: Conversation, turns: int, setup: str, config: MemoryExtractionConfig) -> Row:
    """Feed ``turns`` turns through ``add_messages`` with ``config`` at client level."""
    meter.row = row = Row(setup)
    llm = OpenAICompatibleLlm("scripted", base_url=server.base_url, max_retries=0)
    client = AgentMemory("memory://", embedder=HashingEmbedder(256), llm=llm, memory_extraction_config=config)
    try:
        threads: dict[int, Any] = {}
        for session, pair in turns_of(conv, turns):
            if session not in threads:
                threads[session] = client.create_thread(thread_id=f"{conv.conversation_id}-s{session}", user_id=conv.user_id)
            threads[session].add_messages([{"role": m.role, "content": m.content, "timestamp": m.timestamp} for m in pair])
            row.turns += 1
        row.memories = len(client.store.query(RecordFilter(record_types=MEMORY_TYPES)))
        row.supersedes_links = sum(1 for link in client.store.links() if link.link_type is LinkType.SUPERSEDES)
        row.summaries = sum(1 for t in threads.values() if t.get_summary().revision > 0)
    finally:
        client.close()
    return row


def run_mem0(server: ScriptedServer, meter: Meter, conv: Conversation, turns: int) -> Row:
    """Feed the same turns through mem0's ``Memory.add`` (offline, same server)."""
    import hashlib

    from mem0 import Memory

    meter.row = row = Row("mem0 2.x (" + _version("mem0ai") + ")")

    def embed(texts: list[str]) -> list[list[float]]:  # deterministic, content-dependent
        return [[b / 255 for b in hashlib.sha256(t.encode()).digest()] * 8 for t in texts]

    server.embed = embed
    tmp = tempfile.mkdtemp(prefix="mem0-llm-calls-")
    memory = Memory.from_config({
        "llm": {"provider": "openai", "config": {"model": "scripted", "api_key": "unused", "openai_base_url": server.base_url}},
        "embedder": {"provider": "openai", "config": {"model": "scripted", "api_key": "unused", "openai_base_url": server.base_url, "embedding_dims": 256}},
        "vector_store": {"provider": "qdrant", "config": {"path": os.path.join(tmp, "qdrant"), "collection_name": "bench", "embedding_model_dims": 256}},
        "history_db_path": os.path.join(tmp, "history.db"),
    })
    stored = 0
    for session, pair in turns_of(conv, turns):
        result = memory.add([{"role": m.role, "content": m.content} for m in pair], user_id=conv.user_id, run_id=f"s{session}")
        stored += sum(1 for r in result.get("results", []) if r.get("event") == "ADD")
        row.turns += 1
    row.memories = stored
    return row


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def print_table(rows: list[Row]) -> None:
    """The comparison table (markdown)."""
    head = ["setup", "LLM calls / add_messages", "calls / 100 turns", "prompt tokens / 100 turns",
            "completion tokens / 100 turns", "calls by kind", "memories", "supersedes links", "threads with a summary"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r.kinds.items()))
        cells = [r.setup, f"{r.calls / r.turns:.2f}", f"{r.per_100(r.calls):.0f}", f"{r.per_100(r.prompt_tokens):,.0f}",
                 f"{r.per_100(r.completion_tokens):,.0f}", kinds,
                 *("—" if v is None else str(v) for v in (r.memories, r.supersedes_links, r.summaries))]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="add_messages calls (user + assistant each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mem0", action="store_true", help="also run mem0 (must be importable)")
    parser.add_argument("--json", help="write every number to this file")
    args = parser.parse_args(argv)
    sessions = -(-args.turns // 20)
    conv = generate_conversation(0, seed=args.seed, sessions=max(sessions, 2), turns_per_session=20)
    meter = Meter(Model(conv))
    rows = []
    with ScriptedServer(chat=meter) as server:
        rows.append(run_agentmemory(server, meter, conv, args.turns, "agentmemory, default (one call)", MemoryExtractionConfig()))
        rows.append(run_agentmemory(server, meter, conv, args.turns, "agentmemory, SEPARATE_LLM_CALLS (old default)", SEPARATE_LLM_CALLS))
        if args.mem0:
            try:
                rows.append(run_mem0(server, meter, conv, args.turns))
            except ImportError as exc:
                print(f"mem0 skipped: {exc}", file=sys.stderr)
    print(f"{args.turns} turns of conversation {conv.conversation_id} (seed {args.seed}), {sum(1 for _ in turns_of(conv, args.turns)) * 2} messages\n")
    print_table(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump([{**asdict(r), "kinds": dict(r.kinds)} for r in rows], fh, indent=2)


if __name__ == "__main__":
    main()
