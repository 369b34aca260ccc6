#!/usr/bin/env python3
"""Deliberately broken stores that remember what was deleted, and whether
``ForgettingTests.test_deleted_text_is_forgotten_by_every_read_path`` catches each:

    .venv/bin/python conformance_tests/mutation/forgetting_mutants.py

Each is the reference ``InMemoryStore`` with one way of forgetting badly. Prints, per store, the
outcome and the read paths the test found still holding the deleted text; exits 1 when a broken
store passes or the reference fails.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from agentmemory.reference_store import InMemoryStore
from agentmemory.store_types import UNSET, WriteBatch

TEST = "test_deleted_text_is_forgotten_by_every_read_path"


class DropsIndexTextPatchesOfDeletes(InMemoryStore):
    """Applies a delete's batch without its ``index_text`` patches: the next turn keeps quoting
    the deleted message (keyword index, vector, stored record, export)."""

    def _write(self, batch: WriteBatch) -> Any:
        if batch.delete and batch.patch:
            batch = replace(batch, patch=[p for p in batch.patch if p.index_text is UNSET])
        return super()._write(batch)


class KeepsLinksOfDeletedRecords(InMemoryStore):
    """Deletes records but not the links touching them (a link table without a cascade)."""

    def _write(self, batch: WriteBatch) -> Any:
        saved = dict(self._link_rows)
        out = super()._write(batch)
        if batch.delete:
            self._link_rows.update({k: v for k, v in saved.items() if k not in set(batch.delete_links)})
        return out


class VectorIndexWithoutTombstones(InMemoryStore):
    """A vector index that is not told about deletes: deleted records keep coming back from
    vector search (rows and ``query`` are right)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ghosts: dict[str, Any] = {}

    def _write(self, batch: WriteBatch) -> Any:
        for rid in batch.delete:
            if rid in self._records and rid in self._vectors:
                self._ghosts[rid] = (self._records[rid], self._vectors[rid])
        return super()._write(batch)

    def _vector_search(self, vector: Any, flt: Any, k: int) -> Any:
        from agentmemory.store_types import Hit

        hits = list(super()._vector_search(vector, flt, k))
        for rec, _ in self._ghosts.values():
            hits.append(Hit(record=rec, distance=0.5))
        return hits[:k]


MUTANTS = (DropsIndexTextPatchesOfDeletes, KeepsLinksOfDeletedRecords, VectorIndexWithoutTombstones)


def main() -> int:
    from agentmemory_conformance import validate

    bad = 0
    for cls in (InMemoryStore, *MUTANTS):
        report = validate(lambda _path, cls=cls: cls(), profile="smoke", pytest_args=["-k", TEST])
        totals = report.data.get("totals", {})
        caught = totals.get("failed", 0) > 0
        expected = cls is not InMemoryStore
        print(f"{cls.__name__}: {'caught' if caught else 'passed'} {totals}")
        for failure in report.failures[:1]:
            print("   ", failure["detail"][:900].replace("\n", "\n    "))
        bad += caught != expected
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
