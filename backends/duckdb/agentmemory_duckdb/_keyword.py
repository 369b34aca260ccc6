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

Record ids, metadata and terms are kept as ``_Texts`` (one UTF-8 buffer and offsets, decoded
one text at a time) with a sorted view for look-ups, so the postings ``save`` wrote can be
mapped from the file as they are (``load``): a reopened store's first search decodes no id
and builds no dict of all terms or ids.
"""

from __future__ import annotations

import bisect
import json
import mmap
import os
import struct
import uuid
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from agentmemory.bm25 import idf, length_norm, term_score
from agentmemory.filters import metadata_matches
from agentmemory.records import RecordStatus, RecordType
from agentmemory.snapshot_arrays import isin_codes, pack_texts
from agentmemory.spi import ANY, RecordFilter

from ._sql import ident, to_micros

_NO_EXPIRY = int(np.iinfo(np.int64).max)
FORMAT = 2
"""Version of the file ``KeywordIndex.save`` writes (a load of another format rebuilds): 2 is
one mapped file (``_MAGIC``, a JSON header, aligned raw arrays); 1 was an ``np.savez`` zip."""
_MAGIC = b"AMKWPOST"
_PREAMBLE = struct.Struct("<8sIII")
"""Magic, format, header length and the header's CRC-32, before the JSON header."""
_ALIGN = 64
_PREFIX_BYTES = 8
_CODE_COLUMNS = ("agent", "thread", "rtype", "status")
_ROUND_MARGIN = 2e-6
"""Scores closer than this to the k-th one may round (6 decimals) to a tie with it."""


class _Codes:
    """A string column as int codes (``None`` has its own code). Loaded from a file, the values
    (``of``: value -> code) stay JSON until a filter first names one: a thread column holds one
    value per thread, and most searches filter it by range instead."""

    def __init__(self, codes: np.ndarray, of: dict[str | None, int] | None = None, packed: np.ndarray | None = None) -> None:
        self.codes, self._of, self._packed = codes, of, packed

    @classmethod
    def build(cls, values: list[Any]) -> _Codes:
        of: dict[str | None, int] = {}
        setdefault = of.setdefault
        codes = np.fromiter((setdefault(v, len(of)) for v in values), np.int32, len(values))
        return cls(codes, of)

    @property
    def of(self) -> dict[str | None, int]:
        if self._of is None:
            values = json.loads(self._packed.tobytes()) if self._packed is not None and len(self._packed) else []
            self._of = {v: i for i, v in enumerate(values)}
        return self._of

    def packed(self) -> np.ndarray:
        """The values in code order, as JSON bytes (what ``save`` writes)."""
        if self._packed is not None:
            return self._packed
        return np.frombuffer(json.dumps(list(self.of)).encode("utf-8"), np.uint8)

    def equal(self, value: Any) -> np.ndarray | None:
        """Code to compare with, or None when no document holds ``value``."""
        code = self.of.get(value)
        return None if code is None else np.int32(code)  # type: ignore[return-value]


