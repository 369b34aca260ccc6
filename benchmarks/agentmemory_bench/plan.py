"""The query plan shared by every engine and backend: which query vector is asked in which scope,
and its exact top-k (the ground truth for recall)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .data import AGENT_ID, SELECTIVITIES, VectorData, exact_topk

K = 10
UNSCOPED = "unscoped"


def cell_key(selectivity: float) -> str:
    """``scoped_0.1%`` … ``scoped_100%``."""
    pct = selectivity * 100
    text = f"{pct:.1f}" if pct < 1 else f"{pct:.0f}"
    return f"scoped_{text}%"


@dataclass
class Cell:
    """One latency/recall measurement: queries in one scope (None = unscoped)."""

    key: str
    selectivity: float
    scoped: bool
    scopes: list[str | None]
    """Per query: the user id (or ``AGENT_ID``) to scope to, None when unscoped."""
    query_rows: list[int]
    """Per query: the index into ``VectorData.queries``."""
    truth: list[np.ndarray] = field(default_factory=list)
    rows_by_scope: dict[str, np.ndarray] = field(default_factory=dict)
    actual_selectivity: float = 0.0

    def __len__(self) -> int:
        return len(self.query_rows)


@dataclass
class QueryPlan:
    """Cells for every selectivity plus the unscoped one."""

    cells: list[Cell]

    def by_key(self) -> dict[str, Cell]:
        """Cells keyed by ``Cell.key``."""
        return {c.key: c for c in self.cells}


def build_plan(data: VectorData, queries_per_cell: int, k: int = K) -> QueryPlan:
    """Assign held-out queries to cells round-robin over each tier's users; compute exact top-k."""
    nq = data.queries.shape[0]
    cells: list[Cell] = []
    offset = 0
    specs: list[tuple[str, float, bool, list[str | None]]] = [
        (cell_key(s), s, True, list(data.tiers[s])) for s in SELECTIVITIES
    ]
    specs.append((UNSCOPED, 1.0, False, [None]))
    for key, sel, scoped, users in specs:
        scopes = [users[i % len(users)] for i in range(queries_per_cell)]
        rows = [(offset + i) % nq for i in range(queries_per_cell)]
        offset += queries_per_cell
        cell = Cell(key=key, selectivity=sel, scoped=scoped, scopes=scopes, query_rows=rows)
        sizes = []
        for scope, qi in zip(scopes, rows):
            if scope is None:
                cell.truth.append(exact_topk(data.vectors, data.queries[qi], k))
                sizes.append(data.n)
                continue
            if scope not in cell.rows_by_scope:
                cell.rows_by_scope[scope] = data.rows_of(scope)
            member_rows = cell.rows_by_scope[scope]
            sizes.append(len(member_rows))
            cell.truth.append(exact_topk(data.vectors, data.queries[qi], k, member_rows if scope != AGENT_ID else None))
        cell.actual_selectivity = float(np.mean(sizes)) / data.n if sizes else 0.0
        cells.append(cell)
    return QueryPlan(cells)
