"""Reading a whole store as dump entries, page by page at constant memory."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from ..embedders import Embedder
from ..records import SEARCHABLE_TYPES, Link, Record
from ..spi import Capability, MemoryStore, Order, RecordFilter
from .dump_format import DumpEnd, DumpEntry, DumpHeader, LinkEntry, RecordEntry

DEFAULT_PAGE: int = 1000
"""Records read per store query (also the batch of ``read_vectors`` and ``links`` calls)."""


def embedder_identity(embedder: Embedder | Any) -> str:
    """What a dump records about the embedder: its ``name``, plus its model or variant when it
    has one (``openai-compatible:text-embedding-3-small``), so two models behind the same client
    never pass for each other."""
    name = str(getattr(embedder, "name", type(embedder).__name__))
    for attr in ("model", "variant"):
        value = getattr(embedder, attr, None)
        if isinstance(value, str) and value:
            return f"{name}:{value}"
    return name


def store_entries(
    store: MemoryStore, *, embedder: str | None, vectors: bool = True, page: int = DEFAULT_PAGE
) -> Iterator[DumpEntry]:
    """Every record (in ``seq`` order, expired ones included), every link (right after the
    page holding the later of its two records) and the header and end entries.

    ``vectors``: include the stored vectors when the store can read them back
    (``Capability.READ_VECTORS``). Records written while the export runs are included when
    their page is reached; the export is not a snapshot.
    """
    with_vectors = vectors and Capability.READ_VECTORS in store.capabilities()
    yield DumpHeader(source_backend=store.name, dimension=store.dimension, embedder=embedder,
                     vectors=with_vectors, created_at=datetime.now(timezone.utc))
    records = links = 0
    next_seq: int | None = None
    while True:
        rows = store.query(RecordFilter(min_seq=next_seq), order=Order.SEQ_ASC, limit=page)
        if not rows:
            break
        ids = [r.record_id for r in rows]
        stored = store.read_vectors(ids) if with_vectors else {}
        for record in rows:
            vector = stored.get(record.record_id)
            has_vector = vector is not None if with_vectors else record.record_type in SEARCHABLE_TYPES
            yield RecordEntry(record=record, has_vector=has_vector, vector=vector)
        records += len(rows)
        for link in _links_closed_by(store, rows):
            yield LinkEntry(link)
            links += 1
        next_seq = rows[-1].seq + 1
    yield DumpEnd(records=records, links=links)


def _links_closed_by(store: MemoryStore, rows: list[Record]) -> list[Link]:
    """The links touching ``rows`` whose other record comes no later than this page: each link
    is emitted exactly once, after both of its records."""
    last = rows[-1].seq
    seq_of = {r.record_id: r.seq for r in rows}
    touching = store.links(record_ids=list(seq_of))
    others = sorted({end for x in touching for end in (x.source_id, x.target_id)} - set(seq_of))
    if others:
        for start in range(0, len(others), DEFAULT_PAGE):
            found = store.query(RecordFilter(record_ids=tuple(others[start:start + DEFAULT_PAGE])))
            seq_of.update((r.record_id, r.seq) for r in found)
    return [x for x in touching
            if x.source_id in seq_of and x.target_id in seq_of and max(seq_of[x.source_id], seq_of[x.target_id]) <= last]
