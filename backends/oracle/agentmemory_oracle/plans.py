"""Every store operation as a generator of statements: one implementation, two drivers.

A plan yields ``Fetch``/``Execute``/``ExecuteMany`` statements and receives their results (rows,
a row count, per-row counts); driver errors come back into the plan already mapped to
agentmemory errors, so a plan can tolerate the ones it expects (``ORA-00955`` while creating
objects). The sync driver runs plans on a python-oracledb ``Connection``, the async driver on an
``AsyncConnection``; the unit tests run them against scripted results, without a server.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from agentmemory.analysis import Analyzer
from agentmemory.errors import BackendError, BackendUnavailable, Conflict, NotFound
from agentmemory.records import Link, Record
from agentmemory.spi import Hit, Order, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

from . import ddl
from . import sql as q
from .errors import ora_code_of
from .names import StoreNames

log = logging.getLogger(__name__)

T = TypeVar("T")
Plan = Generator[q.Statement, Any, T]

ALREADY_EXISTS = {"ORA-00955", "ORA-01408", "ORA-02260", "ORA-02261"}
"""Codes meaning "the object (or an equivalent) is already there": a concurrent creator won."""
DOES_NOT_EXIST = {"ORA-00942", "ORA-02289", "ORA-01418"}
COLUMN_EXISTS = "ORA-01430"
"""A migration's ``ALTER TABLE … ADD`` found the column there: an earlier open added it (DDL
commits at once) but did not get to record the version, or a concurrent opener did."""


# ---- reads ----------------------------------------------------------------------------------
def query_plan(
    names: StoreNames, flt: RecordFilter, order: Order, limit: int | None, offset: int
) -> Plan[list[Record]]:
    """``query``."""
    if limit == 0:
        return []
    rows = yield q.select_records(names, flt, order, limit, offset)
    return [q.record_from_row(row) for row in rows]


def count_plan(names: StoreNames, flt: RecordFilter) -> Plan[int]:
    """``count``."""
    rows = yield q.count_records(names, flt)
    return int(rows[0][0]) if rows else 0


def links_plan(names: StoreNames, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> Plan[list[Link]]:
    """``links``, ordered by link id (code point order, re-checked in Python)."""
    rows = yield q.select_links(names, record_ids, link_ids)
    return sorted((q.link_from_row(row) for row in rows), key=lambda x: x.link_id)


def vectors_plan(names: StoreNames, ids: Sequence[str]) -> Plan[dict[str, np.ndarray]]:
    """``read_vectors``: python-oracledb returns a ``VECTOR(dim, FLOAT32)`` as ``array('f')``."""
    rows = yield q.select_vectors(names, ids)
    return {str(rid): np.asarray(value, dtype=np.float32) for rid, value in rows}


@dataclass(frozen=True)
class VectorPlanner:
    """How ``vector_search`` picks exact or approximate (HNSW) ranking.

    With an index, a bounded COUNT of the filtered chunks decides: at most ``exact_threshold``
    candidates are ranked exactly (selective scopes stay exact, and cheap), more go through
    ``FETCH APPROX`` asking for ``max(k * overfetch, k + min_extra)`` neighbours, capped at
    ``max_candidates`` (``sql.APPROX_MAX_CANDIDATES``); a ``k`` above the cap is ranked exactly.
    """

    index_available: bool = True
    exact_threshold: int = 1000
    target_accuracy: int = 95
    overfetch: int = 2
    min_extra: int = 20
    max_candidates: int = q.APPROX_MAX_CANDIDATES

    def candidates(self, k: int) -> int | None:
        """How many approximate neighbours to ask for before the exact re-rank to ``k``, or None
        when ``k`` itself is more than ``FETCH APPROX`` may ask for (rank exactly instead)."""
        if k > self.max_candidates:
            return None
        return min(self.max_candidates, max(k * self.overfetch, k + self.min_extra))


def _sort_hits_by_distance(hits: list[Hit]) -> list[Hit]:
    return sorted(hits, key=lambda h: (round(h.distance or 0.0, 6), h.record.record_id))


def vector_plan(
    names: StoreNames, vector: np.ndarray, flt: RecordFilter, k: int, planner: VectorPlanner
) -> Plan[list[Hit]]:
    """``vector_search``: count-based choice of exact or approximate, ties by (distance, id).
    An approximate query the server refuses for its K (ORA-51966) is ranked exactly instead."""
    candidates = planner.candidates(k)
    approximate = False
    if planner.index_available:
        rows = yield q.count_vector_candidates(names, flt, planner.exact_threshold + 1)
        n = int(rows[0][0]) if rows else 0
        if n == 0:
            return []
        approximate = n > planner.exact_threshold and candidates is not None
    exact = not approximate
    if approximate:
        approx = q.vector_search(
            names, flt, vector, k, approximate=True, candidates=candidates, target_accuracy=planner.target_accuracy
        )
        try:
            rows = yield approx
        except BackendError as exc:
            if ora_code_of(exc) not in q.APPROX_TOO_HIGH:
                raise
            log.warning("%s: FETCH APPROX FIRST %s refused (%s); ranking exactly", names.store_id, candidates, exc)
            exact = True
    if exact:  # from the start, or the server refused the approximate K
        rows = yield q.vector_search(names, flt, vector, k)
    hits = [
        Hit(record=q.record_from_row(row), distance=float(row[-1])) for row in rows if q.is_finite_distance(row[-1])
    ]
    return _sort_hits_by_distance(hits)[:k]


def keyword_plan(
    names: StoreNames, text: str, flt: RecordFilter, k: int, analyzer: Analyzer | None = None
) -> Plan[list[Hit]]:
    """``keyword_search`` through Oracle Text over analysed terms; ties by (score desc, id)."""
    query = q.text_query(text, analyzer)
    if query is None:
        return []
    rows = yield q.keyword_search(names, flt, query, k)
    hits = [Hit(record=q.record_from_row(row), score=float(row[-1])) for row in rows]
    hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.record_id))
    return hits[:k]


# ---- writes ---------------------------------------------------------------------------------
def _found(rows: Sequence[Sequence[Any]]) -> set[str]:
    return {row[0] for row in rows}


def _check_counts(counts: Sequence[int], ids: Sequence[str], kind: str) -> None:
    if len(counts) != len(ids):
        raise BackendError(f"driver returned {len(counts)} row counts for {len(ids)} {kind} rows")
    for identifier, count in zip(ids, counts):
        if not count:
            raise NotFound(kind, identifier)


def write_plan(names: StoreNames, batch: WriteBatch, analyzer: Analyzer | None = None) -> Plan[list[Record]]:
    """Apply a validated ``WriteBatch`` in the SPI's order: adds, patches, link deletes, link
    adds, record deletes. The caller runs it in one transaction and rolls back on any error,
    so the batch lands whole or not at all. ``analyzer`` writes ``chunk_text``."""
    added: list[Record] = []
    if batch.add:
        ids = [item.record.record_id for item in batch.add]
        existing = _found((yield q.select_existing_ids(names, ids)))
        for rid in ids:
            if rid in existing:
                raise Conflict(f"record id {rid!r} already exists")
        seq_rows = yield q.next_seqs(names, len(ids))
        seqs = sorted(int(row[0]) for row in seq_rows)
        if len(seqs) != len(ids):
            raise BackendError(f"sequence {names.seq} returned {len(seqs)} values for {len(ids)} records")
        rows = [q.record_row(item.record, seq) for item, seq in zip(batch.add, seqs)]
        yield q.insert_records(names, rows)
        chunk_rows = [
            q.chunk_row(row, item.vector, analyzer) for item, row in zip(batch.add, rows) if item.vector is not None
        ]
        if chunk_rows:
            yield q.insert_chunks(names, chunk_rows)
        added = [
            item.record.model_copy(update={"seq": seq, "metadata": copy.deepcopy(dict(item.record.metadata))})
            for item, seq in zip(batch.add, seqs)
        ]
    yield from _patch_plan(names, batch.patch, analyzer)
    if batch.delete_links:
        ids = list(batch.delete_links)
        _check_counts((yield q.delete_links(names, ids)), ids, "link")
    if batch.add_links:
        yield from _add_links_plan(names, batch.add_links)
    if batch.delete:
        ids = list(batch.delete)
        _check_counts((yield q.delete_records(names, ids)), ids, "record")
    return added


def _patch_groups(patches: Sequence[RecordPatch]) -> list[tuple[tuple[tuple[str, ...], str], list[RecordPatch]]]:
    """Consecutive patches of one shape, in order (so array DML keeps the sequential result)."""
    groups: list[tuple[tuple[tuple[str, ...], str], list[RecordPatch]]] = []
    for patch in patches:
        shape = q.patch_shape(patch)
        if groups and groups[-1][0] == shape:
            groups[-1][1].append(patch)
        else:
            groups.append((shape, [patch]))
    return groups


def _patch_plan(names: StoreNames, patches: Sequence[RecordPatch], analyzer: Analyzer | None = None) -> Plan[None]:
    """Patches in order, one array UPDATE per group of consecutive patches of one shape. A patch
    touching ``content`` or ``index_text`` rewrites the chunk's ``chunk_text`` from the record's
    new indexed text (``sql.patched_indexed_text``): one resetting ``index_text`` without new
    content reads the content the record holds."""
    for (fields, vector_action), group in _patch_groups(patches):
        ids = [p.record_id for p in group]
        rows: list[dict[str, Any]] = []
        stored: dict[str, Any] = {}
        if fields:
            rows = [q.patch_row(p) for p in group]
            _check_counts((yield q.update_records(names, fields, rows)), ids, "record")
            unknown = [row["record_id"] for row in rows if q.needs_stored_content(row)]
            if unknown:  # index_text reset to NULL, content unchanged: indexed by that content
                stored = {str(row[0]): row[1] for row in (yield q.select_contents(names, unknown))}
            chunk_stmt = q.update_chunks(names, fields, rows, analyzer, stored)
            if chunk_stmt is not None:
                yield chunk_stmt
        else:
            found = _found((yield q.select_existing_ids(names, ids)))
            for rid in ids:
                if rid not in found:
                    raise NotFound("record", rid)
        if vector_action == "drop":
            yield q.delete_chunks(names, ids)
        elif vector_action == "set":
            texts: dict[str, Any]
            if "index_text" in fields:  # content and/or index_text patched: the row tells
                texts = {row["record_id"]: q.patched_indexed_text(row, stored) for row in rows}
            else:  # a chunk created here needs the record's (unchanged) indexed text, analysed
                texts = {
                    str(row[0]): q.indexed_text(row[1], row[2]) for row in (yield q.select_contents(names, ids))
                }
            vector_rows = [
                q.vector_row(p.record_id, np.asarray(p.vector), q.analysed_text(texts.get(p.record_id), analyzer))
                for p in group
            ]
            yield q.upsert_chunk_vectors(names, vector_rows)
    return None


def _add_links_plan(names: StoreNames, links: Sequence[Link]) -> Plan[None]:
    """Check endpoints and clashes the way the reference does (first offending link in batch
    order decides the error), then insert all links in one array DML."""
    ends = list(dict.fromkeys(end for link in links for end in (link.source_id, link.target_id)))
    found = _found((yield q.select_existing_ids(names, ends)))
    clash_rows = yield q.select_link_conflicts(names, links)
    link_ids = {row[0] for row in clash_rows}
    pairs = {(row[1], row[2]) for row in clash_rows}
    for link in links:
        for end in (link.source_id, link.target_id):
            if end not in found:
                raise NotFound("record", end)
        if link.link_id in link_ids:
            raise Conflict(f"link id {link.link_id!r} already exists")
        pair = q.pair_of(link)
        if pair in pairs:
            raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
        link_ids.add(link.link_id)
        pairs.add(pair)
    yield q.insert_links(names, [q.link_row(link) for link in links])
    return None


def settle_plan(names: StoreNames, features: set[str] | frozenset[str]) -> Plan[dict[str, bool]]:
    """``settle``: synchronise the Oracle Text index (when the store has one). The HNSW index
    needs nothing: DML reaches it through its journal and ``FETCH APPROX`` reads both."""
    status: dict[str, bool] = {}
    if "vector_index" in features:
        status["vector"] = True
    if "text_index" in features:
        sql, binds = ddl.sync_text_index(names)
        yield q.Execute(sql, binds)
        status["keyword"] = True
    return status


# ---- schema -----------------------------------------------------------------------------------
@dataclass
class OpenResult:
    """What ``open_plan`` found or made."""

    schema_version: int
    language: str = ""
    """The keyword analyzer's language now in force (``agentmemory.analysis``)."""
    features: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)


