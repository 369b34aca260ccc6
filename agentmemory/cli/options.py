"""Options and helpers every store-opening command shares: the store, the embedder, the output
format (with the JSON conversion and printing behind it), and turning the core's typed errors into
a one-line message with a non-zero exit."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Any

import typer
from rich.console import Console, RenderableType

from ..client import AgentMemory
from ..errors import AgentMemoryError, InvalidArgument
from ..records import jsonable
from ..registry import build_embedder
from ..spi import SchemaPolicy
from ..transfer import opened


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
    return json.dumps(jsonable(value), ensure_ascii=False, indent=indent, default=str)


def emit_rows(fmt: OutputFormat, rows: Sequence[Any], table: Callable[[], RenderableType]) -> None:
    """Print ``rows``: a JSON array, one JSON object per line, or the renderable ``table()``
    builds (built only when the table is wanted)."""
    if fmt is OutputFormat.JSON:
        typer.echo(dump_json(list(rows), indent=2))
    elif fmt is OutputFormat.JSONL:
        for row in rows:
            typer.echo(dump_json(row))
    else:
        Console(highlight=False).print(table())


def emit_document(fmt: OutputFormat, document: Any, render: Callable[[], None]) -> None:
    """Print one document: indented JSON, the same on one line for ``jsonl``, or ``render()``."""
    if fmt is OutputFormat.TABLE:
        render()
    else:
        typer.echo(dump_json(document, indent=2 if fmt is OutputFormat.JSON else None))


def note(text: str) -> None:
    """A remark for the person at the terminal, on stderr so stdout stays the data (stdout is
    flushed first, so the remark follows what was printed before it)."""
    sys.stdout.flush()
    Console(stderr=True, highlight=False).print(text, markup=False)


@contextmanager
def open_memory(store: str | None, embedder: str | None = None, **options: Any) -> Iterator[AgentMemory]:
    """An ``AgentMemory`` over the resolved store (which must exist: a mistyped path is an error,
    not a new empty store), closed on exit; ``options`` go to ``AgentMemory``. Typed errors
    become a clear message on stderr and exit status 2 (bad input) or 1 (anything else)."""
    with cli_errors(), opened(store, build_embedder(embedder), SchemaPolicy.REQUIRE_EXISTING, **options) as memory:
        yield memory


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print an ``AgentMemoryError`` as ``error: <message>`` and exit non-zero."""
    try:
        yield
    except AgentMemoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if isinstance(exc, InvalidArgument) else 1) from None
