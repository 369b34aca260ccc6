"""Schema DDL of one named store, the schema-version row and migrations (pure text).

Layout (``<P>`` = ``<MEMORY_STORE_ID>_``), following the reference product's model where it fits
the SPI:

- ``<P>STORE_META``: one row, ``schema_version`` and ``embedding_dimension`` (plus timestamps),
  and the keyword analyzer's ``analyzer_language`` and ``analyzer_fingerprint``
  (``agentmemory.analysis``; version 2);
- ``<P>RECORD``: every record type in one table (the SPI's record is uniform and ``seq`` is
  store-wide, so per-type tables would turn every listing into a UNION ALL), metadata as JSON
  *text* in a CLOB checked ``IS JSON`` (version 3; see ``METADATA_TYPE``), ``md_keys`` (hashed
  filter facts, see ``mdfilter``: native ``JSON`` holding only strings), ``expires_at``, status,
  and ``index_text`` (SPI 1.1, version 4: what keyword search indexes in place of the content;
  NULL = the content);
- ``<P>RECORD_CHUNK``: the searchable part, one chunk per record that has a vector, holding the
  ``VECTOR(dim, FLOAT32)`` embedding, the text for Oracle Text (the analysed terms of the
  record's ``indexed_text``, i.e. ``index_text`` when set, else the content: stemmed, stop words
  dropped, joined by spaces) and denormalised copies of type,
  scope, seq, status, expiry and ``md_keys``, so both searches filter on this table alone (and the
  HNSW index can pre-/in-filter). Unlike the reference it has a foreign key with ON DELETE CASCADE,
  so no orphan-chunk job is needed;
- ``<P>MEMORY_LINK``: links, unique per unordered endpoint pair, cascading with their records;
- ``<P>RECORD_SEQ``: the ordered sequence behind ``seq``.

Optional objects — the HNSW vector index, the Oracle Text index and the multivalue index on
``md_keys`` — need server features (a vector pool, Oracle Text) and are created best effort: if
one fails the store still works (exact vector search, no keyword search, unindexed filters) and
says so in ``info()`` and a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentmemory.records import LinkType, RecordStatus, RecordType

from .names import StoreNames

SCHEMA_VERSION = 4
"""The schema version this package creates and reads (2: analyzer language and fingerprint in
the meta row, ``chunk_text`` holds analysed terms; 3: metadata stored as JSON text; 4: the
record's ``index_text``, SPI 1.1)."""
ANALYZER_COLUMNS = "analyzer_language VARCHAR2(64 CHAR), analyzer_fingerprint VARCHAR2(512 CHAR)"

ID_TYPE = "VARCHAR2(256 CHAR)"
"""Record and link ids (the core allows 128 characters, plus 64 for its internal prefixes)."""
SCOPE_TYPE = "VARCHAR2(128 CHAR)"
INDEX_TEXT_TYPE = "CLOB"
"""``Record.index_text`` (up to 1,000,000 characters, like the content); NULL = the content.
Validation refuses an empty or blank ``index_text``, so Oracle's '' = NULL loses nothing."""
METADATA_TYPE = "CLOB"
"""Record and link metadata: JSON text (``sql.metadata_text``), not native ``JSON``. python-oracledb
encodes a Python float bound as ``DB_TYPE_JSON`` as an Oracle NUMBER (DPY-4003 for ``1e-300``;
``1.0`` reads back as ``1``), so only text keeps every value exactly as the reference store does.
Filters never read this column (they use ``md_keys``)."""


def metadata_check(table: str) -> str:
    """The constraint keeping ``metadata`` well-formed JSON text."""
    return f"CONSTRAINT {table}_MD_CK CHECK (metadata IS JSON)"


@dataclass(frozen=True)
class IndexOptions:
    """Tuning of the optional indexes."""

    vector_index: bool = True
    hnsw_neighbors: int = 16
    hnsw_efconstruction: int = 200
    target_accuracy: int = 95
    text_index: bool = True
    metadata_index: bool = True

    def __post_init__(self) -> None:
        if not 2 <= int(self.hnsw_neighbors) <= 2048:
            raise ValueError("hnsw_neighbors must be in 2..2048")
        if not 1 <= int(self.hnsw_efconstruction) <= 65535:
            raise ValueError("hnsw_efconstruction must be in 1..65535")
        if not 1 <= int(self.target_accuracy) <= 100:
            raise ValueError("target_accuracy must be in 1..100")


@dataclass(frozen=True)
class DdlStep:
    """One CREATE statement for the schema object ``name`` (looked up in USER_OBJECTS first).

    ``feature`` names what an optional step provides; optional steps may fail without failing
    ``open``. ``domain`` marks a domain index (Oracle Text): a failed build leaves it FAILED, and
    only ``DROP INDEX … FORCE`` removes it (``drop_index``).
    """

    name: str
    sql: str
    optional: bool = False
    feature: str | None = None
    domain: bool = False


def _in(values: list[str]) -> str:
    # constants of our own enums, not caller data
    return ", ".join(f"'{v}'" for v in values)


def meta_table(names: StoreNames) -> DdlStep:
    """The schema-version table (created first, so a half-created store still knows its version)."""
    t = names.meta
    return DdlStep(
        t,
        f"CREATE TABLE {t} ("
        f"meta_id NUMBER(1) DEFAULT 1 NOT NULL, "
        f"schema_version NUMBER(10) NOT NULL, "
        f"embedding_dimension NUMBER(10) NOT NULL, "
        f"created_at TIMESTAMP(6) NOT NULL, "
        f"updated_at TIMESTAMP(6) NOT NULL, "
        f"{ANALYZER_COLUMNS}, "
        f"CONSTRAINT {t}_PK PRIMARY KEY (meta_id), "
        f"CONSTRAINT {t}_ONE_CK CHECK (meta_id = 1))",
    )


def schema_steps(names: StoreNames, dimension: int, options: IndexOptions | None = None) -> list[DdlStep]:
    """Every object after the meta table, in creation order (tables before their indexes)."""
    options = options or IndexOptions()
    dim = int(dimension)
    if dim < 1 or dim > 65535:
        raise ValueError("dimension must be in 1..65535")
    r, c, lk = names.record, names.chunk, names.link
    types = _in([t.value for t in RecordType])
    statuses = _in([s.value for s in RecordStatus])
    link_types = _in([x.value for x in LinkType])
    steps = [
        DdlStep(names.seq, f"CREATE SEQUENCE {names.seq} START WITH 1 INCREMENT BY 1 CACHE 100 ORDER NOCYCLE"),
        DdlStep(
            r,
            f"CREATE TABLE {r} ("
            f"record_id {ID_TYPE} NOT NULL, "
            f"seq NUMBER(19) NOT NULL, "
            f"record_type VARCHAR2(30) NOT NULL, "
            f"content CLOB, "
            f"user_id {SCOPE_TYPE}, agent_id {SCOPE_TYPE}, thread_id {SCOPE_TYPE}, "
            f"message_role CLOB, "
            f"record_ts TIMESTAMP(6) NOT NULL, "
            f"created_at TIMESTAMP(6) NOT NULL, "
            f"expires_at TIMESTAMP(6), "
            f"status VARCHAR2(16) DEFAULT 'valid' NOT NULL, "
            f"metadata {METADATA_TYPE} NOT NULL, "
            f"md_keys JSON NOT NULL, "
            f"index_text {INDEX_TEXT_TYPE}, "
            f"CONSTRAINT {r}_PK PRIMARY KEY (record_id), "
            f"{metadata_check(r)}, "
            f"CONSTRAINT {r}_SEQ_UK UNIQUE (seq), "
            f"CONSTRAINT {r}_TYPE_CK CHECK (record_type IN ({types})), "
            f"CONSTRAINT {r}_STATUS_CK CHECK (status IN ({statuses})))",
        ),
        DdlStep(f"{r}_THREAD_I", f"CREATE INDEX {r}_THREAD_I ON {r} (thread_id, seq)"),
        DdlStep(f"{r}_USER_I", f"CREATE INDEX {r}_USER_I ON {r} (user_id, seq)"),
        DdlStep(f"{r}_AGENT_I", f"CREATE INDEX {r}_AGENT_I ON {r} (agent_id, seq)"),
        DdlStep(f"{r}_TYPE_I", f"CREATE INDEX {r}_TYPE_I ON {r} (record_type, seq)"),
        DdlStep(f"{r}_EXPIRES_I", f"CREATE INDEX {r}_EXPIRES_I ON {r} (expires_at)"),
        DdlStep(
            c,
            f"CREATE TABLE {c} ("
            f"record_id {ID_TYPE} NOT NULL, "
            f"chunk_seq NUMBER(10) DEFAULT 1 NOT NULL, "
            f"record_type VARCHAR2(30) NOT NULL, "
            f"seq NUMBER(19) NOT NULL, "
            f"user_id {SCOPE_TYPE}, agent_id {SCOPE_TYPE}, thread_id {SCOPE_TYPE}, "
            f"status VARCHAR2(16) NOT NULL, "
            f"expires_at TIMESTAMP(6), "
            f"md_keys JSON NOT NULL, "
            f"chunk_text CLOB, "
            f"embedding VECTOR({dim}, FLOAT32) NOT NULL, "
            f"CONSTRAINT {c}_PK PRIMARY KEY (record_id, chunk_seq), "
            f"CONSTRAINT {c}_RECORD_FK FOREIGN KEY (record_id) REFERENCES {r} (record_id) ON DELETE CASCADE)",
        ),
        DdlStep(f"{c}_THREAD_I", f"CREATE INDEX {c}_THREAD_I ON {c} (thread_id)"),
        DdlStep(f"{c}_USER_I", f"CREATE INDEX {c}_USER_I ON {c} (user_id)"),
        DdlStep(f"{c}_AGENT_I", f"CREATE INDEX {c}_AGENT_I ON {c} (agent_id)"),
        DdlStep(
            lk,
            f"CREATE TABLE {lk} ("
            f"link_id {ID_TYPE} NOT NULL, "
            f"source_id {ID_TYPE} NOT NULL, "
            f"target_id {ID_TYPE} NOT NULL, "
            f"link_type VARCHAR2(30) NOT NULL, "
            f"opposite_link_type VARCHAR2(30) NOT NULL, "
            f"pair_lo {ID_TYPE} NOT NULL, "
            f"pair_hi {ID_TYPE} NOT NULL, "
            f"metadata {METADATA_TYPE} NOT NULL, "
            f"created_at TIMESTAMP(6) NOT NULL, "
            f"CONSTRAINT {lk}_PK PRIMARY KEY (link_id), "
            f"{metadata_check(lk)}, "
            f"CONSTRAINT {lk}_PAIR_UK UNIQUE (pair_lo, pair_hi), "
            f"CONSTRAINT {lk}_TYPE_CK CHECK (link_type IN ({link_types})), "
            f"CONSTRAINT {lk}_SELF_CK CHECK (source_id <> target_id), "
            f"CONSTRAINT {lk}_SOURCE_FK FOREIGN KEY (source_id) REFERENCES {r} (record_id) ON DELETE CASCADE, "
            f"CONSTRAINT {lk}_TARGET_FK FOREIGN KEY (target_id) REFERENCES {r} (record_id) ON DELETE CASCADE)",
        ),
        DdlStep(f"{lk}_SOURCE_I", f"CREATE INDEX {lk}_SOURCE_I ON {lk} (source_id)"),
        DdlStep(f"{lk}_TARGET_I", f"CREATE INDEX {lk}_TARGET_I ON {lk} (target_id)"),
    ]
    if options.vector_index:
        steps.append(
            DdlStep(
                names.vector_index,
                f"CREATE VECTOR INDEX {names.vector_index} ON {c} (embedding) "
                f"ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE COSINE "
                f"WITH TARGET ACCURACY {int(options.target_accuracy)} "
                f"PARAMETERS (TYPE HNSW, NEIGHBORS {int(options.hnsw_neighbors)}, "
                f"EFCONSTRUCTION {int(options.hnsw_efconstruction)})",
                optional=True,
                feature="vector_index",
            )
        )
    if options.text_index:
        steps.append(
            DdlStep(
                names.text_index,
                f"CREATE INDEX {names.text_index} ON {c} (chunk_text) INDEXTYPE IS CTXSYS.CONTEXT "
                f"PARAMETERS ('STOPLIST CTXSYS.EMPTY_STOPLIST SYNC (ON COMMIT)')",
                optional=True,
                feature="text_index",
                domain=True,
            )
        )
    if options.metadata_index:
        steps.append(
            DdlStep(
                names.metadata_index,
                f'CREATE MULTIVALUE INDEX {names.metadata_index} ON {r} t (t.md_keys."k".string())',
                optional=True,
                feature="metadata_index",
            )
        )
    return steps


def drop_statements(names: StoreNames) -> list[tuple[str, str]]:
    """``(object name, DROP statement)`` for every object, children first (indexes go with tables)."""
    out = [(t, f"DROP TABLE {t} CASCADE CONSTRAINTS PURGE") for t in names.tables()]
    out.append((names.seq, f"DROP SEQUENCE {names.seq}"))
    return out


def object_names(names: StoreNames, dimension: int = 1, options: IndexOptions | None = None) -> list[str]:
    """Every object name the store may own (for the USER_OBJECTS lookup)."""
    return [names.meta, *(s.name for s in schema_steps(names, dimension, options))]


# ---- migrations -------------------------------------------------------------------------------
MigrationStep = tuple[int, str]
"""``(version it upgrades from, SQL)``."""


def migrations(names: StoreNames) -> dict[int, list[str]]:
    """DDL/DML that upgrades a store from version ``v`` to ``v + 1``, keyed by ``v``.

    1 → 2 adds the analyzer columns to the meta row; ``open_plan`` then finds no fingerprint
    there and re-analyses every ``chunk_text``. 2 → 3 turns the native ``JSON`` metadata of
    records and links into JSON text (``JSON_SERIALIZE``; the numbers a version-2 store holds
    were already Oracle NUMBERs, and read back the same as before). 3 → 4 adds the record's
    ``index_text`` column (SPI 1.1), NULL for every existing record: its indexed text is its
    content, which is what its ``chunk_text`` already holds, so no chunk is rewritten.
    """
    return {
        1: [f"ALTER TABLE {names.meta} ADD ({ANALYZER_COLUMNS})"],
        2: [*_metadata_to_text(names.record), *_metadata_to_text(names.link)],
        3: [f"ALTER TABLE {names.record} ADD (index_text {INDEX_TEXT_TYPE})"],
    }


def _metadata_to_text(table: str) -> list[str]:
    return [
        f"ALTER TABLE {table} ADD (metadata_text {METADATA_TYPE})",
        f"UPDATE {table} SET metadata_text = JSON_SERIALIZE(metadata RETURNING CLOB)",
        f"ALTER TABLE {table} DROP COLUMN metadata",
        f"ALTER TABLE {table} RENAME COLUMN metadata_text TO metadata",
        f"ALTER TABLE {table} MODIFY (metadata NOT NULL)",
        f"ALTER TABLE {table} ADD {metadata_check(table)}",
    ]


def migration_plan(
    names: StoreNames, stored: int, target: int = SCHEMA_VERSION, steps: dict[int, list[str]] | None = None
) -> list[tuple[int, str]]:
    """The ordered ``(from_version, sql)`` statements taking ``stored`` to ``target``.

    Raises ``ValueError`` when a step is missing (the store cannot be upgraded by this package).
    """
    steps = migrations(names) if steps is None else steps
    plan: list[tuple[int, str]] = []
    for version in range(int(stored), int(target)):
        if version not in steps:
            raise ValueError(f"no migration from schema version {version} to {version + 1}")
        plan.extend((version, sql) for sql in steps[version])
    return plan


def select_objects(names: StoreNames, candidates: list[str]) -> tuple[str, dict[str, str]]:
    """Dictionary lookup of which ``candidates`` exist: SQL and binds (names are binds here too)."""
    binds = {f"n{i}": n for i, n in enumerate(candidates)}
    placeholders = ", ".join(f":{k}" for k in binds)
    return f"SELECT object_name, object_type FROM user_objects WHERE object_name IN ({placeholders})", binds


def select_meta(names: StoreNames) -> str:
    """Read the version row."""
    return f"SELECT schema_version, embedding_dimension FROM {names.meta} WHERE meta_id = 1"


def insert_meta(names: StoreNames) -> str:
    """Write the version row (binds: ``version``, ``dimension``, ``now``)."""
    return (
        f"INSERT INTO {names.meta} (meta_id, schema_version, embedding_dimension, created_at, updated_at) "
        f"VALUES (1, :version, :dimension, :now, :now)"
    )


def select_meta_analyzer(names: StoreNames) -> str:
    """Read the analyzer the store's ``chunk_text`` was written with (version 2 and later)."""
    return f"SELECT analyzer_language, analyzer_fingerprint FROM {names.meta} WHERE meta_id = 1"


def update_meta_analyzer(names: StoreNames) -> str:
    """Record the analyzer of ``chunk_text`` (binds: ``language``, ``fingerprint``, ``now``)."""
    return (
        f"UPDATE {names.meta} SET analyzer_language = :language, analyzer_fingerprint = :fingerprint, "
        f"updated_at = :now WHERE meta_id = 1"
    )


def update_meta_version(names: StoreNames) -> str:
    """Record a finished migration (binds: ``version``, ``now``)."""
    return f"UPDATE {names.meta} SET schema_version = :version, updated_at = :now WHERE meta_id = 1"


def sync_text_index(names: StoreNames) -> tuple[str, dict[str, str]]:
    """Bring the Oracle Text index up to date with every committed row (``settle``). The index
    is created ``SYNC (ON COMMIT)``, so this is cheap; it also covers an index a DBA recreated
    with manual or periodic sync. ``CTX_DDL.SYNC_INDEX`` commits on its own."""
    return "BEGIN CTX_DDL.SYNC_INDEX(:idx); END;", {"idx": names.text_index}


def select_indexes(names: StoreNames) -> tuple[str, dict[str, str]]:
    """The state of the optional indexes: rows ``(index_name, status, domidx_opstatus,
    domidx_status)``, NULLs read as VALID. Usable means all three VALID; see ``BROKEN_STATES``."""
    binds = {"v": names.vector_index, "t": names.text_index, "m": names.metadata_index}
    sql = (
        "SELECT index_name, status, NVL(domidx_opstatus, 'VALID'), NVL(domidx_status, 'VALID') "
        "FROM user_indexes WHERE index_name IN (:v, :t, :m)"
    )
    return sql, binds


BROKEN_STATES = frozenset({"FAILED", "UNUSABLE", "IDXTYP_INVLD"})
"""Index states that never heal on their own: a domain index whose build failed is FAILED (and
DML on its table raises ORA-29861 until it is dropped), an index a DDL invalidated is UNUSABLE."""


def drop_index(name: str, *, domain: bool) -> str:
    """``DROP INDEX`` for an optional index; ``FORCE`` (domain indexes only, ORA-29862 otherwise)
    drops a domain index even when it is FAILED or its indextype routine errors."""
    return f"DROP INDEX {name} FORCE" if domain else f"DROP INDEX {name}"
