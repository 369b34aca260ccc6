"""Inspect commands: threads, messages, memories, links (see ``cli``; search, card and stats are
in ``report_commands``).

Each opens the store the way ``AgentMemory()`` resolves it (``--store``, else
``AGENTMEMORY_STORE``, else the default location), reads through the public API where it has
the call (the SPI's ``query``/``count`` where it has not: counts, invalid-only listings, the
newest messages), prints a Rich table or exact JSON, and never writes: no index build, no
summary update.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidArgument, NotFound
from .application import app
from .inspect_options import (
    TIME_WIDTH,
    AgentFilter,
    MetadataFilterOption,
    ThreadFilter,
    UserFilter,
    content_cell,
    parse_metadata_filter,
    split_values,
    status_cell,
    text_cell,
    time_cell,
)
from .options import (
    EmbedderOption,
    FormatOption,
    JsonlOption,
    JsonOption,
    OutputFormat,
    StoreOption,
    WideOption,
    cli_errors,
    emit_rows,
    note,
    open_memory,
    output_format,
)

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

    from ..client import AgentMemory
    from ..records import Record, RecordStatus, RecordType
    from .tables import IdTable

DEFAULT_LIMIT = 100

LimitOption = Annotated[int | None, typer.Option("--limit", help=f"At most this many rows (default {DEFAULT_LIMIT}).")]
OffsetOption = Annotated[int, typer.Option("--offset", help="Skip this many rows first.")]


# ---- helpers -------------------------------------------------------------------------------
def _scope(**ids: str | None) -> dict[str, Any]:
    """The scope keys the user gave (``user_id=…``); an omitted one stays unconstrained."""
    return {f"{name}_id": value for name, value in ids.items() if value is not None}


def _status(value: str | None) -> RecordStatus | None:
    """``--status`` (any case) as a ``RecordStatus``."""
    from ..validation import validate_status

    return None if value is None else validate_status("--status", value.lower())


def _meta_cell(record_meta: dict[str, Any]) -> Text:
    return text_cell(json.dumps(record_meta, ensure_ascii=False) if record_meta else "", "dim")


def _more_hint(shown: int, limit: int, offset: int) -> None:
    if shown and shown == limit:
        note(f"(first {shown} shown; there may be more: --offset {offset + shown})")


SCOPES = ("user_id", "agent_id", "thread_id")


def _record_table(title: str, rows: Sequence[Record]) -> IdTable:
    """Records as a table: type, status, time, and content with its id below it, then the scope
    ids that differ between rows (one shared value goes into the title). Ids share one column,
    a line each, so they stay whole at any terminal width the other columns can give way to."""
    from ..validation import user_metadata
    from .inspect_options import id_lines
    from .tables import IdTable, longest

    shared = {k: getattr(rows[0], k) for k in SCOPES if len({getattr(r, k) for r in rows}) == 1} if rows else {}
    varying = [k for k in SCOPES if k not in shared]
    label = " · ".join(f"{k.removesuffix('_id')} {v}" for k, v in shared.items() if v is not None)
    table = IdTable(title=f"{title} · {label}" if label else title, caption=f"{len(rows)} shown", show_lines=True)
    table.add_column("type")
    table.add_column("status")
    table.add_column("timestamp", min_width=TIME_WIDTH)
    table.add_column("content / ids" if varying else "content / id", ratio=1, overflow="fold")

    def ids(r: Record) -> dict[str, str | None]:
        return {k.removesuffix("_id"): getattr(r, k) for k in varying}

    bare = longest(v for r in rows for v in (r.record_id, *ids(r).values()))
    table.keep_whole(3, longest(line for r in rows for line in id_lines(r.record_id, **ids(r))), bare)
    for r in rows:
        table.add_row(text_cell(r.record_type.value), status_cell(r.status), time_cell(r.timestamp),
                      content_cell(r.content, r.record_id, user_metadata(r), **ids(r)))
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
    wide: WideOption = False,
) -> None:
    """List threads with their user, agent, message and memory counts.

    In creation order; --user/--agent narrow the list."""
    from ..records import MEMORY_TYPES, MESSAGE_TYPES
    from ..spi import RecordFilter

    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    with open_memory(store, embedder) as memory:
        size = DEFAULT_LIMIT if limit is None else limit
        infos = memory.list_threads(**_scope(user=user, agent=agent), limit=size, offset=offset)
        now = memory.now()
        rows = [
            {
                **info.model_dump(),
                "message_count": memory.store.count(RecordFilter(thread_id=info.thread_id, record_types=MESSAGE_TYPES, alive_at=now)),
                "memory_count": memory.store.count(RecordFilter(thread_id=info.thread_id, record_types=MEMORY_TYPES, alive_at=now)),
            }
            for info in infos
        ]

    def table() -> IdTable:
        from .inspect_options import id_lines
        from .tables import IdTable, longest

        def ids(row: dict[str, Any]) -> list[str]:
            return id_lines(row["thread_id"], user=row["user_id"], agent=row["agent_id"])

        t = IdTable(title="threads", caption=f"{len(rows)} shown")
        t.add_column("thread / user / agent", overflow="fold")
        t.add_column("created", min_width=TIME_WIDTH)
        t.add_column("messages", justify="right")
        t.add_column("memories", justify="right")
        bare = longest(row[k] for row in rows for k in ("thread_id", "user_id", "agent_id"))
        t.keep_whole(0, longest(line for row in rows for line in ids(row)), bare)
        if any(row["metadata"] for row in rows):
            t.add_column("metadata", overflow="fold")
        for row in rows:
            first, *others = ids(row)
            cell = text_cell(first, "cyan")
            for line in others:
                cell.append(f"\n{line}", style="dim")
            meta = [_meta_cell(row["metadata"])] if len(t.columns) > 4 else []
            t.add_row(cell, time_cell(row["created_at"]), text_cell(row["message_count"]), text_cell(row["memory_count"]), *meta)
        return t

    emit_rows(out, rows, table, wide=wide)
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
    wide: WideOption = False,
) -> None:
    """Show a thread's messages in order.

    From --offset (at most --limit), or the newest --last N."""
    from ..records import MESSAGE_TYPES
    from ..spi import Order, RecordFilter
    from ..validation import user_metadata, validate_positive_int

    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        if last is not None and (limit is not None or offset):
            raise InvalidArgument("--last", "cannot be combined with --limit/--offset")
    size = DEFAULT_LIMIT if limit is None else limit
    with open_memory(store, embedder) as memory:
        memory.get_thread(thread)  # NotFound for an unknown thread, not an empty list
        if last is None:
            rows = memory.list_messages(thread_id=thread, limit=size, offset=offset)
        else:
            newest = validate_positive_int("--last", last, minimum=0)
            flt = RecordFilter(thread_id=thread, record_types=MESSAGE_TYPES, alive_at=memory.now())
            rows = memory.store.query(flt, order=Order.SEQ_DESC, limit=newest)[::-1]

    def table() -> IdTable:
        from .tables import IdTable, longest

        t = IdTable(title=f"messages of {thread}", caption=f"{len(rows)} shown", show_lines=True)
        t.add_column("seq", justify="right")
        t.add_column("timestamp", min_width=TIME_WIDTH)
        t.add_column("role")
        t.add_column("content / id", ratio=1, overflow="fold")
        t.keep_whole(3, longest(r.record_id for r in rows))
        for r in rows:
            t.add_row(text_cell(r.seq), time_cell(r.timestamp), text_cell(r.role, "bold"), content_cell(r.content, r.record_id, user_metadata(r)))
        return t

    emit_rows(out, rows, table, wide=wide)
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
    wide: WideOption = False,
) -> None:
    """List memories (memory, fact, guideline, preference) with filters.

    In insertion order, filtered by scope, type, status and a JSON metadata filter."""
    from ..records import RecordStatus
    from ..validation import validate_memory_type

    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        wanted = split_values(types)
        memory_types = None if wanted is None else [validate_memory_type("--type", t) for t in wanted]
        only = _status(status)
        meta = parse_metadata_filter(metadata)
    size = DEFAULT_LIMIT if limit is None else limit
    scope = _scope(user=user, agent=agent, thread=thread)
    with open_memory(store, embedder) as memory:
        if only is RecordStatus.INVALID:
            rows = _invalid_memories(memory, scope, memory_types, meta, size, offset)
        else:
            rows = memory.list_memories(
                **scope, memory_types=memory_types, metadata_filter=meta,
                include_invalid=only is None, limit=size, offset=offset,
            )
    emit_rows(out, rows, lambda: _record_table("memories", rows), wide=wide)
    if out is OutputFormat.TABLE:
        _more_hint(len(rows), size, offset)


def _invalid_memories(
    memory: AgentMemory, scope: dict[str, Any], types: list[RecordType] | None, meta: dict[str, Any] | None, limit: int, offset: int
) -> list[Record]:
    """Only invalid memories: ``list_memories`` has ``include_invalid`` but no invalid-only
    switch, so this goes through the SPI after validating like the public call."""
    from ..records import MEMORY_TYPES, RecordStatus
    from ..spi import RecordFilter

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
    wide: WideOption = False,
) -> None:
    """Show the links of a memory and the records at their other end.

    Both directions, each relation read from this memory's side (supersedes / is_superseded_by)."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    with open_memory(store, embedder) as memory:
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
        from rich.console import Group
        from rich.text import Text

        from .tables import IdTable, longest

        t = IdTable(title=f"links of {record_id}", caption=f"{len(links)} links", show_lines=True)
        t.add_column("relation")
        t.add_column("type")
        t.add_column("status")
        t.add_column("other record / id / link", ratio=1, overflow="fold")
        t.keep_whole(3, longest([*others, *(f"link {link.link_id}" for link in links)]), longest([*others, *(link.link_id for link in links)]))
        for link in links:
            other_id = link.target_id if link.source_id == record_id else link.source_id
            other = others[other_id]
            cell = content_cell(other.content if other else "", other_id, link=link.link_id)
            t.add_row(
                text_cell(link.relation_from(record_id), "bold"), text_cell(other.record_type.value if other else ""),
                status_cell(other.status) if other else text_cell("(gone)", "red"), cell + Text("\n") + time_cell(link.created_at),
            )
        head = Text(f"[{subject.record_type.value}, {subject.status.value}] ", style="bold")
        return Group(head + Text(subject.content), t)

    emit_rows(out, links, table, wide=wide)