def _existing(rows: Sequence[Sequence[Any]]) -> set[str]:
    return {str(row[0]) for row in rows}


def drop_plan(names: StoreNames) -> Plan[list[str]]:
    """Drop every object of the store that exists (tables take their indexes along)."""
    sql, binds = ddl.select_objects(names, [n for n, _ in ddl.drop_statements(names)])
    existing = _existing((yield q.Fetch(sql, binds)))
    dropped = []
    for name, statement in ddl.drop_statements(names):
        if name not in existing:
            continue
        try:
            yield q.Execute(statement)
        except BackendError as exc:
            if ora_code_of(exc) not in DOES_NOT_EXIST:
                raise
        dropped.append(name)
    return dropped


def open_plan(
    names: StoreNames,
    dimension: int,
    policy: SchemaPolicy,
    options: ddl.IndexOptions,
    now: datetime,
    *,
    migration_steps: dict[int, list[str]] | None = None,
    language: str | None = None,
) -> Plan[OpenResult]:
    """Check, create or recreate the schema per ``policy``; verify version and dimension; make
    ``chunk_text`` match the keyword analyzer (``language``, else the stored one, else English):
    written under another fingerprint (or before version 2), every chunk is re-analysed.

    REQUIRE_EXISTING runs no DDL: a missing store, an older schema or a missing table is
    ``BackendUnavailable``. CREATE_IF_NECESSARY creates what is missing (tolerating a concurrent
    creator) and applies migrations. RECREATE drops everything first. Optional indexes that
    cannot be built leave a warning and a missing feature, not an error; a failed build is
    dropped at once (a FAILED Oracle Text index would block every write to the chunk table), and
    an optional index found FAILED or UNUSABLE is dropped and built again (REQUIRE_EXISTING only
    warns, naming the statement that fixes it).
    """
    policy = SchemaPolicy(policy)
    if policy is SchemaPolicy.RECREATE:
        yield from drop_plan(names)
    steps = ddl.schema_steps(names, dimension, options)
    sql, binds = ddl.select_objects(names, [names.meta, *(s.name for s in steps)])
    existing = _existing((yield q.Fetch(sql, binds)))
    result = OpenResult(schema_version=ddl.SCHEMA_VERSION)
    require = policy is SchemaPolicy.REQUIRE_EXISTING
    hint = "open it with schema_policy='create_if_necessary'"
    if names.meta not in existing:
        if require:
            raise BackendUnavailable(f"memory store {names.store_id!r} does not exist (no table {names.meta}); {hint}")
        yield from _create(ddl.meta_table(names), result)
    rows = yield q.Fetch(ddl.select_meta(names))
    if not rows:
        if require:
            raise BackendUnavailable(f"memory store {names.store_id!r} has no schema version row; {hint}")
        try:
            yield q.Execute(
                ddl.insert_meta(names),
                {"version": ddl.SCHEMA_VERSION, "dimension": int(dimension), "now": q.to_db_time(now)},
                {"now": "timestamp"},
            )
        except Conflict:
            pass  # a concurrent opener inserted it first
        rows = yield q.Fetch(ddl.select_meta(names))
        if not rows:
            raise BackendError(f"could not write the schema version row of {names.store_id!r}")
    version, stored_dimension = int(rows[0][0]), int(rows[0][1])
    if stored_dimension != int(dimension):
        raise Conflict(
            f"memory store {names.store_id!r} holds {stored_dimension}-d vectors, not {dimension}-d "
            "(use another memory_store_id, or schema_policy='recreate' to start over)"
        )
    if version > ddl.SCHEMA_VERSION:
        raise BackendUnavailable(
            f"memory store {names.store_id!r} has schema version {version}, newer than this package "
            f"supports ({ddl.SCHEMA_VERSION}); upgrade agentmemory-oracle"
        )
    if version < ddl.SCHEMA_VERSION:
        if require:
            raise BackendUnavailable(
                f"memory store {names.store_id!r} has schema version {version} and needs an upgrade to "
                f"{ddl.SCHEMA_VERSION}; {hint}"
            )
        try:
            plan = ddl.migration_plan(names, version, ddl.SCHEMA_VERSION, migration_steps)
        except ValueError as exc:
            raise BackendUnavailable(f"memory store {names.store_id!r} cannot be upgraded: {exc}") from None
        for _, statement in plan:
            try:
                yield q.Execute(statement)
            except BackendError as exc:
                if ora_code_of(exc) != COLUMN_EXISTS or " ADD (" not in statement:
                    raise
        yield q.Execute(
            ddl.update_meta_version(names),
            {"version": ddl.SCHEMA_VERSION, "now": q.to_db_time(now)},
            {"now": "timestamp"},
        )
    missing = [s.name for s in steps if not s.optional and s.name not in existing]
    if require and missing:
        raise BackendUnavailable(
            f"memory store {names.store_id!r} is incomplete (missing {', '.join(missing)}); {hint}"
        )
    optional = {s.name: s for s in steps if s.optional}
    changed = False
    index_rows = yield q.Fetch(*ddl.select_indexes(names))  # before any DDL: repair broken ones
    for name in _broken_indexes(index_rows):
        step = optional.get(name) or _index_step(names, name)  # a disabled index blocks DML too
        statement, state = ddl.drop_index(name, domain=step.domain), _index_state(index_rows, name)
        if require:
            blocks = " (DML on its table fails with ORA-29861 until it is dropped)" if step.domain else ""
            result.warnings.append(
                f"{step.feature} is not available: index {name} is {state}{blocks}; open with "
                f"schema_policy='create_if_necessary' to drop and rebuild it, or run {statement}"
            )
            continue
        dropped = yield from _drop_index(step)
        done = "dropped it" if dropped is None else f"could not drop it ({dropped})"
        again = " to build it again" if name in optional else ""
        result.warnings.append(f"{step.feature}: index {name} was {state}; {done} ({statement}){again}")
        existing.discard(name)
        changed = True
    if not require:
        for step in steps:
            if step.name not in existing:
                yield from _create(step, result)
                changed = True
    yield from _analyzer_plan(names, result, language, now)
    if changed:
        index_rows = yield q.Fetch(*ddl.select_indexes(names))
    usable = {str(row[0]) for row in index_rows if all(str(v).upper() == "VALID" for v in row[1:])}
    for feature, index in (
        ("vector_index", names.vector_index),
        ("text_index", names.text_index),
        ("metadata_index", names.metadata_index),
    ):
        if index in usable:
            result.features.add(feature)
    return result


