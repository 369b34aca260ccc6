"""Move memory between stores: export a store as a versioned dump, import a dump, migrate
directly from one backend to another. The ``agentmemory export|import|migrate`` commands are a
thin layer over these functions.

    from agentmemory import AgentMemory, migrate
    report = migrate("duckdb:///dev/memory.duckdb", "oracle://user@host/service")

Everything streams at constant memory (pages of records, atomic batches of writes). Ids are kept,
so a rerun after an interruption skips what is already there and equal: imports are idempotent
and resumable. Vectors are kept when the target's embedder is the one that made them (same name,
model and dimension) and the source can read them back; otherwise the target's embedder
re-embeds what ``add_messages`` embedded (``index_text.embedding_text``), and the report says which happened and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..spi import SchemaPolicy
from .dump_files import read_dump, write_dump
from .dump_format import DUMP_VERSION, DumpEnd, DumpEntry, DumpFormatError, DumpHeader, LinkEntry, RecordEntry
from .exporting import DEFAULT_PAGE, embedder_identity, store_entries
from .importing import DEFAULT_BATCH, OnConflict, TransferReport, import_entries

if TYPE_CHECKING:
    from ..client import AgentMemory
    from ..embedders import Embedder

__all__ = [
    "DUMP_VERSION", "DumpEnd", "DumpEntry", "DumpFormatError", "DumpHeader", "LinkEntry", "OnConflict",
    "RecordEntry", "TransferReport", "embedder_identity", "export_records", "import_records", "migrate",
    "read_dump", "write_dump",
]


@contextmanager
def opened(
    endpoint: AgentMemory | str | None, embedder: Embedder | None, policy: SchemaPolicy, **options: Any
) -> Iterator[AgentMemory]:
    """``endpoint`` as an ``AgentMemory``: an instance as given (left open), a URI (or None for
    the default store) opened with ``embedder``, ``policy`` and any further ``AgentMemory``
    keyword ``options``, and closed afterwards."""
    from ..client import AgentMemory

    if isinstance(endpoint, AgentMemory):
        if embedder is not None:
            raise InvalidArgument("embedder", "give the embedder to the AgentMemory, not here")
        if options:
            raise InvalidArgument(", ".join(sorted(options)), "give these options to the AgentMemory, not here")
        yield endpoint
        return
    if endpoint is not None and not isinstance(endpoint, str):
        raise InvalidArgument("store", f"must be an AgentMemory or a store URI, got {type(endpoint).__name__}")
    memory = AgentMemory(endpoint, embedder=embedder, schema_policy=policy, **options)
    try:
        yield memory
    finally:
        memory.close()


def export_records(
    source: AgentMemory | str | None,
    *,
    embedder: Embedder | None = None,
    vectors: bool = True,
    page: int = DEFAULT_PAGE,
) -> Iterator[DumpEntry]:
    """Every record and link of ``source`` as dump entries (header first, end last).

    ``source``: an ``AgentMemory`` or a store URI (which must exist; None = the default store).
    ``embedder``: for a URI, the embedder the store was filled with (default: the bundled
    model); its identity goes in the header so an import can tell whether the vectors fit.
    ``vectors``: include stored vectors when the backend can read them back.
    """
    with opened(source, embedder, SchemaPolicy.REQUIRE_EXISTING) as memory:
        yield from store_entries(memory.store, embedder=embedder_identity(memory.embedder), vectors=vectors, page=page)


def import_records(
    target: AgentMemory | str | None,
    entries: Iterable[DumpEntry],
    *,
    embedder: Embedder | None = None,
    on_conflict: OnConflict | str = OnConflict.FAIL,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> TransferReport:
    """Write dump ``entries`` (e.g. ``read_dump(path)``) into ``target`` (an ``AgentMemory``
    or a URI, created if needed). See ``importing`` for conflicts, batches and resumption;
    ``progress`` is called with the number of records read so far after each batch."""
    with opened(target, embedder, SchemaPolicy.CREATE_IF_NECESSARY) as memory:
        return import_entries(memory.store, memory.embedder, entries,
                              on_conflict=on_conflict, dry_run=dry_run, batch_size=batch_size, progress=progress)


def migrate(
    source: AgentMemory | str | None,
    target: AgentMemory | str,
    *,
    source_embedder: Embedder | None = None,
    target_embedder: Embedder | None = None,
    vectors: bool = True,
    on_conflict: OnConflict | str = OnConflict.FAIL,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> TransferReport:
    """Copy every record and link of ``source`` into ``target`` (export piped into import, with
    no file between). Stores given as URIs are opened and closed here; the source must exist.
    Rerunnable: after an interruption, run it again and it completes the copy."""
    if isinstance(source, str) and isinstance(target, str) and source == target:
        raise InvalidArgument("target", "is the source store")
    with opened(source, source_embedder, SchemaPolicy.REQUIRE_EXISTING) as src:
        entries = store_entries(src.store, embedder=embedder_identity(src.embedder), vectors=vectors)
        return import_records(target, entries, embedder=target_embedder, on_conflict=on_conflict,
                              dry_run=dry_run, batch_size=batch_size, progress=progress)
