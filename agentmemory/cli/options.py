"""Options and helpers every store-opening command shares: the store, the embedder, the output
format (with the JSON conversion and printing behind it), and turning the core's typed errors into
a one-line message with a non-zero exit.

Light at import time, like every module of the command: the client, the records (pydantic), the
registry and Rich's console are imported inside the helpers that use them, so ``agentmemory
--help`` and a typo'd command cost the Typer start-up and nothing more.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import AgentMemoryError, InvalidArgument

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ..client import AgentMemory
    from ..embedders import Embedder
    from ..spi import MemoryStore


class OutputFormat(str, Enum):
    """How a command prints: a readable table, one JSON document, or one JSON object per line."""

    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"


StoreOption = Annotated[
    str | None,
    typer.Option("--store", help="Store URI (duckdb:///path.db, hnswlib:///dir, memory://); default: "
                 "$AGENTMEMORY_STORE, else the default location, as AgentMemory() resolves it."),
]
EmbedderOption = Annotated[
    str | None,
    typer.Option("--embedder", help="Registered embedder name (see `agentmemory plugins`); default: the bundled local model."),
]
FormatOption = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", case_sensitive=False,
                 help="table (readable, the default), json (one JSON document) or jsonl (one JSON object per line)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Shorthand for --format json.")]
JsonlOption = Annotated[bool, typer.Option("--jsonl", help="Shorthand for --format jsonl.")]
WideOption = Annotated[bool, typer.Option("--wide", help="Print the table's columns in full, one line per cell line, however wide "
                                          "(by default they fit the terminal: other columns wrap, ids never do).")]


def output_format(fmt: OutputFormat, as_json: bool = False, as_jsonl: bool = False) -> OutputFormat:
    """The format the ``--format``/``--json``/``--jsonl`` trio asks for; two different JSON
    shapes at once is an ``InvalidArgument`` (a shorthand wins over the default ``table``)."""
    chosen = {f for f, on in ((OutputFormat.JSON, as_json), (OutputFormat.JSONL, as_jsonl)) if on}
    if fmt is not OutputFormat.TABLE:
        chosen.add(fmt)
    if len(chosen) > 1:
        names = " and ".join(sorted(f.value for f in chosen))
        raise InvalidArgument("--format", f"asks for both {names}; pick one")
    return chosen.pop() if chosen else OutputFormat.TABLE


def dump_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text (``jsonable`` first; unicode kept as is; anything else JSON has no
    type for, such as a path in a backend's details, as its ``str``)."""
    from ..records import jsonable

    return json.dumps(jsonable(value), ensure_ascii=False, indent=indent, default=str)


def emit_rows(fmt: OutputFormat, rows: Sequence[Any], table: Callable[[], RenderableType], *, wide: bool = False) -> None:
    """Print ``rows``: a JSON array, one JSON object per line, or the renderable ``table()``
    builds (built only when the table is wanted), fitted to the terminal or, ``wide``, in full."""
    from rich.console import Console

    from .tables import WIDE

    if fmt is OutputFormat.JSON:
        typer.echo(dump_json(list(rows), indent=2))
    elif fmt is OutputFormat.JSONL:
        for row in rows:
            typer.echo(dump_json(row))
    else:
        Console(highlight=False, width=WIDE if wide else None).print(table())


def emit_document(fmt: OutputFormat, document: Any, render: Callable[[], None]) -> None:
    """Print one document: indented JSON, the same on one line for ``jsonl``, or ``render()``."""
    if fmt is OutputFormat.TABLE:
        render()
    else:
        typer.echo(dump_json(document, indent=2 if fmt is OutputFormat.JSON else None))


def note(text: str) -> None:
    """A remark for the person at the terminal, on stderr so stdout stays the data (stdout is
    flushed first, so the remark follows what was printed before it)."""
    from rich.console import Console

    sys.stdout.flush()
    Console(stderr=True, highlight=False).print(text, markup=False)


