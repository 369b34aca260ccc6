"""Report commands: search, card, stats (see ``cli``; the listings are in ``inspect_commands``).

What a search or a context card gives the model, exactly as ``AgentMemory`` builds it, and the
store's counts and indexes; like the listings they open the store read-only and never write.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidArgument
from .application import app
from .inspect_options import (
    AgentFilter,
    MetadataFilterOption,
    ThreadFilter,
    content_cell,
    id_lines,
    parse_metadata_filter,
    split_values,
    status_cell,
    text_cell,
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
    dump_json,
    emit_document,
    emit_rows,
    note,
    open_memory,
    open_store,
    output_format,
)

if TYPE_CHECKING:
    from ..records import Record, SearchResult
    from .options import OpenedStore
    from .tables import IdTable

STATS_SCAN_PAGE = 5_000
STATS_TABLE_USERS = 20


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
    wide: WideOption = False,
) -> None:
    """Search one user's records as AgentMemory.search does.

    Score, type and content of each hit, with the memories linked to it (--hops)."""
    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        meta = parse_metadata_filter(metadata)
    with open_memory(store, embedder) as memory:
        results = memory.search(
            query, user_id=user, agent_id=agent, thread_id=thread, strategy=strategy, record_types=split_values(types),
            num_hops=hops, max_results=max_results, metadata_filter=meta,
            include_invalid_results=not valid_only, token_budget=token_budget,
        )
    emit_rows(out, results, lambda: _results_table(query, results), wide=wide)


def _results_table(query: str, results: Sequence[SearchResult]) -> IdTable:
    """The hits (and, indented below each, its linked records): ids are never folded."""
    from rich.text import Text

    from .tables import IdTable, longest

    records = [res.record for res in results] + [linked.record for res in results for linked in res.linked_results]
    t = IdTable(title=f"search: {query}", caption=f"{len(results)} results", show_lines=True)
    t.add_column("#", justify="right")
    t.add_column("score", justify="right")
    t.add_column("type")
    t.add_column("status")
    t.add_column("content / id / thread", ratio=1, overflow="fold")
    t.keep_whole(4, longest(line for r in records for line in id_lines(r.record_id, thread=r.thread_id)),
                 longest(v for r in records for v in (r.record_id, r.thread_id)))
    for rank, res in enumerate(results, 1):
        r = res.record
        t.add_row(text_cell(rank), text_cell(f"{res.score:.4f}"), text_cell(r.record_type.value), status_cell(r.status),
                  content_cell(r.content, r.record_id, thread=r.thread_id))
        for linked in res.linked_results:
            lr = linked.record
            t.add_row(text_cell(""), text_cell(f"↳ hop {linked.depth}", "dim"), text_cell(lr.record_type.value), status_cell(lr.status),
                      Text(f"{linked.relation}: ", style="italic") + content_cell(lr.content, lr.record_id, thread=lr.thread_id))
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
    short_thread: Annotated[str, typer.Option("--short-thread", help="On a thread shorter than a card's markup: card (default; a note says so) or transcript (the transcript itself).")] = "card",
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
        minimums = _type_minimums(split_values(min_type))
        meta = parse_metadata_filter(metadata)
    options = {} if renderer is None else {"card_renderer": renderer}
    with open_memory(store, embedder, token_counter=token_counter, **options) as memory:
        card = memory.get_thread(thread).get_context_card(
            max_relevant_results=max_relevant_results, min_relevant_results_by_type=minimums,
            max_recent_messages=max_recent_messages, except_last_messages=except_last,
            fallback_message_count=fallback_messages, metadata_filter=meta, include_invalid_results=include_invalid,
            token_budget=token_budget, soft_token_budget=soft_token_budget, short_thread=short_thread,
        )
    tokens = card.tokens
    document = {"thread_id": thread, "content": card.content, **card.model_dump(exclude={"content"})}

    def render() -> None:
        if card.content:
            typer.echo(card.content)
        note(f"{thread}: {tokens} tokens ({card.token_counter}; {len(card.relevant)} relevant, {len(card.recent_messages)} recent messages)"
             if card.content else f"{thread}: empty card (0 tokens)")
        if card.is_transcript:
            note(f"{thread}: the transcript itself ({card.transcript_tokens} tokens): a card would cost more")
        elif card.note:
            note(f"{thread}: {card.note}")

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
    from ..plugins import get_plugin_manager
    from ..registry import default_store_uri

    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
        uri = store if store is not None else default_store_uri(get_plugin_manager())
    with open_store(uri, embedder) as memory:
        document = _stats(memory, uri)
    emit_document(out, document, lambda: _render_stats(document))


def _stats(memory: OpenedStore, uri: str) -> dict[str, Any]:
    """The ``stats`` document (counts of live records; expired ones awaiting purge apart)."""
    from ..records import SEARCHABLE_TYPES, RecordStatus, RecordType
    from ..spi import RecordFilter

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
        "by_user": [{"user_id": u, "records": n} for u, n in _user_counts(memory).most_common()],
        "links": len(store.links()),
        "indexes": {
            name: {"threshold": threshold, "records_with_vector": with_vector, "reached": with_vector >= threshold}
            for name, threshold in store.index_thresholds().items()
        },
    }


def _user_counts(memory: OpenedStore) -> Counter[str | None]:
    """Live records per user id (None: records of no user), counted in one paged scan by
    ``seq`` (a user's memories need not have a thread or profile that would name the user)."""
    return Counter(r.user_id for r in _scan(memory))


def _scan(memory: OpenedStore) -> Iterable[Record]:
    """Every live record in ``seq`` order, a page at a time (constant memory)."""
    from ..spi import RecordFilter

    now, next_seq = memory.now(), None
    while True:
        page = memory.store.query(RecordFilter(alive_at=now, min_seq=next_seq), limit=STATS_SCAN_PAGE)
        yield from page
        if len(page) < STATS_SCAN_PAGE:
            return
        next_seq = page[-1].seq + 1


def _render_stats(doc: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    st = doc["store"]
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("store", text_cell(st["uri"]))
    head.add_row("backend", text_cell(f"{st['backend']} ({st['dimension']}-d)"))
    head.add_row("path", text_cell(st["path"]))
    head.add_row("embedder", text_cell(f"{doc['embedder']['name']} ({doc['embedder']['dimension']}-d)"))
    head.add_row("records", text_cell(f"{doc['records']} live, {doc['expired_awaiting_purge']} expired awaiting purge, {doc['links']} links"))
    for key, value in st["details"].items():
        shown = "none" if value is None else dump_json(value) if isinstance(value, (dict, list)) else value
        head.add_row(text_cell(key, "dim"), text_cell(shown))
    types = Table(title="records per type")
    for name in ("type", "valid", "invalid", "total"):
        types.add_column(name, justify="left" if name == "type" else "right")
    for rtype, row in doc["by_type"].items():
        if sum(row.values()):
            types.add_row(text_cell(rtype), text_cell(row["valid"]), text_cell(row["invalid"]), text_cell(sum(row.values())))
    types.add_row(text_cell("all", "bold"), text_cell(doc["by_status"]["valid"]), text_cell(doc["by_status"]["invalid"]), text_cell(doc["records"]))
    users = Table(title="records per user", caption=_users_caption(len(doc["by_user"])))
    users.add_column("user")
    users.add_column("records", justify="right")
    for row in doc["by_user"][:STATS_TABLE_USERS]:
        users.add_row(text_cell("(none)", "dim") if row["user_id"] is None else text_cell(row["user_id"]), text_cell(row["records"]))
    indexes = Table(title="search indexes", caption="reached: searches use the index (no build is started here)")
    for name in ("index", "threshold", "records with a vector", "reached"):
        indexes.add_column(name)
    for name, idx in doc["indexes"].items():
        indexes.add_row(text_cell(name), text_cell(idx["threshold"]), text_cell(idx["records_with_vector"]), text_cell("yes" if idx["reached"] else "no"))
    if not doc["indexes"]:
        indexes.add_row(text_cell("(none: every search scans exactly)", "dim"), text_cell(""), text_cell(""), text_cell(""))
    console.print(head, types, users, indexes)


def _users_caption(count: int) -> str:
    return f"{count} users" if count <= STATS_TABLE_USERS else f"top {STATS_TABLE_USERS} of {count} (all in --json)"