def _analyzer_plan(names: StoreNames, result: OpenResult, language: str | None, now: datetime) -> Plan[None]:
    """Re-analyse every ``chunk_text`` (from each record's indexed text: ``index_text``, else
    the content) when the stored analyzer fingerprint is not the one in force (a version-1 store
    has none), then record it. DML only, in the open's transaction."""
    rows = yield q.Fetch(ddl.select_meta_analyzer(names))
    stored_language, stored_fingerprint = (rows[0][0], rows[0][1]) if rows else (None, None)
    analyzer = Analyzer.for_language(language or stored_language)
    result.language = analyzer.language
    if stored_fingerprint == analyzer.fingerprint:
        return None
    chunks = yield q.select_chunk_contents(names)
    if chunks:
        yield q.update_chunk_texts(
            names,
            [
                {"record_id": str(rid), "chunk_text": q.analysed_text(q.indexed_text(content, index_text), analyzer)}
                for rid, content, index_text in chunks
            ],
        )
    yield q.Execute(
        ddl.update_meta_analyzer(names),
        {"language": analyzer.language, "fingerprint": analyzer.fingerprint, "now": q.to_db_time(now)},
        {"now": "timestamp"},
    )
    return None


def _broken_indexes(rows: Sequence[Sequence[Any]]) -> list[str]:
    """Indexes in a state that never heals (``ddl.BROKEN_STATES``), in row order."""
    return [str(row[0]) for row in rows if any(str(v).upper() in ddl.BROKEN_STATES for v in row[1:])]


