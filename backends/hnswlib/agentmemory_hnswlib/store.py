"""``HnswlibStore``: an hnswlib ANN index beside a SQLite record store, in one directory.

SQLite (WAL) holds every record, vector, link and the store metadata and is the source of truth;
each write batch is one SQLite transaction. The hnswlib index and the in-memory scope columns
are derived state, updated after each commit, snapshotted now and then, and reconciled with the
records on open, so a crash (even SIGKILL) never loses a committed record. Scoped vector search
chooses per query between an exact numpy scan of the matching vectors and the ANN index with
over-fetch; keyword search is BM25 over an FTS5 index with the reference store's exact scoring.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import itertools
import logging
import math
import os
import sqlite3
import threading
import uuid
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from agentmemory.analysis import Analyzer, normalize_language
from agentmemory.errors import (
    BackendError,
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    NotFound,
    TransientBackendError,
)
from agentmemory.records import Link, Record, RecordStatus
from agentmemory.spi import (
    ANY,
    UNSET,
    Capability,
    Hit,
    MemoryStore,
    NewRecord,
    Order,
    RecordFilter,
    RecordPatch,
    SchemaPolicy,
    StoreInfo,
    WriteBatch,
)

from . import _sql
from ._columns import Columns, VectorRow, to_us, unit
from ._index import ReconcileReport, Snapshots, VectorIndex
from ._postings import FILE as POSTINGS_FILE
from ._postings import Postings

try:  # POSIX advisory locks; elsewhere the single-process rule is documented, not enforced
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

DB_FILE = "records.sqlite3"
LOCK_FILE = "LOCK"
# Planner cost model (nanoseconds, measured on a 2-vCPU Zen 3 at 100k x 384): an exact scan
# costs per matching row; an ANN query costs per unit of ef plus a fixed call overhead.
_EXACT_NS_PER_ROW = 230.0
_META_NS_PER_ROW = 3000.0
_ANN_NS_PER_EF = 2700.0
_ANN_NS_FIXED = 40000.0
_EF_PER_FETCH = 2.0
"""ef of a scoped ANN fetch, per element fetched: its useful hits sit deep in the unfiltered
ranking (about k / selectivity), where a beam as wide as the fetch alone loses recall."""
_META_SAMPLE = 64
"""Rows sampled to estimate how selective a metadata filter is before planning."""
_FETCH_PARAMS = 256
"""Records fetched by id with one bound parameter each (below SQLite's oldest 999 limit)."""
_PLACES = [",".join("?" * count) for count in range(_FETCH_PARAMS + 1)]
_RECORD_CACHE = 8192
"""Decoded records kept by id (``HnswlibStore._records``)."""
_TIE_MARGIN = 4e-6
"""Distances closer than this to the edge of an ANN fetch may round to a tie (6 decimals)."""
_CAPABILITIES = frozenset({
    Capability.KEYWORD_SEARCH, Capability.PERSISTENCE, Capability.APPROXIMATE_SEARCH,
    Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS,
})
"""What every hnswlib store declares (one set: the SPI asks before each keyword search)."""
_PATCH_MIN = 4096
"""A memoised scope is brought up to date slot by slot when at most this many slots (or a
sixteenth of them) changed since it was made, else made again (``HnswlibStore._refreshed``)."""


def _int_option(name: str, value: Any, minimum: int, maximum: int | None = None) -> int:
    """An int option (strings of digits accepted, for CLI ``--agentmemory-option``)."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise InvalidArgument(name, f"must be an int, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(name, f"must be an int, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in {minimum}..{maximum}"
        raise InvalidArgument(name, f"must be {bound}, got {value}")
    return value


def _float_option(name: str, value: Any, minimum: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise InvalidArgument(name, f"must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(name, f"must be a finite number, got {value!r}")
    if value < minimum:
        raise InvalidArgument(name, f"must be >= {minimum}, got {value}")
    return float(value)


def _backend_error(exc: sqlite3.Error) -> BackendError:
    text = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text):
        return TransientBackendError(f"sqlite: {text}")
    return BackendError(f"sqlite: {text}")


class HnswlibStore(MemoryStore):
    """A local, persistent store: SQLite records + an hnswlib cosine index in the directory
    ``path`` (created on open; ``directory=`` is a deprecated alias of ``path``).

    ``M``/``ef_construction`` shape new index builds; ``ef_search`` is the minimum search
    breadth (default: by index size, 64 up to 200k vectors, 128 up to 1M, 256 above — measured
    recall@10 0.999 at 100k with 64, 0.996 at 1M with 128); ``overfetch`` multiplies the expected number of candidates a scoped ANN query
    fetches; ``exact_threshold`` forces the planner (exact scan iff at most that many candidate
    vectors; None = cost model). The index is snapshotted after ``max(checkpoint_min,
    checkpoint_ratio * live vectors)`` changes and on close. ``synchronous`` is SQLite's
    durability level ("full": every commit survives power loss; "normal": survives crashes).
    ``language`` is the keyword analyzer (``agentmemory.analysis``: a Snowball language, default
    ``english``, or ``none``), persisted in the store; opening with another one, or with code
    whose analyzer fingerprint differs, re-analyses every document before the store is used.
    """

    name = "hnswlib"
    min_recall_at_10 = 0.99

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        M: int = 16,
        ef_construction: int = 200,
        ef_search: int | None = None,
        overfetch: float = 2.0,
        exact_threshold: int | None = None,
        checkpoint_min: int = 1000,
        checkpoint_ratio: float = 0.25,
        rebuild_min: int = 1000,
        num_threads: int = -1,
        synchronous: str = "full",
        language: str | None = None,
    ) -> None:
        super().__init__()
        if directory is not None:
            if path is not None:
                raise InvalidArgument("directory", "is the deprecated name of path: pass path only")
            warnings.warn("HnswlibStore(directory=...) is deprecated; use path=...", DeprecationWarning, stacklevel=2)
            path = directory
        if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
            raise InvalidArgument("path", f"must be a non-empty directory path, got {path!r}")
        self._directory = Path(path).expanduser().resolve()
        self._M = _int_option("M", M, 2, 2048)
        self._ef_construction = _int_option("ef_construction", ef_construction, 1)
        self._ef_search = None if ef_search in (None, "", "auto") else _int_option("ef_search", ef_search, 1)
        self._overfetch = _float_option("overfetch", overfetch, 1.0)
        self._exact_threshold = (
            None if exact_threshold in (None, "", "none", "None")
            else _int_option("exact_threshold", exact_threshold, 0)
        )
        self._checkpoint_min = _int_option("checkpoint_min", checkpoint_min, 1)
        self._checkpoint_ratio = _float_option("checkpoint_ratio", checkpoint_ratio, 0.0)
        self._rebuild_min = _int_option("rebuild_min", rebuild_min, 0)
        self._num_threads = _int_option("num_threads", num_threads, -1)
        if self._num_threads == 0:
            raise InvalidArgument("num_threads", "must be -1 (all cores) or >= 1")
        sync = str(synchronous).lower()
        if sync not in ("full", "normal", "extra"):
            raise InvalidArgument("synchronous", f"must be 'full', 'normal' or 'extra', got {synchronous!r}")
        self._synchronous = sync
        self._language = None if language is None else normalize_language(language)
        self._analyzer = Analyzer.for_language(self._language)
        """The keyword analyzer; on open, the store's language unless ``language`` was given."""
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._cols: Columns | None = None
        self._index: VectorIndex | None = None
        self._postings: Postings | None = None
        """Keyword postings (``_postings``): loaded on open from the persisted base (caught up
        with the commits after it), else built at the first keyword search; kept up to date by
        every write, persisted at settle, checkpoints and close."""
        self.postings_builds = 0
        """How many times this store object built the postings' base from the FTS bodies (a
        reopen that loads the persisted base builds none: tests, diagnostics)."""
        self.postings_source: str | None = None
        """Where the current postings came from: ``loaded`` (the persisted base), ``built``, or
        None (none yet)."""
        self._snaps = Snapshots(self._directory)
        self._txn = 0
        self._store_uid = ""
        self._seq = 0
        self._broken: str | None = None
        self.last_reconcile: Any = None
        """What the last open had to do to bring the index in line with the records."""
        self._rng = np.random.default_rng(0x5EED)
        self._masks: dict[tuple[Any, ...], _Scope | _Alive] = {}
        """Scopes by ``_scope_key`` (``_scope``), each stamped with the columns version it is of."""
        self._records: dict[str, Record] = {}
        """Decoded records by id, at most ``_RECORD_CACHE`` (oldest dropped first): a context
        card reads the same few hundred records again and again. ``Record`` is frozen and the
        reference store, too, hands out its stored objects. Every write drops the ids it adds,
        patches or deletes (committed or rolled back) before the lock is released; reloading
        the state and closing drop them all."""
        self.plan_counts: Counter[str] = Counter()
        """How vector queries were answered: ``exact``, ``ann``, ``ann_refetch`` (a fetch had
        to grow), ``ann_fallback`` (the ANN path gave way to an exact scan)."""

    @classmethod
    def from_uri(cls, uri: str) -> HnswlibStore:
        """``hnswlib:///abs/dir`` (or ``hnswlib://rel/dir``), options as query parameters:
        ``hnswlib:///data/mem?ef_search=64&M=32``."""
        parts = urlsplit(uri)
        if parts.scheme != cls.name:
            raise InvalidArgument("store", f"expected a {cls.name}:// URI, got {uri!r}")
        location = unquote(parts.netloc + parts.path)
        if not location.strip("/"):
            raise InvalidArgument("store", f"{uri!r} names no directory (use hnswlib:///abs/dir)")
        options: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
        known = {"M", "ef_construction", "ef_search", "overfetch", "exact_threshold", "checkpoint_min",
                 "checkpoint_ratio", "rebuild_min", "num_threads", "synchronous", "language"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InvalidArgument("store", f"unknown option(s) {unknown} in {uri!r}; known: {sorted(known)}")
        return cls(location, **options)

    @classmethod
    def in_directory(cls, directory: Path, **options: Any) -> HnswlibStore:
        """The store's files directly in ``directory``."""
        return cls(directory, **options)

    @property
    def analyzer(self) -> Analyzer:
        """The keyword analyzer in force (``agentmemory.analysis``): after ``open``, the store's."""
        return self._analyzer

    @property
    def path(self) -> Path:
        """The directory where the store keeps its files."""
        return self._directory

    @property
    def directory(self) -> Path:
        """Deprecated alias of ``path``."""
        warnings.warn("HnswlibStore.directory is deprecated; use .path", DeprecationWarning, stacklevel=2)
        return self._directory

    def capabilities(self) -> frozenset[Capability]:
        return _CAPABILITIES

    def info(self) -> StoreInfo:
        with self._lock:
            self._usable()
            assert self._cols is not None and self._index is not None and self._con is not None
            records = self._con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
            return StoreInfo(
                name=self.name,
                dimension=self.dimension,
                path=str(self._directory),
                extra={
                    "records": records,
                    "vectors": self._cols.n,
                    "index_elements": self._index.element_count,
                    "index_tombstones": self._index.deleted,
                    "index_generation": self._snaps.generation,
                    "unsaved_index_changes": self._index.unsaved,
                    "ef_search": self._ef_search if self._ef_search is not None else f"auto ({self._ef_floor()})",
                    "language": self._analyzer.language,
                    "analyzer": self._analyzer.fingerprint,
                    "keyword_postings": self.postings_source,
                },
            )

    # ---- lifecycle --------------------------------------------------------------------------
    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        with self._lock:
            db_path = self._directory / DB_FILE
            if schema_policy is SchemaPolicy.REQUIRE_EXISTING and not db_path.exists():
                raise BackendUnavailable(
                    f"no hnswlib store at {self._directory} (schema_policy=require_existing); "
                    "open with create_if_necessary to create it"
                )
            try:
                self._directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BackendUnavailable(f"cannot create {self._directory}: {exc}") from exc
            self._acquire_lock()
            try:
                self._open_locked(dimension, schema_policy, db_path)
            except BaseException:
                self._release()
                raise

    def _acquire_lock(self) -> None:
        path = self._directory / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise BackendUnavailable(f"cannot open lock file {path}: {exc}") from exc
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = ""
                with contextlib.suppress(OSError, ValueError):
                    holder = os.pread(fd, 64, 0).decode().strip()
                os.close(fd)
                raise BackendUnavailable(
                    f"hnswlib store {self._directory} is already open"
                    + (f" (by process {holder})" if holder else "")
                    + "; one process (and one store object) may open it at a time"
                ) from None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def _open_locked(self, dimension: int, schema_policy: SchemaPolicy, db_path: Path) -> None:
        if schema_policy is SchemaPolicy.RECREATE:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(db_path) + suffix).unlink(missing_ok=True)
            Snapshots.remove_all(self._directory)
        try:
            con = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"cannot open {db_path}: {exc}") from exc
        self._con = con
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
            con.execute("PRAGMA temp_store=MEMORY")
            con.execute("PRAGMA cache_size=-65536")
            _sql.register_functions(con)
            self._prepare_schema(con, dimension, schema_policy)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"cannot open {db_path}: {exc}") from exc
        self._load_state(dimension)
        self._broken = None

    def _prepare_schema(self, con: sqlite3.Connection, dimension: int, policy: SchemaPolicy) -> None:
        has_meta = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        meta: dict[str, str] = {}
        if has_meta:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if "schema_version" not in meta:
            if policy is SchemaPolicy.REQUIRE_EXISTING:
                raise BackendUnavailable(
                    f"{self._directory} holds no agentmemory schema (schema_policy=require_existing)"
                )
            user_tables = con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            if user_tables and not has_meta:
                raise Conflict(f"{self._directory / DB_FILE} is a SQLite file of something else")
            con.execute("BEGIN IMMEDIATE")
            try:
                for statement in _sql.SCHEMA.split(";"):
                    if statement.strip():
                        con.execute(statement)
                uid = uuid.uuid4().hex
                con.executemany(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                    [("schema_version", str(_sql.SCHEMA_VERSION)), ("dimension", str(dimension)),
                     ("seq", "0"), ("txn", "0"), ("store_uid", uid), ("language", self._analyzer.language),
                     ("analyzer", self._analyzer.fingerprint)],
                )
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            Snapshots.remove_all(self._directory)
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        if meta["schema_version"] not in {str(v) for v in range(1, _sql.SCHEMA_VERSION + 1)}:
            raise Conflict(
                f"store schema version {meta['schema_version']} is not supported "
                f"(this agentmemory-hnswlib writes version {_sql.SCHEMA_VERSION})"
            )
        self._analyzer = Analyzer.for_language(self._language or meta.get("language"))
        if meta.get("analyzer") != self._analyzer.fingerprint or meta["schema_version"] != str(_sql.SCHEMA_VERSION):
            if "index_text" not in {row[1] for row in con.execute("PRAGMA table_info(records)")}:
                con.execute("ALTER TABLE records ADD COLUMN index_text TEXT")  # version 3; NULL = content
            self._reanalyse(con, int(meta["txn"]))
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        stored_dim = int(meta["dimension"])
        if stored_dim != dimension:
            if con.execute("SELECT EXISTS (SELECT 1 FROM vectors)").fetchone()[0]:
                raise Conflict(f"store holds {stored_dim}-d vectors, not {dimension}-d")
            con.execute("UPDATE meta SET value = ? WHERE key = 'dimension'", (str(dimension),))
            Snapshots.remove_all(self._directory)
        con.execute(_sql.THREAD_TYPE_INDEX)
        self._seq = int(meta["seq"])
        self._txn = int(meta["txn"])
        self._store_uid = meta["store_uid"]

    def _reanalyse(self, con: sqlite3.Connection, txn: int) -> None:
        """Rewrite every document's FTS row and term count with the current analyzer, in one
        transaction that also migrates the schema version and stamps the rows as changed
        (``rev``), so the open that follows refreshes its in-memory term counts from them even
        when it starts from an index snapshot taken before (a crash in between included)."""
        terms = self._analyzer.terms
        txn += 1
        con.execute("BEGIN IMMEDIATE")
        try:
            rows = con.execute(
                "SELECT v.label, coalesce(r.index_text, r.content) FROM vectors v JOIN records r ON r.record_id = v.record_id"
            ).fetchall()
            analysed = [(label, terms(content)) for label, content in rows]
            con.execute("DELETE FROM fts")
            con.executemany("INSERT INTO fts (rowid, body) VALUES (?, ?)", ((label, " ".join(t)) for label, t in analysed))
            con.executemany("UPDATE vectors SET ntok = ? WHERE label = ?", ((len(t), label) for label, t in analysed))
            con.execute("UPDATE records SET rev = ? WHERE record_id IN (SELECT record_id FROM vectors)", (txn,))
            con.executemany(
                "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                [("schema_version", str(_sql.SCHEMA_VERSION)), ("language", self._analyzer.language),
                 ("analyzer", self._analyzer.fingerprint), ("txn", str(txn))],
            )
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        if rows:
            log.info("re-analysed %d documents of %s for keyword search (%s)", len(rows), self._directory,
                     self._analyzer.fingerprint)

    def _load_state(self, dimension: int) -> None:
        """Bring up the columns and the index: from the newest snapshot caught up with the
        commits after it (fast), else from the records with the index reconciled or rebuilt."""
        snaps = Snapshots(self._directory)
        snaps.remove_orphans(keep=None)
        manifest = snaps.manifest(self._store_uid, dimension)
        state = None
        if manifest is not None:
            try:
                state = self._open_from_snapshot(snaps, manifest, dimension)
            except Exception as exc:  # noqa: BLE001 - any damage: fall back to the records
                log.warning("snapshot %s of %s unusable (%s); reading the records", manifest.get("generation"),
                            self._directory, exc)
        if state is None:
            try:
                state = self._open_from_records(snaps, manifest, dimension)
            except sqlite3.Error as exc:
                raise BackendUnavailable(f"cannot read {self._directory / DB_FILE}: {exc}") from exc
        self._cols, self._index, self.last_reconcile = state
        self._postings = None
        self.postings_source = None
        self._records.clear()
        self._snaps = snaps
        snaps.remove_orphans(keep=snaps.generation if manifest is not None else None)
        self._load_postings()
        if self._index.unsaved or (self.last_reconcile.source != "snapshot" and self._cols.n):
            self._checkpoint(force=True)  # so that the next open takes the fast path

    def _load_postings(self) -> None:
        """Take up the persisted postings base, caught up with the commits after it: its gone
        labels masked, every document changed since (``rev`` above its transaction) in the
        overlay. Anything amiss (no file, another store or analyzer, damage, a count that does
        not add up) leaves no postings: the first keyword search builds them."""
        con, cols = self._con, self._cols
        assert con is not None and cols is not None
        if not cols.n or not (self._directory / POSTINGS_FILE).exists():
            return
        try:
            postings = Postings.load(self._directory, cols, store_uid=self._store_uid,
                                     analyzer=self._analyzer.fingerprint, txn=self._txn)
            postings.removed(postings.gone(cols))
            changed = [label for (label,) in con.execute(
                "SELECT v.label FROM vectors v JOIN records r ON r.record_id = v.record_id WHERE r.rev > ?",
                (postings.txn,),
            )]
            postings.changed(con, changed)
            if not postings.covers(cols):
                raise ValueError("postings and records disagree after catching up")
        except Exception as exc:  # noqa: BLE001 - any doubt: rebuilt from the records when needed
            log.warning("keyword postings of %s unusable (%s); they will be rebuilt", self._directory, exc)
            return
        self._postings, self.postings_source = postings, "loaded"

    def _build_postings(self, con: sqlite3.Connection, cols: Columns) -> Postings:
        """A fresh postings base from the FTS bodies as of the current transaction."""
        postings = self._postings = Postings(con, cols, self._txn)
        self.postings_builds += 1
        self.postings_source = "built"
        return postings

    def _save_postings(self) -> None:
        """Persist the postings' base unless the file already holds it (call under the lock)."""
        postings, cols = self._postings, self._cols
        if postings is None or postings.saved or cols is None:
            return
        try:
            postings.save(self._directory, store_uid=self._store_uid, analyzer=self._analyzer.fingerprint, cols=cols)
        except OSError as exc:  # only the next open's speed is at stake
            log.warning("could not persist the keyword postings of %s: %s", self._directory, exc)

    def _new_index(self, dimension: int) -> VectorIndex:
        return VectorIndex(dimension, M=self._M, ef_construction=self._ef_construction, num_threads=self._num_threads)

    def _open_from_snapshot(
        self, snaps: Snapshots, manifest: dict[str, Any], dimension: int
    ) -> tuple[Columns, VectorIndex, ReconcileReport]:
        con = self._con
        assert con is not None
        cols, has_vectors = snaps.load_columns(manifest, dimension)
        index = self._new_index(dimension)
        index.load(snaps.path(manifest, "index"), cols.n)
        # Catch up: labels gone from the records are dropped; rows changed after the snapshot's
        # transaction are refreshed or added. Labels are never reused, so this is exact.
        if has_vectors:
            db_labels = np.fromiter((row[0] for row in con.execute("SELECT label FROM vectors")), np.int64)
        else:  # the snapshot's vectors from their rows, read in the same pass as the labels
            db_labels = self._fill_vectors(con, cols)
        in_db = np.zeros(max(int(db_labels.max(initial=0)), int(cols.labels[: cols.n].max(initial=0))) + 1, bool)
        in_db[db_labels] = True
        gone = cols.labels[: cols.n][~in_db[cols.labels[: cols.n]]].copy()
        index.delete([cols.remove(cols.rids[int(cols.label_slot[label])]) for label in gone])
        rows = con.execute(
            _sql.VECTOR_ROW_SQL + " WHERE r.rev > ? ORDER BY v.label", (int(manifest["txn"]),)
        ).fetchall()
        fresh = []
        for row in rows:
            vrow = VectorRow(*row)
            if cols.label_of(vrow.record_id) == vrow.label:
                cols.update(vrow)
            else:
                fresh.append(vrow)
        slots = cols.add(fresh)
        index.add(cols.labels[slots], cols.vectors[slots])
        # Labels are unique on both sides: equal counts and inclusion mean equal sets.
        if len(db_labels) != cols.n or not in_db[cols.labels[: cols.n]].all():
            raise ValueError("snapshot and records disagree after catching up")
        index.unsaved = len(gone) + len(fresh)
        return cols, index, ReconcileReport(int(manifest["generation"]), False, len(fresh), len(gone), "snapshot")

    @staticmethod
    def _fill_vectors(con: sqlite3.Connection, cols: Columns) -> np.ndarray:
        """Fill ``cols.vectors`` of every snapshot slot from SQLite's ``vectors`` rows (by
        label) and return every label there. A slot whose label is gone keeps zeros; the
        catch-up drops it before anything reads it."""
        n = cols.n
        cols.vectors[:n] = 0.0
        label_slot = cols.label_slot
        known = label_slot.shape[0]
        labels: list[np.ndarray] = []
        cur = con.execute("SELECT label, embedding FROM vectors")
        while rows := cur.fetchmany(4096):
            chunk = np.fromiter((row[0] for row in rows), np.int64, len(rows))
            labels.append(chunk)
            slots = np.full(len(rows), -1, np.int64)
            inside = chunk < known
            slots[inside] = label_slot[chunk[inside]]
            have = slots >= 0
            if have.any():
                blobs = b"".join(row[1] for row, ok in zip(rows, have.tolist()) if ok)
                cols.vectors[slots[have]] = np.frombuffer(blobs, np.float32).reshape(-1, cols.dim)
        return np.concatenate(labels) if labels else np.zeros(0, np.int64)

    def _open_from_records(
        self, snaps: Snapshots, manifest: dict[str, Any] | None, dimension: int
    ) -> tuple[Columns, VectorIndex, ReconcileReport]:
        con = self._con
        assert con is not None
        rows = con.execute(_sql.VECTOR_ROW_SQL + " ORDER BY v.label").fetchall()
        cols = Columns(dimension, capacity=int(len(rows) * 1.25) + 16)
        cols.load(rows)
        labels, vectors = cols.labels[: cols.n], cols.vectors[: cols.n]
        index = self._new_index(dimension)
        if manifest is not None:
            try:
                snap = snaps.load_labels(manifest)
                index.load(snaps.path(manifest, "index"), len(snap))
                gone = np.setdiff1d(snap, labels)
                missing = ~np.isin(labels, snap)
                index.delete([int(label) for label in gone])
                index.add(labels[missing], vectors[missing])
                index.unsaved = len(gone) + int(missing.sum())
                report = ReconcileReport(int(manifest["generation"]), False, int(missing.sum()), len(gone), "records")
                return cols, index, report
            except Exception as exc:  # noqa: BLE001
                log.warning("index snapshot of %s unusable (%s); rebuilding it", self._directory, exc)
                index = self._new_index(dimension)
        index.rebuild(labels, vectors)
        return cols, index, ReconcileReport(None, True, cols.n, 0, "rebuild")

    def _close(self) -> None:
        with self._lock:
            try:
                if self._index is not None and self._cols is not None and self._index.unsaved:
                    self._checkpoint(force=True)
                if self._con is not None and self._broken is None:
                    self._save_postings()
            finally:
                self._release()

    def _release(self) -> None:
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
            self._con = None
        self._index = None
        self._cols = None
        self._postings = None
        self.postings_source = None
        self._masks.clear()
        self._records.clear()
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # closing the descriptor releases the flock
            self._lock_fd = None

    def checkpoint(self) -> None:
        """Snapshot the index now, so the next open has nothing to reconcile."""
        self._check_open()
        with self._lock:
            self._usable()
            self._checkpoint(force=True)

    def compact(self) -> None:
        """Rebuild the index from the live vectors, dropping every tombstone, and snapshot it."""
        self._check_open()
        with self._lock:
            self._usable()
            assert self._index is not None and self._cols is not None
            n = self._cols.n
            self._index.rebuild(self._cols.labels[:n], self._cols.vectors[:n])
            self._checkpoint(force=True)

    def index_thresholds(self) -> dict[str, int]:
        """``"vector"``: the graph holds every vector from the first one; a query goes through
        it from ``exact_threshold + 1`` candidates, or by default from where the cost model
        prefers it for an unfiltered top-10 (about 930 vectors). ``"keyword"``: the BM25
        postings, built at the first keyword search and kept current after (base + overlay)."""
        if self._exact_threshold is not None:
            vector = self._exact_threshold + 1
        else:  # the cost model's crossover for k=10 over every vector (fetch = k * overfetch)
            n = 1
            while self._prefer_exact(n, 1.0, min(n, math.ceil(10 * self._overfetch)), False):
                n = n * 2 if n < 1 << 20 else n + (1 << 20)
            lo = n // 2
            while lo + 1 < n:  # the smallest n where the ANN path wins
                mid = (lo + n) // 2
                if self._prefer_exact(mid, 1.0, min(mid, math.ceil(10 * self._overfetch)), False):
                    lo = mid
                else:
                    n = mid
            vector = n
        return {"vector": vector, "keyword": 1}

    def _settle(self) -> dict[str, bool]:
        """The graph is updated by every write; settling builds the keyword postings (or
        folds their overlay of changed documents into a fresh base) and snapshots the index
        when it has unsaved changes, so the next open has nothing to reconcile."""
        with self._lock:
            self._usable()
            con, cols, index = self._con, self._cols, self._index
            assert con is not None and cols is not None and index is not None
            postings = self._postings
            if cols.n and (postings is None or postings.overlay or postings.masked):
                try:
                    self._build_postings(con, cols)
                except sqlite3.Error as exc:
                    raise _backend_error(exc) from exc
            if index.unsaved:
                self._checkpoint(force=True)
            self._save_postings()
            return {"vector": True, "keyword": self._postings is not None}

    def _checkpoint(self, force: bool = False) -> None:
        index, cols = self._index, self._cols
        assert index is not None and cols is not None
        if not force and index.unsaved < max(self._checkpoint_min, self._checkpoint_ratio * cols.n):
            return
        cols.cluster()
        try:
            self._snaps.save(self._store_uid, self._txn, index, cols)
        except OSError as exc:  # the records are safe in SQLite; the next open reconciles
            log.warning("could not snapshot the hnswlib index in %s: %s", self._directory, exc)
        self._save_postings()

    def _usable(self) -> None:
        if self._broken is not None:
            raise BackendUnavailable(f"hnswlib store {self._directory} is unusable: {self._broken}")
        if self._con is None:
            raise BackendUnavailable(f"store {self.name!r} is closed or was never opened")

    # ---- writes -------------------------------------------------------------------------------
    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            self._usable()
            con = self._con
            assert con is not None
            touched: set[str] = set()
            try:
                con.execute("BEGIN IMMEDIATE")
                try:
                    txn = self._txn + 1
                    added, seq = self._apply(con, batch, touched, txn)
                    con.execute("COMMIT")
                except BaseException:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise _backend_error(exc) from exc
            finally:  # whatever happened, no decoded record of an id this batch names survives
                self._forget(batch)
            self._seq, self._txn = seq, txn
            self._sync_memory(touched)
            return added

    def _forget(self, batch: WriteBatch) -> None:
        """Drop the cached records of every id ``batch`` adds, patches or deletes (links change
        no record row)."""
        records = self._records
        if not records:
            return
        for item in batch.add:
            records.pop(item.record.record_id, None)
        for patch in batch.patch:
            records.pop(patch.record_id, None)
        for rid in batch.delete:
            records.pop(rid, None)

    def _decoded(self, rows: list[tuple[Any, ...]], keep: bool) -> list[Record]:
        """Records of ``RECORD_COLUMNS`` rows read under the lock, from the cache where it has
        them; with ``keep`` the ones decoded here are cached."""
        records = self._records
        out: list[Record] = []
        fresh = 0
        for row in rows:
            rec = records.get(row[0])
            if rec is None:
                rec = _sql.row_to_record(row)
                if keep:
                    records[row[0]] = rec
                    fresh += 1
            out.append(rec)
        if fresh and len(records) > _RECORD_CACHE:  # drop the oldest entries (dicts keep order)
            for rid in list(itertools.islice(records, len(records) - _RECORD_CACHE)):
                del records[rid]
        return out

    def _apply(
        self, con: sqlite3.Connection, batch: WriteBatch, touched: set[str], txn: int
    ) -> tuple[list[Record], int]:
        """Apply ``batch`` in SPI order inside the open transaction number ``txn``; every
        record it adds or patches is stamped ``rev = txn`` (what a snapshot has not seen)."""
        seq = self._seq
        added: list[Record] = []
        for item in batch.add:
            seq += 1
            added.append(self._insert(con, item, seq, touched, txn))
        for patch in batch.patch:
            self._patch(con, patch, touched, txn)
        for link_id in batch.delete_links:
            if con.execute("DELETE FROM links WHERE link_id = ?", (link_id,)).rowcount == 0:
                raise NotFound("link", link_id)
        for link in batch.add_links:
            self._link(con, link)
        for rid in batch.delete:
            if con.execute("DELETE FROM records WHERE record_id = ?", (rid,)).rowcount == 0:
                raise NotFound("record", rid)
            self._drop_vector(con, rid)
            con.execute("DELETE FROM links WHERE source_id = ? OR target_id = ?", (rid, rid))
            touched.add(rid)
        if seq != self._seq:
            con.execute("UPDATE meta SET value = ? WHERE key = 'seq'", (str(seq),))
        con.execute("UPDATE meta SET value = ? WHERE key = 'txn'", (str(txn),))
        return added, seq

    def _insert(
        self, con: sqlite3.Connection, item: NewRecord, seq: int, touched: set[str], txn: int
    ) -> Record:
        rec = item.record
        try:
            con.execute(
                "INSERT INTO records (record_id, record_type, content, user_id, agent_id, thread_id, "
                "role, seq, timestamp, created_at, expires_at, expires_us, status, metadata, rev, index_text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rec.record_id, rec.record_type.value, rec.content, rec.user_id, rec.agent_id,
                    rec.thread_id, rec.role, seq, rec.timestamp.isoformat(), rec.created_at.isoformat(),
                    None if rec.expires_at is None else rec.expires_at.isoformat(),
                    None if rec.expires_at is None else to_us(rec.expires_at),
                    rec.status.value, _sql.dumps(rec.metadata), txn, rec.index_text,
                ),
            )
        except sqlite3.IntegrityError:
            raise Conflict(f"record id {rec.record_id!r} already exists") from None
        if item.vector is not None:
            self._put_vector(con, rec.record_id, item.vector, rec.indexed_text)
            touched.add(rec.record_id)
        return rec.model_copy(update={"seq": seq, "metadata": copy.deepcopy(rec.metadata)})

    def _put_vector(self, con: sqlite3.Connection, rid: str, vector: np.ndarray, text: str) -> None:
        """Store ``rid``'s vector and keyword row; ``text`` is what is indexed (``indexed_text``)."""
        tokens = self._analyzer.terms(text)
        cur = con.execute(
            "INSERT INTO vectors (record_id, ntok, embedding) VALUES (?, ?, ?)",
            (rid, len(tokens), unit(vector).tobytes()),
        )
        con.execute("INSERT INTO fts (rowid, body) VALUES (?, ?)", (cur.lastrowid, " ".join(tokens)))

    def _drop_vector(self, con: sqlite3.Connection, rid: str) -> None:
        row = con.execute("SELECT label FROM vectors WHERE record_id = ?", (rid,)).fetchone()
        if row is not None:
            con.execute("DELETE FROM vectors WHERE label = ?", row)
            con.execute("DELETE FROM fts WHERE rowid = ?", row)

    def _patch(self, con: sqlite3.Connection, patch: RecordPatch, touched: set[str], txn: int) -> None:
        rid = patch.record_id
        row = con.execute("SELECT content, index_text FROM records WHERE record_id = ?", (rid,)).fetchone()
        if row is None:
            raise NotFound("record", rid)
        sets: list[str] = ["rev = ?"]
        params: list[Any] = [txn]
        index_text: str | None = row[1]
        if isinstance(patch.content, str):
            sets.append("content = ?")
            params.append(patch.content)
        if patch.index_text is not UNSET or isinstance(patch.content, str):  # new content resets it
            index_text = patch.index_text if isinstance(patch.index_text, str) else None
            sets.append("index_text = ?")
            params.append(index_text)
        if isinstance(patch.metadata, Mapping):
            sets.append("metadata = ?")
            params.append(_sql.dumps(dict(patch.metadata)))
        if isinstance(patch.status, RecordStatus):
            sets.append("status = ?")
            params.append(patch.status.value)
        if isinstance(patch.timestamp, datetime):
            sets.append("timestamp = ?")
            params.append(patch.timestamp.isoformat())
        if patch.expires_at is None or isinstance(patch.expires_at, datetime):
            exp = patch.expires_at
            sets.append("expires_at = ?, expires_us = ?")
            params.extend([None, None] if exp is None else [exp.isoformat(), to_us(exp)])
        con.execute(f"UPDATE records SET {', '.join(sets)} WHERE record_id = ?", (*params, rid))
        content: str = patch.content if isinstance(patch.content, str) else row[0]
        content = content if index_text is None else index_text  # what the keyword row indexes
        if patch.vector is UNSET:
            if isinstance(patch.content, str) or patch.index_text is not UNSET:
                vec = con.execute("SELECT label FROM vectors WHERE record_id = ?", (rid,)).fetchone()
                if vec is not None:
                    tokens = self._analyzer.terms(content)
                    con.execute("UPDATE vectors SET ntok = ? WHERE label = ?", (len(tokens), vec[0]))
                    con.execute("UPDATE fts SET body = ? WHERE rowid = ?", (" ".join(tokens), vec[0]))
        else:
            self._drop_vector(con, rid)
            if patch.vector is not None:
                self._put_vector(con, rid, patch.vector, content)
        touched.add(rid)

    def _link(self, con: sqlite3.Connection, link: Link) -> None:
        for end in (link.source_id, link.target_id):
            if con.execute("SELECT 1 FROM records WHERE record_id = ?", (end,)).fetchone() is None:
                raise NotFound("record", end)
        if con.execute("SELECT 1 FROM links WHERE link_id = ?", (link.link_id,)).fetchone():
            raise Conflict(f"link id {link.link_id!r} already exists")
        lo, hi = sorted((link.source_id, link.target_id))
        if con.execute("SELECT 1 FROM links WHERE lo = ? AND hi = ?", (lo, hi)).fetchone():
            raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
        con.execute(
            "INSERT INTO links (link_id, source_id, target_id, link_type, created_at, metadata, lo, hi) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (link.link_id, link.source_id, link.target_id, link.link_type.value,
             link.created_at.isoformat(), _sql.dumps(link.metadata), lo, hi),
        )

    def _sync_memory(self, touched: set[str]) -> None:
        """Bring the columns and the index in line with the just-committed rows of ``touched``."""
        if not touched:
            return
        con, cols, index = self._con, self._cols, self._index
        assert con is not None and cols is not None and index is not None
        try:
            rows = con.execute(
                _sql.VECTOR_ROW_SQL + " WHERE v.record_id IN (SELECT value FROM json_each(?)) "
                "ORDER BY v.label",
                (_sql.dumps(sorted(touched)),),
            ).fetchall()
            fresh = {row[1]: VectorRow(*row) for row in rows}
            stale: list[int] = []
            for rid in sorted(touched):
                label = cols.label_of(rid)
                row = fresh.get(rid)
                if label is None:
                    continue
                if row is not None and row.label == label:
                    cols.update(row)
                    del fresh[rid]
                else:
                    stale.append(cols.remove(rid))
            index.delete(stale)
            new_rows = sorted(fresh.values(), key=lambda r: r.label)
            postings = self._postings
            if postings is not None:
                postings.removed(stale)
                postings.changed(con, [int(row[0]) for row in rows])
            slots = cols.add(new_rows)
            index.add(cols.labels[slots], cols.vectors[slots])
            if index.deleted > max(self._rebuild_min, cols.n):
                index.rebuild(cols.labels[: cols.n], cols.vectors[: cols.n])
                self._checkpoint(force=True)
            else:
                self._checkpoint()
        except Exception as exc:  # noqa: BLE001 - the batch is committed; rebuild derived state
            log.exception("in-memory index update failed; reloading from %s", self._directory)
            try:
                self._load_state(cols.dim)
            except Exception as again:  # noqa: BLE001
                self._broken = f"{type(exc).__name__}: {exc}; reload failed: {again}"

    # ---- reads --------------------------------------------------------------------------------
    def _reading(self) -> _Reading:
        """``with self._reading() as con:`` the open connection under the store's lock, SQLite
        errors raised as the SPI's (a class, not a generator: a card reads seven times)."""
        return _Reading(self)

    def _query(
        self, filter: RecordFilter, order: Order, limit: int | None, offset: int
    ) -> list[Record]:
        clause, params = _sql.where(filter, to_us)
        direction = "DESC" if order is Order.SEQ_DESC else "ASC"
        if limit is not None and limit <= _RECORD_CACHE // 8:
            # a window (a thread's newest messages, a record by id): its ids, then the records
            # from the cache or the in-memory columns (``_fetch``); SQLite reads only the rest.
            # Reading every column of 20 cached rows to find them in the cache cost twice the
            # statement itself
            sql = f"SELECT record_id FROM {_sql.source(filter)} WHERE {clause} ORDER BY seq {direction} LIMIT ? OFFSET ?"
            with self._reading() as con:
                ids = [row[0] for row in con.execute(sql, (*params, limit, offset)).fetchall()]
                if not ids:
                    return []
                found = self._fetch(con, ids)
            return [found[rid] for rid in ids]
        sql = (
            f"SELECT {_sql.RECORD_COLUMNS} FROM {_sql.source(filter)} WHERE {clause} ORDER BY seq {direction} "
            "LIMIT ? OFFSET ?"
        )
        with self._reading() as con:
            rows = con.execute(sql, (*params, -1 if limit is None else limit, offset)).fetchall()
            return self._decoded(rows, keep=len(rows) <= _RECORD_CACHE // 8)

    def _count(self, filter: RecordFilter) -> int:
        clause, params = _sql.where(filter, to_us)
        with self._reading() as con:
            return int(con.execute(f"SELECT COUNT(*) FROM records WHERE {clause}", params).fetchone()[0])

    def _links(
        self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None
    ) -> list[Link]:
        clauses: list[str] = []
        params: list[Any] = []
        if record_ids is not None:
            ids = _sql.dumps(list(record_ids))
            clauses.append(
                "(source_id IN (SELECT value FROM json_each(?)) OR target_id IN (SELECT value FROM json_each(?)))"
            )
            params.extend([ids, ids])
        if link_ids is not None:
            clauses.append("link_id IN (SELECT value FROM json_each(?))")
            params.append(_sql.dumps(list(link_ids)))
        where = " AND ".join(clauses) or "1"
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_sql.LINK_COLUMNS} FROM links WHERE {where} ORDER BY link_id", params
            ).fetchall()
        return [_sql.row_to_link(row) for row in rows]

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._reading() as con:
            rows = con.execute(
                "SELECT record_id, embedding FROM vectors WHERE record_id IN (SELECT value FROM json_each(?))",
                (_sql.dumps(list(record_ids)),),
            ).fetchall()
        return {rid: np.frombuffer(blob, dtype=np.float32).copy() for rid, blob in rows}

    def _fetch(self, con: sqlite3.Connection, record_ids: list[str]) -> dict[str, Record]:
        """The records of ``record_ids`` that exist, by id (call under the lock): cached ones
        as they are, vector-bearing ones from the in-memory columns, the rest from SQLite."""
        records = self._records
        found = {rid: rec for rid in record_ids if (rec := records.get(rid)) is not None}
        if len(found) == len(record_ids):
            return found
        cols = self._cols
        assert cols is not None
        slot_of = cols.slot_of
        held = cols.rows([slot for rid in record_ids if rid not in found and (slot := slot_of.get(rid)) is not None])
        if held:
            found.update(zip((row[0] for row in held), self._decoded(held, keep=True)))
            if len(found) == len(record_ids):
                return found
        record_ids = [rid for rid in record_ids if rid not in found]
        if len(record_ids) <= _FETCH_PARAMS:  # bound parameters: cheaper than encoding JSON for json_each
            rows = con.execute(
                f"SELECT {_sql.RECORD_COLUMNS} FROM records WHERE record_id IN ({_PLACES[len(record_ids)]})",
                record_ids,
            ).fetchall()
        else:
            rows = con.execute(
                f"SELECT {_sql.RECORD_COLUMNS} FROM records WHERE record_id IN (SELECT value FROM json_each(?))",
                (_sql.dumps(record_ids),),
            ).fetchall()
        found.update(zip((row[0] for row in rows), self._decoded(rows, keep=True)))
        return found

    # ---- vector search ------------------------------------------------------------------------
    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        query = unit(vector)
        with self._reading() as con:
            ranked = self._nearest(query, filter, k)
            if not ranked:
                return []
            cols = self._cols
            assert cols is not None
            rids = [cols.rids[slot] for slot, _ in ranked]
            records = self._fetch(con, rids)
        return [Hit(record=records[rid], distance=dist) for rid, (_, dist) in zip(rids, ranked)]

    def _nearest(self, query: np.ndarray, flt: RecordFilter, k: int) -> list[tuple[int, float]]:
        """(slot, distance) of the k nearest matching vectors: exact scan or ANN, per query."""
        cols, index = self._cols, self._index
        assert cols is not None and index is not None
        n = cols.n
        if n == 0:
            return []
        scope = self._scope(cols, flt)
        base = scope.mask
        n_base = scope.count
        if n_base == 0:
            return []
        meta = dict(flt.metadata_filter) if flt.metadata_filter else None
        n_est = n_base
        if meta is not None:  # estimate the metadata filter's selectivity from a sample
            pool = scope.slots()
            sample = pool if len(pool) <= _META_SAMPLE else self._rng.choice(pool, _META_SAMPLE, replace=False)
            rate = float(np.count_nonzero(cols.meta_ok(sample, meta))) / len(sample)
            n_est = max(1, round(n_base * max(rate, 0.5 / len(sample))))
        fetch = min(n, math.ceil(k * self._overfetch * n / n_est))
        counts = self.plan_counts
        first = True
        while True:
            if self._prefer_exact(n_base, n_base / n, fetch, meta is not None):
                counts["exact" if first else "ann_fallback"] += 1
                return self._exact(query, scope, meta, k)
            counts["ann" if first else "ann_refetch"] += 1
            first = False
            try:
                labels, dists = index.knn(query, fetch, self._ef_for(fetch))
            except RuntimeError:  # hnswlib could not gather `fetch` live elements
                counts["ann_fallback"] += 1
                return self._exact(query, scope, meta, k)
            slots = cols.label_slot[labels]
            slots = slots[slots >= 0]
            if base is not None:
                slots = slots[base[slots]]
            if meta is not None and len(slots):
                slots = slots[cols.meta_ok(slots, meta)]
            if fetch >= n:
                return cols.top_k(query, slots, k)
            if len(slots) >= k:
                ranked = cols.top_k(query, slots, k)
                # Safe unless the k-th distance ties with the edge of what was fetched: equal
                # vectors beyond the edge could then own smaller record ids.
                if ranked[-1][1] < float(dists[-1]) - _TIE_MARGIN:
                    return ranked
                fetch = min(n, fetch * 2)
                continue
            rate = len(slots) / fetch
            grown = fetch * 4 if rate == 0 else math.ceil(k * self._overfetch / rate)
            fetch = min(n, max(fetch * 2, grown))

    def _mask(self, cols: Columns, flt: RecordFilter) -> np.ndarray | None:
        """``cols.mask(flt)`` (None = every slot), memoised until the columns change (``_scope``)."""
        return self._scope(cols, flt).mask

    def _scope(self, cols: Columns, flt: RecordFilter) -> _Scope:
        """The slots matching ``flt`` but its metadata filter, memoised until the columns
        change: the context card asks several queries in one scope, and each mask is a pass
        over every slot. ``alive_at`` (callers pass now, new each time) reuses the mask of the
        rest of the scope and its own, kept while no record of the scope expires between the
        instant it was made for and the one asked (``_Alive``): a plain search no longer passes
        over every slot's expiry, nor counts or lists the scope's slots again."""
        if (flt.user_id is ANY and flt.thread_id is ANY and flt.agent_id is ANY and flt.record_ids is None
                and flt.record_types is None and flt.statuses is None and flt.alive_at is None
                and flt.expired_at is None and flt.min_seq is None and flt.max_seq is None):
            return _Scope(None, cols.n)  # no condition but (perhaps) metadata: no lookup
        stamp = (cols.uid, cols.version)
        key = _scope_key(flt)
        rest = self._masks.get(key)
        if not isinstance(rest, _Scope) or rest.stamp != stamp:
            rest = self._refreshed(cols, flt, rest, stamp)
            self._remember(key, rest)
        if flt.alive_at is None:
            return rest
        at = to_us(flt.alive_at)
        alive_key = (*key, "alive")
        kept = self._masks.get(alive_key)
        if not isinstance(kept, _Alive) or kept.base is not rest or not kept.low <= at < kept.high:
            kept = _Alive.of(rest, cols.expires, at, cols.n)
            self._remember(alive_key, kept)
        return kept.scope

    def _refreshed(self, cols: Columns, flt: RecordFilter, old: _Scope | _Alive | None, stamp: tuple[int, int]) -> _Scope:
        """``flt``'s scope (its alive_at and metadata filter aside) at the columns' version
        ``stamp``: ``old``, the same scope at an earlier version of these columns, with only the
        slots changed since then evaluated again (``Columns.changed_since``) when they are few
        (a turn adds a few messages: the card after it no longer passes over every slot); else
        a pass over every slot. Either way the mask is the one ``cols.mask`` gives now."""
        plain = dataclasses.replace(flt, alive_at=None, metadata_filter=None)
        if isinstance(old, _Scope) and old.mask is not None and old.stamp is not None and old.stamp[0] == cols.uid:
            changed = cols.changed_since(old.stamp[1])
            n = cols.n
            if changed is not None and len(changed) <= max(_PATCH_MIN, n // 16):
                mask = np.zeros(n, bool)
                keep = min(n, len(old.mask))
                mask[:keep] = old.mask[:keep]
                now = cols.mask_at(plain, changed)
                was = np.zeros(len(changed), bool)
                inside = changed < keep
                was[inside] = old.mask[changed[inside]]
                mask[changed] = now
                # the slots listed likewise: those still in scope, and those that came into it
                slots = old.slots()
                slots = slots[slots < n]
                slots = np.sort(np.concatenate([slots[mask[slots]], changed[now & ~was]]))
                mask.flags.writeable = False
                slots.flags.writeable = False
                return _Scope(mask, len(slots), slots, stamp)
        fresh, listed = cols.scope(plain)
        if listed is None:
            return _Scope.of(fresh, cols.n, stamp)
        assert fresh is not None
        fresh.flags.writeable = False
        listed.flags.writeable = False
        return _Scope(fresh, len(listed), listed, stamp)

    def _remember(self, key: tuple[Any, ...], entry: _Scope | _Alive) -> None:
        if len(self._masks) >= 32:  # drop the oldest entry (dicts keep insertion order)
            del self._masks[next(iter(self._masks))]
        self._masks[key] = entry

    def _prefer_exact(self, n_candidates: int, share: float, fetch: int, has_meta: bool) -> bool:
        """Exact scan of ``n_candidates`` vectors vs. one ANN fetch of ``fetch`` (of which a
        ``share`` passes the in-memory filter and then needs the metadata matcher)."""
        if self._exact_threshold is not None:
            return n_candidates <= self._exact_threshold
        meta_ns = _META_NS_PER_ROW if has_meta else 0.0
        exact = n_candidates * (_EXACT_NS_PER_ROW + meta_ns)
        ann = _ANN_NS_FIXED + _ANN_NS_PER_EF * self._ef_for(fetch) + fetch * share * meta_ns
        return exact <= ann

    def _ef_for(self, fetch: int) -> int:
        return max(self._ef_floor(), math.ceil(_EF_PER_FETCH * fetch))

    def _ef_floor(self) -> int:
        """``ef_search``, or by index size when unset: hnswlib (M=16) measured recall@10 0.999
        at ef 64 on 100k vectors but 0.970 on 1M, where ef 128 gives 0.996 and 256 0.999
        (shared/reference/perf_baseline.md); ef 128 at 100k cost 2× the query time of 64."""
        if self._ef_search is not None:
            return self._ef_search
        n = self._cols.n if self._cols is not None else 0
        return 64 if n <= 200_000 else 128 if n <= 1_000_000 else 256

    def _exact(self, query: np.ndarray, scope: _Scope, meta: dict[str, Any] | None, k: int) -> list[tuple[int, float]]:
        cols = self._cols
        assert cols is not None
        slots = scope.slots()
        if meta is not None and len(slots):
            slots = slots[cols.meta_ok(slots, meta)]
        return cols.top_k(query, slots, k)

    # ---- keyword search -----------------------------------------------------------------------
    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        """BM25 over the in-process postings (``_postings``), scored like the reference."""
        terms = self._analyzer.term_set(text)  # the reference's set: identical float sums
        with self._reading() as con:
            cols = self._cols
            assert cols is not None
            if not terms or cols.n == 0:
                return []
            postings = self._postings
            if postings is None or postings.stale(cols.n):
                postings = self._build_postings(con, cols)
            slots, scores = postings.score(terms, filter, cols, self._mask(cols, filter))
            if filter.metadata_filter and len(slots):
                ok = cols.meta_ok(slots, dict(filter.metadata_filter))
                slots, scores = slots[ok], scores[ok]
            if len(slots) == 0:
                return []
            if len(slots) > k:  # the k best and whatever could tie with the k-th after rounding
                bound = float(np.partition(scores, len(scores) - k)[len(scores) - k]) - 2e-6
                close = scores >= bound
                slots, scores = slots[close], scores[close]
            # tolist(): the same Python ints and floats as int() / float() of each element
            rids = cols.rids
            ranked = sorted((-round(v, 6), rids[s], v) for s, v in zip(slots.tolist(), scores.tolist()))[:k]
            records = self._fetch(con, [rid for _, rid, _ in ranked])
        return [Hit(record=records[rid], score=score) for _, rid, score in ranked]


class _Reading:
    """The context of ``HnswlibStore._reading``."""

    __slots__ = ("_store",)

    def __init__(self, store: HnswlibStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._lock.acquire()
        try:
            store._usable()
        except BaseException:
            store._lock.release()
            raise
        assert store._con is not None
        return store._con

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self._store._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise _backend_error(exc) from exc


def _scope_key(flt: RecordFilter) -> tuple[Any, ...]:
    """``flt`` but its metadata filter and ``alive_at``, as a dictionary key."""
    return (flt.record_ids, flt.record_types, flt.user_id, flt.agent_id, flt.thread_id, flt.statuses,
            flt.expired_at, flt.min_seq, flt.max_seq)


class _Scope:
    """One scope of one columns version (``stamp``: the columns' uid and version; None when not
    memoised): its mask (None = every slot; read-only), how many slots match, and which (listed
    on first use)."""

    __slots__ = ("mask", "count", "_slots", "stamp")

    def __init__(self, mask: np.ndarray | None, count: int, slots: np.ndarray | None = None,
                 stamp: tuple[int, int] | None = None) -> None:
        self.mask = mask
        self.count = count
        self._slots = slots
        self.stamp = stamp

    @classmethod
    def of(cls, mask: np.ndarray | None, n: int, stamp: tuple[int, int] | None = None) -> _Scope:
        if mask is None:
            return cls(None, n, stamp=stamp)
        mask.flags.writeable = False
        return cls(mask, int(np.count_nonzero(mask)), stamp=stamp)

    def slots(self) -> np.ndarray:
        """The matching slots, ascending (read-only)."""
        if self._slots is None:
            slots = np.arange(self.count) if self.mask is None else np.flatnonzero(self.mask)
            slots.flags.writeable = False
            self._slots = slots
        return self._slots


class _Alive:
    """A scope's records alive at instants ``low <= t < high`` (microseconds): none of its
    records expires in between, so the answer is the same for every such ``t``. ``base``: the
    scope (of one columns version) it restricts."""

    __slots__ = ("scope", "low", "high", "base")

    def __init__(self, scope: _Scope, low: float, high: float, base: _Scope) -> None:
        self.scope, self.low, self.high, self.base = scope, low, high, base

    @classmethod
    def of(cls, rest: _Scope, expires: np.ndarray, at: int, n: int) -> _Alive:
        """``rest`` restricted to the records alive at ``at`` (``expires`` > ``at``)."""
        slots = rest.slots()
        ends = expires[slots]
        alive = ends > at
        low = float(ends[~alive].max()) if not alive.all() else -math.inf
        high = float(ends[alive].min()) if alive.any() else math.inf
        if alive.all():
            return cls(rest, low, high, rest)  # nothing of the scope has expired: the same slots
        kept = slots[alive]
        mask = np.zeros(n, bool)
        mask[kept] = True
        mask.flags.writeable = False
        kept.flags.writeable = False
        return cls(_Scope(mask, len(kept), kept), low, high, rest)
