"""Options and helpers every store-opening command shares: the store, the embedder, the output
format, and turning the core's typed errors into a one-line message with a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Annotated

import typer

from ..client import AgentMemory
from ..embedders import Embedder
from ..errors import AgentMemoryError, InvalidArgument
from ..plugins import get_plugin_manager
from ..registry import default_embedder


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


def build_embedder(name: str | None) -> Embedder:
    """The embedder registered under ``name``, or the default one."""
    if name is None:
        return default_embedder()
    embedder: Embedder = get_plugin_manager().load("embedders", name)()
    return embedder


@contextmanager
def open_memory(store: str | None, embedder: str | None = None) -> Iterator[AgentMemory]:
    """An ``AgentMemory`` over the resolved store, closed on exit; typed errors become a clear
    message on stderr and exit status 2 (bad input) or 1 (anything else from the store)."""
    with cli_errors():
        memory = AgentMemory(store, embedder=build_embedder(embedder))
    try:
        with cli_errors():
            yield memory
    finally:
        memory.close()


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print an ``AgentMemoryError`` as ``error: <message>`` and exit non-zero."""
    try:
        yield
    except AgentMemoryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2 if isinstance(exc, InvalidArgument) else 1) from None