class _Texts:
    """Texts as one UTF-8 buffer, NUL-separated (stored text never holds a NUL: ``validation``
    rejects it in ids, JSON escapes it, terms are words): text ``i`` is
    ``data[offsets[i]:offsets[i + 1] - 1]``, decoded only when asked for. With a sorted view
    (``order``: the indices in byte order, which is code point order; ``prefix``: their first 8
    bytes as a big-endian number, zero-padded) ``find`` looks texts up by binary search, so a
    mapped file needs no dict of a million ids."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray, order: np.ndarray | None = None, prefix: np.ndarray | None = None) -> None:
        self.data, self.offsets, self.order, self.prefix = data, offsets, order, prefix
        self.count = len(offsets) - 1

    @classmethod
    def pack(cls, texts: list[str], *, sorted_view: bool) -> _Texts:
        """``texts`` packed (with the sorted view when ``sorted_view``)."""
        data = pack_texts(texts)
        n = len(texts)
        offsets = np.zeros(n + 1, np.int64)
        if n:
            nul = np.flatnonzero(data == 0)
            if len(nul) != n - 1:
                raise ValueError("a text holds a NUL character")
            offsets[1:n] = nul + 1
            offsets[n] = len(data) + 1
        if not sorted_view:
            return cls(data, offsets)
        starts = offsets[:-1]
        prefix = np.empty(n, np.uint64)
        padded = np.concatenate([data, np.zeros(_PREFIX_BYTES, np.uint8)])
        step = np.arange(_PREFIX_BYTES)
        for lo in range(0, n, 1 << 16):
            at = starts[lo:lo + (1 << 16), None] + step
            grid = padded[at]
            grid[at >= offsets[lo + 1:lo + 1 + (1 << 16), None] - 1] = 0
            prefix[lo:lo + len(grid)] = grid.view(">u8").ravel()
        order = np.argsort(prefix, kind="stable")
        prefix = prefix[order]
        # texts sharing their first 8 bytes: sorted in full (ids of one pattern, long terms)
        bounds = np.concatenate([[0], np.flatnonzero(prefix[1:] != prefix[:-1]) + 1, [n]])
        sizes = np.diff(bounds)
        for a, size in zip(bounds[:-1][sizes > 1].tolist(), sizes[sizes > 1].tolist()):
            order[a:a + size] = sorted(order[a:a + size].tolist(), key=texts.__getitem__)
        return cls(data, offsets, order.astype(np.int32), prefix)

    def __len__(self) -> int:
        return self.count

    def raw(self, i: int) -> bytes:
        """Text ``i`` as UTF-8."""
        return self.data[int(self.offsets[i]):int(self.offsets[i + 1]) - 1].tobytes()

    def __getitem__(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

    def take(self, indices: np.ndarray) -> list[str]:
        """Texts ``indices``, decoded together (their offsets read in one numpy gather)."""
        if not len(indices):
            return []
        data = self.data.data
        starts, ends = self.offsets[indices].tolist(), (self.offsets[indices + 1] - 1).tolist()
        return [bytes(data[a:b]).decode("utf-8") for a, b in zip(starts, ends)]

    def all(self) -> list[str]:
        """Every text, in order (one decode)."""
        return self.data.tobytes().decode("utf-8").split("\x00") if self.count else []

    def find(self, texts: Sequence[str]) -> np.ndarray:
        """Index of each of ``texts`` (-1 when absent): the first 8 bytes by binary search over
        ``prefix``, then the whole text among those sharing them."""
        out = np.full(len(texts), -1, np.int64)
        if not self.count or not texts:
            return out
        assert self.order is not None and self.prefix is not None, "packed without a sorted view"
        order, raw = self.order, self.raw
        wanted = [t.encode("utf-8") for t in texts]
        keys = np.fromiter((int.from_bytes(w[:_PREFIX_BYTES].ljust(_PREFIX_BYTES, b"\x00"), "big") for w in wanted), np.uint64, len(wanted))
        lows = np.searchsorted(self.prefix, keys, "left").tolist()
        highs = np.searchsorted(self.prefix, keys, "right").tolist()
        for j, (a, b) in enumerate(zip(lows, highs)):
            if b - a > 1:
                a += bisect.bisect_left(range(a, b), wanted[j], key=lambda s: raw(int(order[s])))
            if a < b and raw(int(order[a])) == wanted[j]:
                out[j] = int(order[a])
        return out


class _Ranges:
    """Scope key (``_user_key``, ``_thread_key``) -> its range of positions: the keys packed with
    a sorted view, looked up by binary search and remembered, so a file with a range per thread
    is not parsed into a dict at load (at 10k threads that was 16 of 23 ms, with the garbage
    collection the JSON's objects set off)."""

    def __init__(self, keys: _Texts, lo: np.ndarray, hi: np.ndarray) -> None:
        self.keys, self.lo, self.hi = keys, lo, hi
        self._seen: dict[str, tuple[int, int] | None] = {}

    @classmethod
    def build(cls, ranges: dict[str, tuple[int, int]]) -> _Ranges:
        bounds = np.array(list(ranges.values()), np.int64).reshape(-1, 2)
        return cls(_Texts.pack(list(ranges), sorted_view=True), bounds[:, 0].copy(), bounds[:, 1].copy())

    def get(self, key: str) -> tuple[int, int] | None:
        if key not in self._seen:
            i = int(self.keys.find([key])[0])
            self._seen[key] = None if i < 0 else (int(self.lo[i]), int(self.hi[i]))
        return self._seen[key]


def _user_key(user: Any) -> str:
    """A user's key in ``KeywordIndex.user_range`` (``None`` is a scope of its own)."""
    return json.dumps(user)


def _thread_key(user: Any, thread: Any) -> str:
    """A user's thread's key in ``KeywordIndex.thread_range``."""
    return json.dumps([user, thread])


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
    reads them from the snapshot's fts tables, ``load`` maps the file ``save`` wrote beside the
    database (so a reopened store's first keyword search does not rebuild them)."""

    def __init__(self, table: str, fields: dict[str, Any]) -> None:
        self.table = table
        self.n: int = fields["n"]
        self.rids: _Texts = fields["rids"]
        """Record id per document, with a sorted view (stale rows, id filters: ``find``)."""
        self.avg_len: float = fields["avg_len"]
        self.norm: np.ndarray = fields["norm"]
        self.user_range: _Ranges = fields["user_range"]
        self.thread_range: _Ranges = fields["thread_range"]
        self.agent: _Codes = fields["agent"]
        self.thread: _Codes = fields["thread"]
        self.rtype: _Codes = fields["rtype"]
        self.status: _Codes = fields["status"]
        self.seq: np.ndarray = fields["seq"]
        self.expires: np.ndarray = fields["expires"]
        self.meta: _Texts = fields["meta"]
        """Per document its metadata JSON ("" for ``{}``), decoded at a metadata filter."""
        self.docs: np.ndarray = fields["docs"]
        """Postings (document positions) per term, term by term (CSR over ``offsets``): int64
        when built, int32 when loaded."""
        self.tf: np.ndarray = fields["tf"]
        """Their term frequencies: float64 when built, uint16 (or uint32) when loaded."""
        self.offsets: np.ndarray = fields["offsets"]
        self.terms: _Texts = fields["terms"]
        """The vocabulary, with a sorted view; ``term_ids`` and ``term_df`` in its order."""
        self.term_ids: np.ndarray = fields["term_ids"]
        self.term_df: np.ndarray = fields["term_df"]
        self.fts_stats: tuple[int, float] | None = fields.get("fts_stats")
        """The fts extension's ``num_docs`` and ``avgdl`` of the snapshot, as DuckDB computed them
        (the keyword delta's statistics start from them): kept here so a search with a delta
        after a reopen does not read them in SQL (None from a file written before they were)."""
        self._term_of: dict[str, tuple[int, int] | None] = {}
        """term -> (term id, document frequency), None when not in the snapshot: the terms
        searched so far (``_lookup``)."""
        self._stale: tuple[frozenset[str] | set[str], np.ndarray] | None = None
        """The last stale set and its documents' positions (the store memoises it per clock)."""
        self._last: tuple[tuple[str, ...], int, int, np.ndarray | None, np.ndarray | None] | None = None
        """The last search's terms (in the order summed), its range of positions and its scores
        and hit flags over that range (``_scores``)."""

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
        # read to its end (fetchall), as every statement here: a result left open holds the
        # table's checkpoint lock, and the builder then waits for the store lock while a write
        # holding it checkpoints: a deadlock (seen with fetchone in test_durability)
        ((num_docs, avgdl),) = con.execute(f"SELECT num_docs, avgdl FROM {fts}.stats").fetchall()
        # postings: (termid, position, tf) ordered by term, then position
        post = con.execute(f"SELECT termid, docid, count(*) AS tf FROM {fts}.terms GROUP BY termid, docid").fetchnumpy()
        terms = con.execute(f"SELECT termid, term, df FROM {fts}.dict").fetchnumpy()
        termid = post["termid"].astype(np.int64)
        position = pos_of_docid[post["docid"].astype(np.int64)]
        order = np.lexsort((position, termid))
        n_ids = int(terms["termid"].max()) + 1 if len(terms["termid"]) else 1
        return cls(table, {
            "n": n, "rids": _Texts.pack(docs["rid"].tolist(), sorted_view=True), "avg_len": avg_len,
            "norm": length_norm(docs["len"].astype(np.float64), avg_len),
            "user_range": _Ranges.build({_user_key(u): r for u, r in user_range.items()}),
            "thread_range": _Ranges.build({_thread_key(u, t): r for (u, t), r in thread_range.items()}),
            "agent": _Codes.build(docs["agent_id"].tolist()), "thread": _Codes.build(threads),
            "rtype": _Codes.build(docs["rtype"].tolist()), "status": _Codes.build(docs["status"].tolist()),
            "seq": docs["seq"].astype(np.int64), "expires": docs["expires_us"].astype(np.int64),
            "meta": _Texts.pack(["" if m == "{}" else m for m in docs["metadata"].tolist()], sorted_view=False),
            "docs": np.ascontiguousarray(position[order]), "tf": post["tf"].astype(np.float64)[order],
            "offsets": np.searchsorted(termid[order], np.arange(n_ids + 1)),
            "terms": _Texts.pack(terms["term"].tolist(), sorted_view=True),
            "term_ids": terms["termid"].astype(np.int64), "term_df": terms["df"].astype(np.int64),
            "fts_stats": (int(num_docs), float(avgdl)),
        })

    # ---- persistence --------------------------------------------------------------------------
    def _arrays(self) -> dict[str, np.ndarray]:
        """What ``save`` writes, in the file's types (little-endian)."""
        tf = "<u2" if not len(self.tf) or self.tf.max() <= 65535 else "<u4"
        out: dict[str, np.ndarray] = {
            "norm": self.norm.astype("<f8"), "seq": self.seq.astype("<i8"), "expires": self.expires.astype("<i8"),
            **{f"code_{name}": getattr(self, name).codes.astype("<i4") for name in _CODE_COLUMNS},
            **{f"values_{name}": getattr(self, name).packed().astype("u1") for name in _CODE_COLUMNS},
            "users.lo": self.user_range.lo.astype("<i8"), "users.hi": self.user_range.hi.astype("<i8"),
            "threads.lo": self.thread_range.lo.astype("<i8"), "threads.hi": self.thread_range.hi.astype("<i8"),
            "docs": self.docs.astype("<i4"), "tf": self.tf.astype(tf), "offsets": self.offsets.astype("<i8"),
            "term_ids": self.term_ids.astype("<i8"), "term_df": self.term_df.astype("<i8"),
        }
        for name, texts in (("rids", self.rids), ("meta", self.meta), ("terms", self.terms),
                            ("users", self.user_range.keys), ("threads", self.thread_range.keys)):
            out[f"{name}.data"], out[f"{name}.offsets"] = texts.data.astype("u1"), texts.offsets.astype("<i8")
            if texts.order is not None and texts.prefix is not None:
                out[f"{name}.order"], out[f"{name}.prefix"] = texts.order.astype("<i4"), texts.prefix.astype("<u8")
        return out

    def save(self, path: Path, key: str) -> None:
        """Write the postings to ``path`` atomically (a temporary file, fsynced, then renamed), as
        of ``key`` (what ``load`` must be given to accept them: the snapshot, its watermark and
        rows, the analyzer). A crash leaves the old file or the new one, never half of one, and
        a file is never changed in place, so a mapping of the old one stays valid.

        Layout: ``_PREAMBLE`` (magic, format, header length, header CRC-32), the JSON header
        (key, counts, the fts statistics, and each array's type, length and offset: constant
        size, whatever the corpus), then the arrays, raw, each at a 64-byte aligned offset from the
        first one: the columns and postings, the ids, metadata, terms and scope keys packed
        (``_Texts``), the scope ranges and each code column's values (JSON)."""
        arrays = self._arrays()
        layout: dict[str, list[Any]] = {}
        size = 0
        for name, array in arrays.items():
            size = -(-size // _ALIGN) * _ALIGN
            layout[name] = [array.dtype.str, len(array), size]
            size += array.nbytes
        header = json.dumps({
            "format": FORMAT, "key": key, "table": self.table, "n": self.n, "avg_len": self.avg_len,
            "users": len(self.user_range.keys), "threads": len(self.thread_range.keys), "terms": len(self.terms), "arrays": layout, "data_bytes": size, "fts_stats": self.fts_stats,
        }).encode("utf-8")
        start = _data_start(len(header))
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as fh:
                fh.write(_PREAMBLE.pack(_MAGIC, FORMAT, len(header), zlib.crc32(header)))
                fh.write(header)
                for name, array in arrays.items():
                    fh.write(b"\x00" * (start + layout[name][2] - fh.tell()))
                    fh.write(np.ascontiguousarray(array).data)
                fh.write(b"\x00" * (start + size - fh.tell()))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path, key: str) -> KeywordIndex:
        """The postings ``save`` wrote to ``path`` as of ``key``, mapped read-only (the pages are
        read as searches touch them; the mapping holds a descriptor of the file until the index
        is dropped, which POSIX lets the store delete or replace meanwhile).

        ``FileNotFoundError`` when there are none; ``ValueError`` when they are of another
        snapshot, format (a FORMAT 1 zip) or analyzer, or not whole. Checked, in time independent
        of the size: the magic and format, the header's CRC-32 and its key, the file's length
        against the header's (a truncated file), every array's type, length and extent, the
        shapes against each other, and the first and last offset of each CSR. Not checked: the
        arrays' contents byte by byte. The write is atomic (temporary file, fsync, rename), so a
        crash leaves the old file or the new one whole; only damage to the disk afterwards could
        change them (then delete the file: it is rebuilt)."""
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            preamble = fh.read(_PREAMBLE.size)
            if len(preamble) < _PREAMBLE.size:
                raise ValueError("postings file too short")
            magic, fmt, header_len, crc = _PREAMBLE.unpack(preamble)
            if magic != _MAGIC or fmt != FORMAT:
                raise ValueError(f"postings of another format (FORMAT {FORMAT} expected)")
            if header_len > size - _PREAMBLE.size:
                raise ValueError("postings file truncated in its header")
            raw_header = fh.read(header_len)
            if zlib.crc32(raw_header) != crc:
                raise ValueError("postings header damaged (CRC mismatch)")
            header = json.loads(raw_header)
            if header.get("format") != FORMAT or header.get("key") != key:
                raise ValueError("postings of another snapshot, format or analyzer")
            start = _data_start(header_len)
            if size != start + int(header["data_bytes"]):
                raise ValueError(f"postings file of {size} bytes, {start + int(header['data_bytes'])} expected (truncated?)")
            mapped = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
        try:
            return cls._from_mapped(mapped, start, header)
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"postings header incomplete: {exc!r}") from exc

    @classmethod
    def _from_mapped(cls, mapped: mmap.mmap, start: int, header: dict[str, Any]) -> KeywordIndex:
        """The index over the arrays of a mapped file (``load``), after checking their extents
        and shapes."""
        n, n_terms, data_bytes = int(header["n"]), int(header["terms"]), int(header["data_bytes"])
        n_users, n_threads = int(header["users"]), int(header["threads"])
        layout: dict[str, list[Any]] = header["arrays"]

        def array(name: str, dtypes: tuple[str, ...], length: int | None = None) -> np.ndarray:
            dtype, count, offset = layout[name]
            if dtype not in dtypes:
                raise ValueError(f"postings array {name!r} of type {dtype}, not {' or '.join(dtypes)}")
            if length is not None and count != length:
                raise ValueError(f"postings array {name!r} of {count} items, {length} expected")
            if offset % _ALIGN or offset < 0 or count < 0 or offset + count * np.dtype(dtype).itemsize > data_bytes:
                raise ValueError(f"postings array {name!r} outside the file")
            return np.frombuffer(mapped, np.dtype(dtype), count, start + offset)

        def texts(name: str, count: int, sorted_view: bool) -> _Texts:
            data = array(f"{name}.data", ("|u1",))
            offsets = array(f"{name}.offsets", ("<i8",), count + 1)
            if offsets[0] != 0 or offsets[-1] != len(data) + (1 if count else 0):
                raise ValueError(f"postings texts {name!r} inconsistent with their offsets")
            if not sorted_view:
                return _Texts(data, offsets)
            return _Texts(data, offsets, array(f"{name}.order", ("<i4",), count), array(f"{name}.prefix", ("<u8",), count))

        docs = array("docs", ("<i4",))
        tf = array("tf", ("<u2", "<u4"), len(docs))
        offsets = array("offsets", ("<i8",))
        if not len(offsets) or offsets[0] != 0 or offsets[-1] != len(docs):
            raise ValueError("postings inconsistent with their offsets")
        codes = {name: array(f"code_{name}", ("<i4",), n) for name in _CODE_COLUMNS}
        return cls(header["table"], {
            "n": n, "rids": texts("rids", n, True), "avg_len": float(header["avg_len"]),
            "norm": array("norm", ("<f8",), n),
            "user_range": _Ranges(texts("users", n_users, True), array("users.lo", ("<i8",), n_users), array("users.hi", ("<i8",), n_users)),
            "thread_range": _Ranges(
                texts("threads", n_threads, True), array("threads.lo", ("<i8",), n_threads), array("threads.hi", ("<i8",), n_threads)
            ),
            **{name: _Codes(codes[name], packed=array(f"values_{name}", ("|u1",))) for name in _CODE_COLUMNS},
            "seq": array("seq", ("<i8",), n), "expires": array("expires", ("<i8",), n), "meta": texts("meta", n, False),
            "docs": docs, "tf": tf, "offsets": offsets,
            "terms": texts("terms", n_terms, True),
            "term_ids": array("term_ids", ("<i8",), n_terms), "term_df": array("term_df", ("<i8",), n_terms),
            "fts_stats": None if header.get("fts_stats") is None else (int(header["fts_stats"][0]), float(header["fts_stats"][1])),
        })

    # ---- look-ups ---------------------------------------------------------------------------
    def _lookup(self, terms: Iterable[str]) -> list[tuple[int, int] | None]:
        """(term id, document frequency) of each of ``terms``, None for a term not in the
        snapshot; the unseen ones are looked up together."""
        terms = list(terms)
        known = self._term_of
        unseen = [t for t in dict.fromkeys(terms) if t not in known]
        if unseen:
            for term, i in zip(unseen, self.terms.find(unseen).tolist()):
                known[term] = None if i < 0 else (int(self.term_ids[i]), int(self.term_df[i]))
        return [known[t] for t in terms]

    def doc_freqs(self, terms: Iterable[str]) -> dict[str, int]:
        """The snapshot's document frequency of each of ``terms`` it holds."""
        terms = list(terms)
        return {t: found[1] for t, found in zip(terms, self._lookup(terms)) if found is not None}

    def _stale_positions(self, rids: frozenset[str] | set[str]) -> np.ndarray:
        """The positions of the documents of the stale ``rids`` (those in the snapshot),
        remembered for the next search (the store memoises the set per write clock)."""
        stale = self._stale
        if stale is not None and (stale[0] is rids or stale[0] == rids):
            return stale[1]
        found = self.rids.find(list(rids))
        out = np.sort(found[found >= 0])
        self._stale = (rids, out)
        return out

    # ---- search -----------------------------------------------------------------------------
    def _range(self, flt: RecordFilter) -> tuple[int, int] | None:
        """The positions the scope selects (None: no document in it)."""
        if flt.user_id is ANY:
            return 0, self.n
        if flt.thread_id is ANY:
            return self.user_range.get(_user_key(flt.user_id))
        return self.thread_range.get(_thread_key(flt.user_id, flt.thread_id))

    def _keep(self, flt: RecordFilter, pos: np.ndarray) -> np.ndarray:
        """Which of ``pos`` pass the filter's conditions other than user/thread scope (handled
        by the range, unless only the thread is given)."""
        keep = np.ones(len(pos), bool)

        def codes(column: _Codes, values: Iterable[Any]) -> None:
            wanted = [c for c in (column.of.get(v) for v in values) if c is not None]
            keep[:] &= isin_codes(column.codes[pos], wanted)

        if flt.record_ids is not None:
            wanted = self.rids.find(list(flt.record_ids))
            keep &= np.isin(pos, wanted[wanted >= 0])
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
            dropped = self._stale_positions(stale)
            if len(dropped):
                keep &= ~np.isin(pos, dropped)
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
        for found in self._lookup(order):  # the set's order, as the reference sums: identical floats
            if found is None:
                continue
            tid, df = found
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
            scores[local] += term_score(idf(self.n, df), tf, self.norm[docs])
            hit[local] = True
        self._last = (order, lo, hi, scores, hit)
        return scores, hit

    def _ranked(self, pos: np.ndarray, values: np.ndarray, k: int) -> list[tuple[str, float]]:
        if len(values) > k:
            bound = float(np.partition(values, len(values) - k)[len(values) - k]) - _ROUND_MARGIN
            close = np.flatnonzero(values >= bound)
            pos, values = pos[close], values[close]
        ranked = sorted((-round(v, 6), rid, v) for rid, v in zip(self.rids.take(pos), values.tolist()))
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
            text = meta[int(pos[i])] or None
            ok = seen.get(text)
            if ok is None:
                ok = seen[text] = metadata_matches(json.loads(text) if text else {}, flt)
            if ok:
                out.append((self.rids[int(pos[i])], value))
                if len(out) == k:
                    cut = value - _ROUND_MARGIN
        out.sort(key=lambda pair: (-round(pair[1], 6), pair[0]))
        return out


def _data_start(header_len: int) -> int:
    """Where a file's arrays begin: after the preamble and header, aligned."""
    return -(-(_PREAMBLE.size + header_len) // _ALIGN) * _ALIGN


__all__ = ["KeywordIndex"]
