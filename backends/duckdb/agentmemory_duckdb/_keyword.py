"""The BM25 snapshot as in-process postings: what keyword search scores instead of SQL.

The fts extension's tables of a snapshot (``dict``, ``terms``, ``docs``, ``stats``) are read
once (when the snapshot is built, or at the first keyword search after open) into numpy arrays:

* documents in scope order ``(user_id, thread_id, rid)``, so one user's or one thread's
  documents are a contiguous range of positions (``user_range`` / ``thread_range``);
* per term, its postings (document positions, ascending, and term frequencies) in one CSR
  layout, so the postings of a scope are a slice found by binary search;
* per document the BM25 length norm ``k1 * (1 - b + b * len / avgdl)`` and the columns the
  filters read (record type, agent and thread codes, status, seq, expiry, metadata).

A query then touches only the postings of its terms inside its scope: at 100k records a
user-scoped query costs tens of microseconds here, where the SQL over the fts tables took
20 ms (README, "Keyword search"). Scores are the reference's Okapi BM25 with the same operation
order (natural-log idf, k1 = 1.2, b = 0.75), over the snapshot's corpus statistics.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from agentmemory.bm25 import idf, length_norm, term_score
from agentmemory.filters import metadata_matches
from agentmemory.records import RecordStatus, RecordType
from agentmemory.snapshot_arrays import isin_codes, pack_texts, unpack_texts
from agentmemory.spi import ANY, RecordFilter

from ._sql import ident, to_micros

_NO_EXPIRY = int(np.iinfo(np.int64).max)
FORMAT = 1
"""Version of the file ``KeywordIndex.save`` writes (a load of another format rebuilds)."""
_CODE_COLUMNS = ("agent", "thread", "rtype", "status")
_ROUND_MARGIN = 2e-6
"""Scores closer than this to the k-th one may round (6 decimals) to a tie with it."""


@dataclass
class _Codes:
    """A string column as int codes (``None`` has its own code)."""

    codes: np.ndarray
    of: dict[str | None, int]

    @classmethod
    def build(cls, values: list[Any]) -> _Codes:
        of: dict[str | None, int] = {}
        setdefault = of.setdefault
        codes = np.fromiter((setdefault(v, len(of)) for v in values), np.int32, len(values))
        return cls(codes, of)

    def equal(self, value: Any) -> np.ndarray | None:
        """Code to compare with, or None when no document holds ``value``."""
        code = self.of.get(value)
        return None if code is None else np.int32(code)  # type: ignore[return-value]


@dataclass
class DeltaDocFreq:
    """Document frequencies of the rows written since a BM25 snapshot (its ``watermark``), kept
    up to date from one write to the next by adding and removing only the rows that entered,
    changed or left the delta: a card's queries hold a hundred terms, and counting each term
    over the whole delta after every write cost milliseconds."""

    watermark: int = -1
    rows: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    """rid -> (row version, its distinct terms), as counted in ``df``."""
    df: Counter[str] = field(default_factory=Counter)

    def update(self, watermark: int, delta: Sequence[tuple[str, int, Any]], terms_of: Mapping[str, tuple[int, Counter[str], int]]) -> Counter[str]:
        """``df`` for the delta ``(rid, ver, _)`` rows, whose terms ``terms_of`` holds."""
        if watermark != self.watermark:
            self.watermark, self.rows, self.df = watermark, {}, Counter()
        current = {rid: ver for rid, ver, _ in delta}
        for rid in [rid for rid, (ver, _) in self.rows.items() if current.get(rid) != ver]:
            self.df.subtract(self.rows.pop(rid)[1])
        for rid, ver in current.items():
            if rid not in self.rows:
                terms = frozenset(terms_of[rid][1])
                self.rows[rid] = (ver, terms)
                self.df.update(terms)
        return self.df


class KeywordIndex:
    """Postings, length norms and filter columns of one fts snapshot (immutable): ``build``
    reads them from the snapshot's fts tables, ``load`` from the file ``save`` wrote beside the
    database (so a reopened store's first keyword search does not rebuild them)."""

    def __init__(self, table: str, fields: dict[str, Any]) -> None:
        self.table = table
        self.n: int = fields["n"]
        self.rids: list[str] = fields["rids"]
        self.avg_len: float = fields["avg_len"]
        self.norm: np.ndarray = fields["norm"]
        self.user_range: dict[Any, tuple[int, int]] = fields["user_range"]
        self.thread_range: dict[tuple[Any, Any], tuple[int, int]] = fields["thread_range"]
        self.agent: _Codes = fields["agent"]
        self.thread: _Codes = fields["thread"]
        self.rtype: _Codes = fields["rtype"]
        self.status: _Codes = fields["status"]
        self.seq: np.ndarray = fields["seq"]
        self.expires: np.ndarray = fields["expires"]
        self._meta: list[str | None] | np.ndarray = fields["meta"]
        """Per document its metadata JSON (None for ``{}``), or as ``save`` packed it."""
        self.docs: np.ndarray = fields["docs"]
        """Postings (document positions) per term, term by term (CSR over ``offsets``): int64
        when built, int32 when loaded."""
        self.tf: np.ndarray = fields["tf"]
        """Their term frequencies: float64 when built, uint16 (or uint32) when loaded."""
        self.offsets: np.ndarray = fields["offsets"]
        self.term_id: dict[str, int] = fields["term_id"]
        self.df: dict[str, int] = fields["df"]
        self._last: tuple[tuple[str, ...], int, int, np.ndarray | None, np.ndarray | None] | None = None
        """The last search's terms (in the order summed), its range of positions and its scores
        and hit flags over that range (``_scores``)."""

    @cached_property
    def meta(self) -> list[str | None]:
        """Per document its metadata JSON (None for ``{}``): unpacked at the first metadata
        filter (most searches have none)."""
        if isinstance(self._meta, np.ndarray):
            return [m or None for m in unpack_texts(self._meta, self.n)]
        return self._meta

    @cached_property
    def pos_of(self) -> dict[str, int]:
        """rid -> position (built at the first search that needs it: stale rows, id filters)."""
        return {rid: i for i, rid in enumerate(self.rids)}

    @classmethod
    def build(cls, con: duckdb.DuckDBPyConnection, table: str) -> KeywordIndex:
        """Read the snapshot ``table``'s fts tables into postings."""
        table = ident(table)
        fts = f"fts_main_{table}"
        docs = con.execute(
            f"SELECT d.docid, s.rid, s.user_id, s.agent_id, s.thread_id, s.rtype, s.status, s.seq, "
            f"coalesce(s.expires_us, {_NO_EXPIRY}) AS expires_us, s.metadata, d.len "
            f"FROM {fts}.docs d JOIN {table} s ON s.rid = d.name "
            "ORDER BY s.user_id NULLS FIRST, s.thread_id NULLS FIRST, s.rid"
        ).fetchnumpy()
        n = len(docs["rid"])
        docid = docs["docid"].astype(np.int64)
        pos_of_docid = np.full(int(docid.max()) + 1 if n else 1, -1, np.int64)
        pos_of_docid[docid] = np.arange(n)
        # the reference's average: total length / documents, in Python floats
        avg_len = (float(sum(int(x) for x in docs["len"])) / n if n else 1.0) or 1.0
        users: list[Any] = docs["user_id"].tolist()
        threads: list[Any] = docs["thread_id"].tolist()
        user_range: dict[Any, tuple[int, int]] = {}
        thread_range: dict[tuple[Any, Any], tuple[int, int]] = {}
        start = 0
        for i in range(1, n + 1):
            if i == n or users[i] != users[start] or threads[i] != threads[start]:
                thread_range[(users[start], threads[start])] = (start, i)
                lo = user_range.get(users[start], (start, i))[0]
                user_range[users[start]] = (lo, i)
                start = i
        # postings: (termid, position, tf) ordered by term, then position
        post = con.execute(f"SELECT termid, docid, count(*) AS tf FROM {fts}.terms GROUP BY termid, docid").fetchnumpy()
        terms = con.execute(f"SELECT termid, term, df FROM {fts}.dict").fetchnumpy()
        termid = post["termid"].astype(np.int64)
        position = pos_of_docid[post["docid"].astype(np.int64)]
        order = np.lexsort((position, termid))
        n_ids = int(terms["termid"].max()) + 1 if len(terms["termid"]) else 1
        return cls(table, {
            "n": n, "rids": docs["rid"].tolist(), "avg_len": avg_len,
            "norm": length_norm(docs["len"].astype(np.float64), avg_len),
            "user_range": user_range, "thread_range": thread_range,
            "agent": _Codes.build(docs["agent_id"].tolist()), "thread": _Codes.build(threads),
            "rtype": _Codes.build(docs["rtype"].tolist()), "status": _Codes.build(docs["status"].tolist()),
            "seq": docs["seq"].astype(np.int64), "expires": docs["expires_us"].astype(np.int64),
            "meta": [None if m == "{}" else m for m in docs["metadata"].tolist()],
            "docs": np.ascontiguousarray(position[order]), "tf": post["tf"].astype(np.float64)[order],
            "offsets": np.searchsorted(termid[order], np.arange(n_ids + 1)),
            "term_id": dict(zip(terms["term"].tolist(), terms["termid"].astype(np.int64).tolist())),
            "df": dict(zip(terms["term"].tolist(), terms["df"].astype(np.int64).tolist())),
        })

    # ---- persistence --------------------------------------------------------------------------
    def save(self, path: Path, key: str) -> None:
        """Write the postings to ``path`` atomically (a temporary file, fsynced, then renamed), as
        of ``key`` (what ``load`` must be given to accept them: the snapshot, its watermark and
        rows, the analyzer). A crash leaves the old file or the new one, never half of one."""
        terms = list(self.term_id)
        header = {
            "format": FORMAT, "key": key, "table": self.table, "n": self.n, "avg_len": self.avg_len,
            "users": [[u, lo, hi] for u, (lo, hi) in self.user_range.items()],
            "threads": [[u, t, lo, hi] for (u, t), (lo, hi) in self.thread_range.items()],
            "codes": {name: list(getattr(self, name).of) for name in _CODE_COLUMNS},
            "terms": len(terms),
        }
        arrays = {
            "header": pack_texts([json.dumps(header)]), "rids": pack_texts(self.rids),
            "meta": pack_texts(["" if m is None else m for m in self.meta]),
            "norm": self.norm, "seq": self.seq, "expires": self.expires,
            "docs": self.docs.astype(np.int32), "tf": self.tf.astype(np.uint16 if not len(self.tf) or self.tf.max() <= 65535 else np.uint32),
            "offsets": self.offsets.astype(np.int64), "terms": pack_texts(terms),
            "term_ids": np.fromiter((self.term_id[t] for t in terms), np.int64, len(terms)),
            "term_df": np.fromiter((self.df[t] for t in terms), np.int64, len(terms)),
            **{f"code_{name}": getattr(self, name).codes for name in _CODE_COLUMNS},
        }
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, allow_pickle=False, **arrays)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path, key: str) -> KeywordIndex:
        """The postings ``save`` wrote to ``path`` as of ``key``. ``FileNotFoundError`` when there
        are none; ``ValueError`` (or a zip or numpy error) when they are of another snapshot,
        format or analyzer, or not whole (every member's CRC is checked as it is read)."""
        with np.load(path, allow_pickle=False) as data:
            arrays: dict[str, np.ndarray] = {name: data[name] for name in data.files}
        header = json.loads(arrays["header"].tobytes())
        if header.get("format") != FORMAT or header.get("key") != key:
            raise ValueError("postings of another snapshot, format or analyzer")
        n, n_terms = int(header["n"]), int(header["terms"])
        rids, terms = unpack_texts(arrays["rids"], n), unpack_texts(arrays["terms"], n_terms)
        # postings stay in the file's int32 positions and uint16/uint32 frequencies: widening
        # them cost half of a cold load at 1M documents (0.29 of 0.54 s, cProfile), and the scores are the
        # same floats (the frequencies are exact in float64, where ``term_score`` computes)
        docs, tf, offsets = arrays["docs"], arrays["tf"], arrays["offsets"]
        if docs.dtype != np.int32 or tf.dtype not in (np.uint16, np.uint32):
            raise ValueError("postings arrays of another type")
        codes = {name: arrays[f"code_{name}"] for name in _CODE_COLUMNS}
        columns = (arrays["norm"], arrays["seq"], arrays["expires"], *codes.values())
        if (len(rids) != n or (n and arrays["meta"].dtype != np.uint8) or len(terms) != n_terms or any(c.shape != (n,) for c in columns)
                or tf.shape != docs.shape or arrays["term_ids"].shape != (n_terms,) or arrays["term_df"].shape != (n_terms,)):
            raise ValueError("postings arrays of inconsistent shapes")
        if len(docs) and (docs.min() < 0 or docs.max() >= n or offsets[0] != 0 or offsets[-1] != len(docs)
                          or np.any(np.diff(offsets) < 0) or arrays["term_ids"].max() >= len(offsets) - 1):
            raise ValueError("postings out of range")
        return cls(header["table"], {
            "n": n, "rids": rids, "avg_len": float(header["avg_len"]), "norm": arrays["norm"],
            "user_range": {u: (lo, hi) for u, lo, hi in header["users"]},
            "thread_range": {(u, t): (lo, hi) for u, t, lo, hi in header["threads"]},
            **{name: _Codes(codes[name], {v: i for i, v in enumerate(header["codes"][name])}) for name in _CODE_COLUMNS},
            "seq": arrays["seq"], "expires": arrays["expires"], "meta": arrays["meta"],
            "docs": docs, "tf": tf, "offsets": offsets,
            "term_id": dict(zip(terms, arrays["term_ids"].tolist())),
            "df": dict(zip(terms, arrays["term_df"].tolist())),
        })

    # ---- search -----------------------------------------------------------------------------
    def _range(self, flt: RecordFilter) -> tuple[int, int] | None:
        """The positions the scope selects (None: no document in it)."""
        if flt.user_id is ANY:
            return 0, self.n
        if flt.thread_id is ANY:
            return self.user_range.get(flt.user_id)
        return self.thread_range.get((flt.user_id, flt.thread_id))

    def _keep(self, flt: RecordFilter, pos: np.ndarray) -> np.ndarray:
        """Which of ``pos`` pass the filter's conditions other than user/thread scope (handled
        by the range, unless only the thread is given)."""
        keep = np.ones(len(pos), bool)

        def codes(column: _Codes, values: Iterable[Any]) -> None:
            wanted = [c for c in (column.of.get(v) for v in values) if c is not None]
            keep[:] &= isin_codes(column.codes[pos], wanted)

        if flt.record_ids is not None:
            wanted_pos = {p for p in (self.pos_of.get(r) for r in flt.record_ids) if p is not None}
            keep &= np.fromiter((int(p) in wanted_pos for p in pos), bool, len(pos))
        if flt.record_types is not None:
            codes(self.rtype, [RecordType(t).value for t in flt.record_types])
        if flt.user_id is ANY and flt.thread_id is not ANY:
            codes(self.thread, [flt.thread_id])
        if flt.agent_id is not ANY:
            codes(self.agent, [flt.agent_id])
        if flt.statuses is not None:
            codes(self.status, [RecordStatus(s).value for s in flt.statuses])
        if flt.alive_at is not None:
            keep &= self.expires[pos] > to_micros(flt.alive_at)
        if flt.expired_at is not None:
            keep &= self.expires[pos] <= to_micros(flt.expired_at)
        if flt.min_seq is not None:
            keep &= self.seq[pos] >= flt.min_seq
        if flt.max_seq is not None:
            keep &= self.seq[pos] < flt.max_seq
        return keep

    def search(self, terms: frozenset[str], flt: RecordFilter, k: int, stale: frozenset[str] | set[str]) -> list[tuple[str, float]]:
        """The best ``k`` ``(rid, score)`` of the snapshot's documents that pass ``flt`` and are
        not in ``stale``, by (score rounded to 6 decimals, descending; rid), plus any that tie
        with the k-th after rounding (the caller cuts after merging with the delta)."""
        span = self._range(flt)
        if span is None or self.n == 0:
            return []
        lo, hi = span
        scores, hit = self._scores(terms, lo, hi)
        if scores is None or hit is None:
            return []
        local = np.flatnonzero(hit)
        pos = local + lo
        values = scores[local]
        keep = self._keep(flt, pos) & (values > 0)
        if stale:
            dropped = {p for p in (self.pos_of.get(r) for r in stale) if p is not None}
            if dropped:
                keep &= np.fromiter((int(p) not in dropped for p in pos), bool, len(pos))
        pos, values = pos[keep], values[keep]
        if flt.metadata_filter:
            return self._ranked_with_metadata(pos, values, dict(flt.metadata_filter), k)
        return self._ranked(pos, values, k)

    def _scores(self, terms: frozenset[str], lo: int, hi: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each position's score in ``[lo, hi)`` and whether a term hit it (None, None: no term
        did). A range inside the last search's, with the same terms in the same order, is a
        slice of its scores: the card searches its question in the user's range, then in the
        thread's inside it (each score is the same sum of the same terms, so the same float)."""
        order = tuple(terms)
        last = self._last
        if last is not None and last[0] == order and last[1] <= lo and hi <= last[2]:
            base, scores, hit = last[1], last[3], last[4]
            if scores is None or hit is None:
                return None, None
            return scores[lo - base : hi - base], hit[lo - base : hi - base]
        scores = hit = None
        for term in order:  # the set's order, as the reference sums: identical floats
            tid = self.term_id.get(term)
            if tid is None:
                continue
            a, b = int(self.offsets[tid]), int(self.offsets[tid + 1])
            docs = self.docs[a:b]
            if lo > 0 or hi < self.n:
                i, j = np.searchsorted(docs, (lo, hi))
                docs = docs[i:j]
                tf = self.tf[a + i:a + j]
            else:
                tf = self.tf[a:b]
            if not len(docs):
                continue
            if scores is None or hit is None:
                scores = np.zeros(hi - lo, np.float64)
                hit = np.zeros(hi - lo, bool)
            local = docs - lo
            scores[local] += term_score(idf(self.n, self.df[term]), tf, self.norm[docs])
            hit[local] = True
        self._last = (order, lo, hi, scores, hit)
        return scores, hit

    def _ranked(self, pos: np.ndarray, values: np.ndarray, k: int) -> list[tuple[str, float]]:
        if len(values) > k:
            bound = float(np.partition(values, len(values) - k)[len(values) - k]) - _ROUND_MARGIN
            close = np.flatnonzero(values >= bound)
            pos, values = pos[close], values[close]
        rids = self.rids
        ranked = sorted((-round(float(v), 6), rids[int(p)], float(v)) for p, v in zip(pos, values))
        return [(rid, v) for _, rid, v in ranked]

    def _ranked_with_metadata(self, pos: np.ndarray, values: np.ndarray, flt: dict[str, Any], k: int) -> list[tuple[str, float]]:
        """``_ranked`` after the metadata filter (the reference matcher), tested best first until
        ``k`` documents pass, plus those tying with the k-th."""
        order = np.argsort(-values, kind="stable")
        meta = self.meta
        seen: dict[str | None, bool] = {}
        out: list[tuple[str, float]] = []
        cut: float | None = None
        for i in order:
            value = float(values[i])
            if cut is not None and value < cut:
                break
            text = meta[int(pos[i])]
            ok = seen.get(text)
            if ok is None:
                ok = seen[text] = metadata_matches(json.loads(text) if text else {}, flt)
            if ok:
                out.append((self.rids[int(pos[i])], value))
                if len(out) == k:
                    cut = value - _ROUND_MARGIN
        out.sort(key=lambda pair: (-round(pair[1], 6), pair[0]))
        return out


__all__ = ["KeywordIndex"]
