"""The DuckDB schema of agentmemory: tables, versioned migrations, and offline extension loading.

One file holds everything:

* ``am_meta`` — key/value: schema version, vector dimension, the ``seq``/``ver`` counters
  (written by the batches that delete records; the store takes the larger of these and of the
  largest ``seq``/``ver`` the rows hold, see ``_v4``),
  which derived index tables are current (with the ``ver`` watermark each one covers), and the
  keyword analyzer's ``language`` and ``analyzer`` fingerprint (``agentmemory.analysis``);
* ``am_migrations`` — one row per applied migration;
* ``am_records`` — every record, its vector (``FLOAT[dim]``, NULL when not searchable; the
  ``has_vec`` flag says so without reading the vectors) and
  ``ver``: the value of the store-wide write clock (meta ``ver``, advanced by every added,
  patched or deleted record) when the record last changed;
* ``am_stale`` — (record id, clock) of every patch and delete of a record with a vector while
  a snapshot exists: the snapshot rows that no longer match the live ones;
* ``am_links`` — relations between records;
* derived, rebuildable snapshots: ``am_vidx_<n>`` (HNSW index over vectors) and ``am_fts_<n>``
  (BM25 index over the analysed ``terms`` of the text), each a copy of the searchable records; its largest ``ver`` is its
  watermark. They are never written after their build, so ingest never pays for index
  maintenance and a crash can never leave them half-updated.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

SCHEMA_VERSION = 4
"""The schema version this code writes; older files are migrated forward on open."""

META_TABLE = "am_meta"


def _v1(con: Any, dimension: int) -> None:
    con.execute(
        f"""
        CREATE TABLE am_records (
            rid VARCHAR PRIMARY KEY,
            rtype VARCHAR NOT NULL,
            content VARCHAR NOT NULL,
            user_id VARCHAR,
            agent_id VARCHAR,
            thread_id VARCHAR,
            role VARCHAR,
            seq BIGINT NOT NULL,
            ts VARCHAR NOT NULL,
            created VARCHAR NOT NULL,
            expires VARCHAR,
            expires_us BIGINT,
            status VARCHAR NOT NULL,
            metadata VARCHAR NOT NULL,
            ver BIGINT NOT NULL,
            has_vec BOOLEAN NOT NULL,
            vec FLOAT[{int(dimension)}]
        )
        """
    )
    con.execute(
        """
        CREATE TABLE am_links (
            link_id VARCHAR PRIMARY KEY,
            source_id VARCHAR NOT NULL,
            target_id VARCHAR NOT NULL,
            link_type VARCHAR NOT NULL,
            created VARCHAR NOT NULL,
            metadata VARCHAR NOT NULL
        )
        """
    )
    con.execute("CREATE TABLE am_stale (rid VARCHAR NOT NULL, clock BIGINT NOT NULL)")
    for key, value in (("seq", "0"), ("ver", "0")):
        con.execute(f"INSERT INTO {META_TABLE} VALUES (?, ?)", [key, value])


def _v2(con: Any, dimension: int) -> None:
    """BM25 snapshots index analysed terms (stemmed, stop words dropped), not raw content. The
    store drops a snapshot built under another analyzer fingerprint on open (a v1 file has
    none recorded); the version bump keeps older code, which would query the new snapshots
    with raw tokens, from opening the file."""


def _v3(con: Any, dimension: int) -> None:
    """SPI 1.1: ``index_text``, what keyword search indexes in place of the content (NULL = the
    content, so every existing record is indexed as before). The derived snapshots are forgotten
    (their rows lack the column; dropped on open as leftovers and rebuilt by the builder), so no
    search is answered from a snapshot that predates the column."""
    con.execute("ALTER TABLE am_records ADD COLUMN IF NOT EXISTS index_text VARCHAR")
    con.execute(
        f"DELETE FROM {META_TABLE} WHERE key IN ('fts_table', 'fts_watermark', 'fts_rows', "
        "'vidx_table', 'vidx_watermark', 'vidx_rows')"
    )


def _v4(con: Any, dimension: int) -> None:
    """The ``seq``/``ver`` counters in ``am_meta`` are written only by batches that delete
    records: every other batch leaves its last values in the rows it writes (an added row holds
    its ``seq`` and ``ver``, a patched row its new ``ver``), and the store takes the largest of the
    counters and of the rows' values on open (a delete takes away the row that held them, so it
    writes the counters). One statement fewer in every turn's transaction (~0.7 ms at 100k).
    Nothing to change in a file: its counters are exact. The version bump keeps older code,
    which reads the counters alone and would hand out a ``seq`` again, from opening it."""


MIGRATIONS: dict[int, tuple[str, Callable[[Any, int], None]]] = {
    1: ("records, links, counters", _v1),
    2: ("BM25 over analysed terms (language, analyzer fingerprint)", _v2),
    3: ("index_text beside content (SPI 1.1); snapshots rebuilt", _v3),
    4: ("seq/ver counters written by deleting batches only; the rows hold the rest", _v4),
}
"""version → (description, step). Step ``n`` turns a version ``n-1`` schema into version ``n``;
each runs inside the open transaction together with the version bump."""


def create_base(con: Any, dimension: int) -> None:
    """The version-0 skeleton every migration starts from: meta and migrations tables."""
    con.execute(f"CREATE TABLE {META_TABLE} (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    con.execute(
        "CREATE TABLE am_migrations (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
        "applied_at VARCHAR NOT NULL)"
    )
    con.execute(f"INSERT INTO {META_TABLE} VALUES ('schema_version', '0'), ('dimension', ?)", [str(dimension)])


def migrate(con: Any, current: int, dimension: int) -> None:
    """Apply every migration after ``current`` in order, recording each one."""
    for version in range(current + 1, SCHEMA_VERSION + 1):
        description, step = MIGRATIONS[version]
        step(con, dimension)
        con.execute(
            "INSERT INTO am_migrations VALUES (?, ?, ?)",
            [version, description, datetime.now(timezone.utc).isoformat()],
        )
        con.execute(f"UPDATE {META_TABLE} SET value = ? WHERE key = 'schema_version'", [str(version)])


def drop_all(con: Any) -> None:
    """Remove every agentmemory object from the file (``SchemaPolicy.RECREATE``); other tables
    in the same file are left alone."""
    for (schema,) in con.execute(
        "SELECT schema_name FROM duckdb_schemas() WHERE database_name = current_database() "
        "AND schema_name LIKE 'fts_main_am_fts_%'"
    ).fetchall():
        con.execute(f'DROP SCHEMA "{schema}" CASCADE')
    for (table,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND (table_name LIKE 'am\\_%' ESCAPE '\\')"
    ).fetchall():
        con.execute(f'DROP TABLE "{table}"')


def extension_directory() -> str | None:
    """The ``extension_directory`` the ``duckdb-ext-vss`` / ``duckdb-ext-fts`` wheels install
    into (namespace package ``duckdb_ext``), or None when they are not installed."""
    try:
        import duckdb_ext
    except ImportError:
        return None
    for base in getattr(duckdb_ext, "__path__", []):
        candidate = pathlib.Path(base) / "extensions"
        if candidate.is_dir():
            return str(candidate)
    return None
