"""Inspect commands: threads, messages, memories, links, search, card, stats (see ``cli``).

Each opens the store the way ``AgentMemory()`` resolves it (``--store``, else
``AGENTMEMORY_STORE``, else the default location), reads through the public API where it has
the call (the SPI's ``query``/``count`` where it has not: counts, invalid-only listings, the
newest messages), prints a Rich table or exact JSON, and never writes: no index build, no
summary update.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ..client import AgentMemory, user_metadata
from ..errors import InvalidArgument, NotFound
from ..records import MEMORY_TYPES, SEARCHABLE_TYPES, Record, RecordStatus, RecordType, SearchResult
from ..registry import default_store_uri
from ..spi import Order, RecordFilter, SchemaPolicy
from ..tokens import resolve_token_counter
from ..validation import validate_memory_type, validate_positive_int
from . import app
from .options import (
    EmbedderOption,
    FormatOption,
    JsonlOption,
    JsonOption,
    OutputFormat,
    StoreOption,
    cli_errors,
    dump_json,
    emit_document,
    emit_rows,
    note,
    open_memory,
    output_format,
)

DEFAULT_LIMIT = 100
EXISTING = SchemaPolicy.REQUIRE_EXISTING
"""Inspecting never creates a store: a mistyped path is an error, not a new empty file."""
STATS_SCAN_PAGE = 5_000
STATS_TABLE_USERS = 20

UserFilter = Annotated[str | None, typer.Option("--user", help="Only records of this user id.")]
AgentFilter = Annotated[str | None, typer.Option("--agent", help="Only records of this agent id.")]
ThreadFilter = Annotated[str | None, typer.Option("--thread", help="Only records of this thread id.")]
LimitOption = Annotated[int | None, typer.Option("--limit", help=f"At most this many rows (default {DEFAULT_LIMIT}).")]
OffsetOption = Annotated[int, typer.Option("--offset", help="Skip this many rows first.")]
MetadataFilterOption = Annotated[
    str | None,
    typer.Option("--metadata", help='Metadata filter as JSON, e.g. \'{"project": "ledger"}\' or \'{"tags": {"$array_contains": "x"}}\'.'),
]


# ---- helpers -------------------------------------------------------------------------------
def _scope(**ids: str | None) -> dict[str, Any]:
    """The scope keys the user gave (``user_id=…``); an omitted one stays unconstrained."""
    return {f"{name}_id": value for name, value in ids.items() if value is not None}


def _metadata_filter(text: str | None) -> dict[str, Any] | None:
    """``--metadata`` parsed as a JSON object (the core validates the filter itself)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("--metadata", f"is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("--metadata", f"must be a JSON object, got {type(value).__name__}: {text!r}")
    return value


def _split(values: Sequence[str] | None) -> list[str] | None:
    """Repeated and/or comma-separated option values as one list (None when none given)."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _status(value: str | None) -> RecordStatus | None:
    if value is None:
        return None
    try:
        return RecordStatus(value.lower())
    except ValueError:
        known = ", ".join(s.value for s in RecordStatus)
        raise InvalidArgument("--status", f"must be one of {known}, got {value!r}") from None


def _time(value: datetime | None) -> Text:
    """A timestamp for a table, to the minute in its own offset (JSON keeps the exact value)."""
    return Text("" if value is None else value.strftime("%Y-%m-%d %H:%M %z"), style="dim")


def _text(value: Any, style: str = "") -> Text:
    """A table cell that shows ``value`` literally (no Rich markup in stored text)."""
    return Text("" if value is None else str(value), style=style)


def _content(content: str, record_id: str, extra: dict[str, Any] | None = None) -> Text:
    """Content with the record id (and user metadata, if any) below it, dimmed."""
    cell = Text(content)
    cell.append(f"\n{record_id}", style="dim cyan")
    if extra:
        cell.append("\n" + json.dumps(extra, ensure_ascii=False), style="dim")
    return cell


def _meta_cell(record_meta: dict[str, Any]) -> Text:
    return _text(json.dumps(record_meta, ensure_ascii=False) if record_meta else "", "dim")


def _status_cell(status: RecordStatus) -> Text:
    return _text(status.value, "green" if status is RecordStatus.VALID else "yellow")


def _more_hint(shown: int, limit: int, offset: int) -> None:
    if shown and shown == limit:
        note(f"(first {shown} shown; there may be more: --offset {offset + shown})")


SCOPES = ("user_id", "agent_id", "thread_id")


def _record_table(title: str, rows: Sequence[Record]) -> Table:
    """Records as a table: type, status, the scope columns that differ between rows (one shared
    value goes into the title), time, and content with its id."""
    shared = {k: getattr(rows[0], k) for k in SCOPES if len({getattr(r, k) for r in rows}) == 1} if rows else {}
    varying = [k for k in SCOPES if k not in shared]
    label = " · ".join(f"{k.removesuffix('_id')} {v}" for k, v in shared.items() if v is not None)
    table = Table(title=f"{title} · {label}" if label else title, caption=f"{len(rows)} shown", show_lines=True)
    table.add_column("type")
    table.add_column("status")
    for key in varying:
        table.add_column(key.removesuffix("_id"), overflow="fold")
    table.add_column("timestamp")
    table.add_column("content / id", ratio=1, overflow="fold")
    for r in rows:
        scope = [_text(getattr(r, k)) for k in varying]
        table.add_row(_text(r.record_type.value), _status_cell(r.status), *scope, _time(r.timestamp),
                      _content(r.content, r.record_id, user_metadata(r)))
    return table


# ---- threads --------------------------------------------------------------------------------
@app.command("threads")
def threads_command(
    user: UserFilter = None,
    agent: AgentFilter = None,
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """List threads with their user, agent, message and memory counts.

    In creation order; --user/--agent narrow the list."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        size = DEFAULT_LIMIT if limit is None else limit
        infos = memory.list_threads(**_scope(user=user, agent=agent), limit=size, offset=offset)
        now = memory.now()
        rows = [
            {
                **info.model_dump(),
                "message_count": memory.store.count(RecordFilter(thread_id=info.thread_id, record_types=frozenset({RecordType.MESSAGE}), alive_at=now)),
                "memory_count": memory.store.count(RecordFilter(thread_id=info.thread_id, record_types=MEMORY_TYPES, alive_at=now)),
            }
            for info in infos
        ]

    def table() -> Table:
        t = Table(title="threads", caption=f"{len(rows)} shown")
        for name in ("thread", "user", "agent", "created", "messages", "memories"):
            t.add_column(name, justify="right" if name in ("messages", "memories") else "left", overflow="fold")
        if any(row["metadata"] for row in rows):
            t.add_column("metadata", overflow="fold")
        for row in rows:
            meta = [_meta_cell(row["metadata"])] if len(t.columns) > 6 else []
            t.add_row(
                _text(row["thread_id"], "cyan"), _text(row["user_id"]), _text(row["agent_id"]), _time(row["created_at"]),
                _text(row["message_count"]), _text(row["memory_count"]), *meta,
            )
        return t

    emit_rows(out, rows, table)
    if out is OutputFormat.TABLE:
        _more_hint(len(rows), size, offset)


# ---- messages -------------------------------------------------------------------------------
@app.command("messages")
def messages_command(
    thread: Annotated[str, typer.Argument(help="The thread id.", show_default=False)],
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    last: Annotated[int | None, typer.Option("--last", help="Only the newest N messages (not with --limit/--offset).")] = None,
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """Show a thread's messages in order.

    From --offset (at most --limit), or the newest --last N."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        if last is not None and (limit is not None or offset):
            raise InvalidArgument("--last", "cannot be combined with --limit/--offset")
    size = DEFAULT_LIMIT if limit is None else limit
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        memory.get_thread(thread)  # NotFound for an unknown thread, not an empty list
        if last is None:
            rows = memory.list_messages(thread_id=thread, limit=size, offset=offset)
        else:
            newest = validate_positive_int("--last", last, minimum=0)
            flt = RecordFilter(thread_id=thread, record_types=frozenset({RecordType.MESSAGE}), alive_at=memory.now())
            rows = memory.store.query(flt, order=Order.SEQ_DESC, limit=newest)[::-1]

    def table() -> Table:
        t = Table(title=f"messages of {thread}", caption=f"{len(rows)} shown", show_lines=True)
        t.add_column("seq", justify="right")
        t.add_column("timestamp")
        t.add_column("role")
        t.add_column("content / id", ratio=1, overflow="fold")
        for r in rows:
            t.add_row(_text(r.seq), _time(r.timestamp), _text(r.role, "bold"), _content(r.content, r.record_id, user_metadata(r)))
        return t

    emit_rows(out, rows, table)
    if out is OutputFormat.TABLE and last is None:
        _more_hint(len(rows), size, offset)


# ---- memories -------------------------------------------------------------------------------
@app.command("memories")
def memories_command(
    user: UserFilter = None,
    agent: AgentFilter = None,
    thread: ThreadFilter = None,
    types: Annotated[list[str] | None, typer.Option("--type", help="memory, fact, guideline or preference; repeat or comma-separate for several.")] = None,
    status: Annotated[str | None, typer.Option("--status", help="valid or invalid (default: both).")] = None,
    metadata: MetadataFilterOption = None,
    limit: LimitOption = None,
    offset: OffsetOption = 0,
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """List memories (memory, fact, guideline, preference) with filters.

    In insertion order, filtered by scope, type, status and a JSON metadata filter."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        wanted = _split(types)
        memory_types = None if wanted is None else [validate_memory_type("--type", t) for t in wanted]
        only = _status(status)
        meta = _metadata_filter(metadata)
    size = DEFAULT_LIMIT if limit is None else limit
    scope = _scope(user=user, agent=agent, thread=thread)
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        if only is RecordStatus.INVALID:
            rows = _invalid_memories(memory, scope, memory_types, meta, size, offset)
        else:
            rows = memory.list_memories(
                **scope, memory_types=memory_types, metadata_filter=meta,
                include_invalid=only is None, limit=size, offset=offset,
            )
    emit_rows(out, rows, lambda: _record_table("memories", rows))
    if out is OutputFormat.TABLE:
        _more_hint(len(rows), size, offset)


def _invalid_memories(
    memory: AgentMemory, scope: dict[str, Any], types: list[RecordType] | None, meta: dict[str, Any] | None, limit: int, offset: int
) -> list[Record]:
    """Only invalid memories: ``list_memories`` has ``include_invalid`` but no invalid-only
    switch, so this goes through the SPI after validating like the public call."""
    memory.list_memories(**scope, memory_types=types, metadata_filter=meta, limit=0)  # same argument checks
    flt = RecordFilter(
        record_types=frozenset(types) if types else MEMORY_TYPES,
        statuses=frozenset({RecordStatus.INVALID}),
        metadata_filter=meta,
        alive_at=memory.now(),
        **scope,
    )
    return memory.store.query(flt, limit=limit, offset=offset)


# ---- links ----------------------------------------------------------------------------------
@app.command("links")
def links_command(
    record_id: Annotated[str, typer.Argument(help="A memory-like record's id.", show_default=False)],
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """Show the links of a memory and the records at their other end.

    Both directions, each relation read from this memory's side (supersedes / is_superseded_by)."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        subject = memory.get_memory(record_id)
        links = memory.list_record_links(record_id)
        others: dict[str, Record | None] = {}
        for link in links:
            other_id = link.target_id if link.source_id == record_id else link.source_id
            try:
                others[other_id] = memory.get_memory(other_id)
            except NotFound:
                others[other_id] = None

    def table() -> RenderableType:
        t = Table(title=f"links of {record_id}", caption=f"{len(links)} links", show_lines=True)
        t.add_column("relation")
        t.add_column("type")
        t.add_column("status")
        t.add_column("other record / id", ratio=1, overflow="fold")
        t.add_column("link id / created", overflow="fold", style="dim")
        for link in links:
            other_id = link.target_id if link.source_id == record_id else link.source_id
            other = others[other_id]
            t.add_row(
                _text(link.relation_from(record_id), "bold"), _text(other.record_type.value if other else ""),
                _status_cell(other.status) if other else _text("(gone)", "red"),
                _content(other.content if other else "", other_id), Text(f"{link.link_id}\n") + _time(link.created_at),
            )
        head = Text(f"[{subject.record_type.value}, {subject.status.value}] ", style="bold")
        return Group(head + Text(subject.content), t)

    emit_rows(out, links, table)


# ---- search ---------------------------------------------------------------------------------
@app.command("search")
def search_command(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    user: Annotated[str, typer.Option("--user", help="The user whose records are searched (required: scope is a hard boundary).")],
    agent: AgentFilter = None,
    thread: ThreadFilter = None,
    strategy: Annotated[str | None, typer.Option("--strategy", help="vector, keyword or hybrid (default: hybrid where the store has keyword search).")] = None,
    types: Annotated[list[str] | None, typer.Option("--types", help="Record types to search (message, memory, fact, guideline, preference, user, agent); repeat or comma-separate.")] = None,
    hops: Annotated[int, typer.Option("--hops", help="Attach memories linked up to this many hops away (0-5).")] = 0,
    max_results: Annotated[int, typer.Option("--max-results", "-n", help="At most this many results.")] = 10,
    metadata: MetadataFilterOption = None,
    valid_only: Annotated[bool, typer.Option("--valid-only", help="Leave invalid (superseded, refined, duplicated) records out.")] = False,
    token_budget: Annotated[int | None, typer.Option("--token-budget", help="Hard cap on the results' tokens.")] = None,
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """Search one user's records as AgentMemory.search does.

    Score, type and content of each hit, with the memories linked to it (--hops)."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        meta = _metadata_filter(metadata)
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        results = memory.search(
            query, user_id=user, agent_id=agent, thread_id=thread, strategy=strategy, record_types=_split(types),
            num_hops=hops, max_results=max_results, metadata_filter=meta,
            include_invalid_results=not valid_only, token_budget=token_budget,
        )
    emit_rows(out, results, lambda: _results_table(query, results))


def _results_table(query: str, results: Sequence[SearchResult]) -> Table:
    t = Table(title=f"search: {query}", caption=f"{len(results)} results", show_lines=True)
    t.add_column("#", justify="right")
    t.add_column("score", justify="right")
    t.add_column("type")
    t.add_column("status")
    t.add_column("thread", overflow="fold")
    t.add_column("content / id", ratio=1, overflow="fold")
    for rank, res in enumerate(results, 1):
        r = res.record
        t.add_row(_text(rank), _text(f"{res.score:.4f}"), _text(r.record_type.value), _status_cell(r.status),
                  _text(r.thread_id), _content(r.content, r.record_id))
        for linked in res.linked_results:
            lr = linked.record
            t.add_row(_text(""), _text(f"↳ hop {linked.depth}", "dim"), _text(lr.record_type.value), _status_cell(lr.status),
                      _text(lr.thread_id), Text(f"{linked.relation}: ", style="italic") + _content(lr.content, lr.record_id))
    return t


# ---- card -----------------------------------------------------------------------------------
@app.command("card")
def card_command(
    thread: Annotated[str, typer.Argument(help="The thread id.", show_default=False)],
    max_relevant_results: Annotated[int | None, typer.Option("--max-relevant-results", help="At most this many relevant records (default 5, or the sum of --min-type).")] = None,
    min_type: Annotated[list[str] | None, typer.Option("--min-type", help="Reserve slots for a type, TYPE=N (e.g. fact=1); repeat or comma-separate.")] = None,
    max_recent_messages: Annotated[int, typer.Option("--max-recent-messages", help="Raw recent messages inside the card (0, or --except-last).")] = 0,
    except_last: Annotated[int, typer.Option("--except-last", help="Leave the newest N messages out of everything derived (the caller appends them).")] = 0,
    fallback_messages: Annotated[int, typer.Option("--fallback-messages", help="Messages the offline summary falls back to.")] = 5,
    metadata: MetadataFilterOption = None,
    include_invalid: Annotated[bool, typer.Option("--include-invalid", help="Let invalid records into the relevant information.")] = False,
    token_budget: Annotated[int | None, typer.Option("--token-budget", help="Hard cap on the card's relevant information in tokens.")] = None,
    soft_token_budget: Annotated[int | None, typer.Option("--soft-token-budget", help="Soft cap: the record that crosses it is kept.")] = None,
    renderer: Annotated[str | None, typer.Option("--renderer", help="Card renderer (xml, markdown, or a plugin's); default xml.")] = None,
    token_counter: Annotated[str | None, typer.Option("--token-counter", help="What budgets and the count use: estimate (default), cl100k_base, o200k_base, or a plugin's.")] = None,
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """Print a thread's context card exactly as the model gets it, with its token count.

    The card (get_context_card) goes to stdout, the token count to stderr; --json holds both."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        minimums = _type_minimums(_split(min_type))
        meta = _metadata_filter(metadata)
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        if renderer is not None:
            memory.card_renderer = renderer
        if token_counter is not None:
            with cli_errors():
                memory.token_counter = resolve_token_counter(token_counter, memory.llm, memory.plugins)
        card = memory.get_thread(thread).get_context_card(
            max_relevant_results=max_relevant_results, min_relevant_results_by_type=minimums,
            max_recent_messages=max_recent_messages, except_last_messages=except_last,
            fallback_message_count=fallback_messages, metadata_filter=meta, include_invalid_results=include_invalid,
            token_budget=token_budget, soft_token_budget=soft_token_budget,
        )
    tokens = card.tokens
    document = {"thread_id": thread, "content": card.content, **card.model_dump(exclude={"content"})}

    def render() -> None:
        if card.content:
            typer.echo(card.content)
        note(f"{thread}: {tokens} tokens ({card.token_counter}; {len(card.relevant)} relevant, {len(card.recent_messages)} recent messages)"
             if card.content else f"{thread}: empty card (0 tokens)")

    emit_document(out, document, render)


def _type_minimums(items: list[str] | None) -> dict[str, int] | None:
    """``--min-type fact=1`` pairs as ``min_relevant_results_by_type``."""
    if items is None:
        return None
    minimums: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip().isdigit():
            raise InvalidArgument("--min-type", f"expected TYPE=N (e.g. fact=1), got {item!r}")
        minimums[name.strip()] = int(value)
    return minimums


# ---- stats ----------------------------------------------------------------------------------
@app.command("stats")
def stats_command(
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    fmt: FormatOption = OutputFormat.TABLE,
    as_json: JsonOption = False,
    as_jsonl: JsonlOption = False,
) -> None:
    """Show counts per type, status and user, the store, and its search indexes.

    The store's backend, dimension, path and details; each index's threshold and whether the
    store has reached it. Builds nothing."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    uri = store
    if uri is None:
        with cli_errors():
            from ..plugins import get_plugin_manager

            uri = default_store_uri(get_plugin_manager())
    with open_memory(store, embedder, schema_policy=EXISTING) as memory:
        document = _stats(memory, uri)
    emit_document(out, document, lambda: _render_stats(document))


def _stats(memory: AgentMemory, uri: str) -> dict[str, Any]:
    """The ``stats`` document (counts of live records; expired ones awaiting purge apart)."""
    store = memory.store
    now = memory.now()
    by_type = {
        rtype.value: {s.value: store.count(RecordFilter(record_types=frozenset({rtype}), statuses=frozenset({s}), alive_at=now)) for s in RecordStatus}
        for rtype in RecordType
    }
    total = sum(sum(row.values()) for row in by_type.values())
    with_vector = store.count(RecordFilter(record_types=SEARCHABLE_TYPES))
    info = store.info()
    return {
        "store": {"uri": uri, "backend": info.name, "dimension": info.dimension, "path": info.path, "details": info.extra},
        "embedder": {"name": memory.embedder.name, "dimension": memory.embedder.dimension},
        "records": total,
        "expired_awaiting_purge": store.count(RecordFilter(expired_at=now)),
        "by_type": by_type,
        "by_status": {s.value: sum(row[s.value] for row in by_type.values()) for s in RecordStatus},
        "by_user": [{"user_id": u, "records": n} for u, n in _user_counts(memory, total).most_common()],
        "links": len(store.links()),
        "indexes": {
            name: {"threshold": threshold, "records_with_vector": with_vector, "reached": with_vector >= threshold}
            for name, threshold in store.index_thresholds().items()
        },
    }


def _user_counts(memory: AgentMemory, total: int) -> Counter[str | None]:
    """Live records per user id (None: records of no user). Users are found from threads and
    profiles and counted with ``count``; when that does not add up to ``total`` (memories of a
    user without a thread or profile), one paged scan by ``seq`` counts every record instead."""
    store, now = memory.store, memory.now()
    known = {r.user_id for r in store.query(RecordFilter(record_types=frozenset({RecordType.THREAD, RecordType.USER})))}
    counts: Counter[str | None] = Counter()
    for user_id in sorted(known, key=lambda u: (u is None, u or "")):
        counts[user_id] = store.count(RecordFilter(user_id=user_id, alive_at=now))
    if None not in known:
        counts[None] = store.count(RecordFilter(user_id=None, alive_at=now))
    if sum(counts.values()) == total:
        return +counts
    return Counter(r.user_id for r in _scan(memory))


def _scan(memory: AgentMemory) -> Iterable[Record]:
    """Every live record in ``seq`` order, a page at a time (constant memory)."""
    now, next_seq = memory.now(), None
    while True:
        page = memory.store.query(RecordFilter(alive_at=now, min_seq=next_seq), limit=STATS_SCAN_PAGE)
        yield from page
        if len(page) < STATS_SCAN_PAGE:
            return
        next_seq = page[-1].seq + 1


def _render_stats(doc: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    st = doc["store"]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("store", _text(st["uri"]))
    head.add_row("backend", _text(f"{st['backend']} ({st['dimension']}-d)"))
    head.add_row("path", _text(st["path"]))
    head.add_row("embedder", _text(f"{doc['embedder']['name']} ({doc['embedder']['dimension']}-d)"))
    head.add_row("records", _text(f"{doc['records']} live, {doc['expired_awaiting_purge']} expired awaiting purge, {doc['links']} links"))
    for key, value in st["details"].items():
        shown = "none" if value is None else dump_json(value) if isinstance(value, (dict, list)) else value
        head.add_row(_text(key, "dim"), _text(shown))
    types = Table(title="records per type")
    for name in ("type", "valid", "invalid", "total"):
        types.add_column(name, justify="left" if name == "type" else "right")
    for rtype, row in doc["by_type"].items():
        if sum(row.values()):
            types.add_row(_text(rtype), _text(row["valid"]), _text(row["invalid"]), _text(sum(row.values())))
    types.add_row(_text("all", "bold"), _text(doc["by_status"]["valid"]), _text(doc["by_status"]["invalid"]), _text(doc["records"]))
    users = Table(title="records per user", caption=_users_caption(len(doc["by_user"])))
    users.add_column("user")
    users.add_column("records", justify="right")
    for row in doc["by_user"][:STATS_TABLE_USERS]:
        users.add_row(_text("(none)", "dim") if row["user_id"] is None else _text(row["user_id"]), _text(row["records"]))
    indexes = Table(title="search indexes", caption="reached: searches use the index (no build is started here)")
    for name in ("index", "threshold", "records with a vector", "reached"):
        indexes.add_column(name)
    for name, idx in doc["indexes"].items():
        indexes.add_row(_text(name), _text(idx["threshold"]), _text(idx["records_with_vector"]), _text("yes" if idx["reached"] else "no"))
    if not doc["indexes"]:
        indexes.add_row(_text("(none: every search scans exactly)", "dim"), _text(""), _text(""), _text(""))
    console.print(head, types, users, indexes)


def _users_caption(count: int) -> str:
    return f"{count} users" if count <= STATS_TABLE_USERS else f"top {STATS_TABLE_USERS} of {count} (all in --json)"