def _index_step(names: StoreNames, name: str) -> ddl.DdlStep:
    """What ``open`` knows of an optional index it was not asked to create (to drop it)."""
    feature = {names.vector_index: "vector_index", names.text_index: "text_index"}.get(name, "metadata_index")
    return ddl.DdlStep(name, "", optional=True, feature=feature, domain=name == names.text_index)


def _index_state(rows: Sequence[Sequence[Any]], name: str) -> str:
    return "/".join(
        dict.fromkeys(str(v).upper() for row in rows if str(row[0]) == name for v in row[1:] if str(v).upper() != "VALID")
    )


def _drop_index(step: ddl.DdlStep) -> Plan[BackendError | None]:
    """Drop an optional index left FAILED/UNUSABLE (a missing one is fine); the error if that
    failed too."""
    try:
        yield q.Execute(ddl.drop_index(step.name, domain=step.domain))
    except BackendError as exc:
        if ora_code_of(exc) not in DOES_NOT_EXIST:
            return exc
    return None


def _create(step: ddl.DdlStep, result: OpenResult) -> Plan[None]:
    """Run one CREATE; an optional one that fails leaves a warning, and whatever the failed build
    left behind (a FAILED domain index blocks DML on its table) is dropped at once."""
    try:
        yield q.Execute(step.sql)
        result.created.append(step.name)
    except BackendError as exc:
        if ora_code_of(exc) in ALREADY_EXISTS:
            return None
        if not step.optional:
            raise
        dropped = yield from _drop_index(step)
        cleanup = "" if dropped is None else f"; dropping what the build left failed too ({dropped})"
        result.warnings.append(f"{step.feature or step.name} is not available: {exc}{cleanup}")
    return None