@contextmanager
def open_memory(store: str | None, embedder: str | None = None, **options: Any) -> Iterator[AgentMemory]:
    """An ``AgentMemory`` over the resolved store (which must exist: a mistyped path is an error,
    not a new empty store), closed on exit; ``options`` go to ``AgentMemory``. Typed errors
    become a clear message on stderr and exit status 2 (bad input) or 1 (anything else).

    The command runs inside ``deferring_indexes``: a command is a short process, and a
    background index build it started would hold up its exit (DuckDB's close waits for an HNSW
    build it cannot interrupt, then drops it unfinished). Results never depend on it."""
    from ..registry import build_embedder
    from ..spi import SchemaPolicy
    from ..transfer import opened

    with cli_errors(), opened(store, build_embedder(embedder), SchemaPolicy.REQUIRE_EXISTING, **options) as memory, \
            memory.store.deferring_indexes():
        yield memory


@dataclass
class OpenedStore:
    """A store opened without the client, for a command that reads through the SPI alone."""

    store: MemoryStore
    embedder: Embedder

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


@contextmanager
def open_store(store: str | None, embedder: str | None = None) -> Iterator[OpenedStore]:
    """The resolved store (which must exist), opened for ``embedder``'s dimension as
    ``AgentMemory()`` opens it, and closed on exit, without importing the client and its
    operations (``stats`` needs only counts and queries). Typed errors and held-back index
    builds as ``open_memory``."""
    from ..plugins import get_plugin_manager
    from ..registry import build_embedder, resolve_store
    from ..spi import SchemaPolicy

    with cli_errors():
        plugins = get_plugin_manager()
        backend = resolve_store(store, plugins)  # in AgentMemory's order: the store, then the embedder
        chosen = build_embedder(embedder, plugins)
        backend.open(dimension=chosen.dimension, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
        try:
            with backend.deferring_indexes():
                yield OpenedStore(backend, chosen)
        finally:
            backend.close()


STORE_HINT = "check --store (or $AGENTMEMORY_STORE); this command only opens an existing store, `agentmemory import` creates one"
"""What the CLI says where a backend's message tells a Python caller to open with
``schema_policy='create_if_necessary'`` (an option no command has)."""
EMBEDDER_HINT = "pass the --embedder the store was filled with (see `agentmemory stats`), or another --store"
"""What the CLI says where a backend suggests ``schema_policy='recreate'`` for a dimension clash."""

_POLICY_NOTE = re.compile(r" ?\(schema_policy=require_existing(?:, read_only)?\)")
_CREATE_HINT = re.compile(r";? ?open (?:it )?with (?:schema_policy=)?'?create_if_necessary'?(?: to create it)?")
_RECREATE_HINT = re.compile(r"; use another file or schema_policy='recreate'")


def cli_message(message: str, store_hint: str = STORE_HINT, embedder_hint: str = EMBEDDER_HINT) -> str:
    """A core or backend error message with its Python-API hints replaced by the CLI's flags:
    a missing store names ``--store``, a dimension clash ``--embedder`` (or ``store_hint`` and
    ``embedder_hint``, for a command with other flags)."""
    missing = bool(_POLICY_NOTE.search(message) or _CREATE_HINT.search(message))
    text = _CREATE_HINT.sub("", _POLICY_NOTE.sub("", message))
    if missing:
        text = f"{text.rstrip('; ')}; {store_hint}"
    return _RECREATE_HINT.sub(f"; {embedder_hint}", text)


@contextmanager
def cli_errors(store_hint: str = STORE_HINT, embedder_hint: str = EMBEDDER_HINT) -> Iterator[None]:
    """Print an ``AgentMemoryError`` as ``error: <message>`` (its hints naming CLI flags, see
    ``cli_message``) and exit non-zero: 2 for bad input, 1 for anything else."""
    try:
        yield
    except AgentMemoryError as exc:
        typer.echo(f"error: {cli_message(str(exc), store_hint, embedder_hint)}", err=True)
        raise typer.Exit(2 if isinstance(exc, InvalidArgument) else 1) from None
