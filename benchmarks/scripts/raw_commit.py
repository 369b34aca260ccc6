"""One raw DuckDB inserting commit, as the #31 turn benchmarks compare ``add_messages`` with
(``add_messages_commits.py``, ``turn_calls.py``): the rows through Arrow, or as one
``INSERT … VALUES`` of SQL literals. Plain duckdb, no agentmemory code, so both checkouts of an
old/new comparison are measured against the same baseline."""

from __future__ import annotations

from typing import Any


def literal(value: Any) -> str:
    """``value`` as a DuckDB SQL literal (a list is the record's vector, as the store writes it)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "'[" + ",".join(map(repr, value)) + f"]'::FLOAT[{len(value)}]"
    return "'" + str(value).replace("'", "''") + "'"


def raw_insert(con: Any, table: Any, way: str) -> None:
    """Commit ``table``'s rows into ``am_records`` in one transaction, ``way`` ``arrow`` or ``values``."""
    con.execute("BEGIN")
    if way == "arrow":
        con.register("raw_rows", table)
        con.execute("INSERT INTO am_records SELECT * FROM raw_rows")
        con.unregister("raw_rows")
    else:
        names = table.column_names
        values = ", ".join("(" + ", ".join(literal(row[c]) for c in names) + ")" for row in table.to_pylist())
        con.execute(f"INSERT INTO am_records ({', '.join(names)}) VALUES {values}")
    con.execute("COMMIT")
