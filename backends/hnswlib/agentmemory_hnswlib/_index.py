"""The hnswlib index (growth, deletion, search) and its snapshots.

Labels are SQLite ``vectors.label`` values (AUTOINCREMENT, never reused), so a label names one
vector forever. A snapshot is a *generation* of four files written after the fact and published
by atomically replacing a small manifest: the index, its live labels and the in-memory columns
(their unit vectors are read back from SQLite), plus the store transaction number they reflect. A crash mid-save leaves the
previous generation in force. Opening loads the newest generation and catches up with the records
committed after it (see ``HnswlibStore._load_state``).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from ._columns import Columns

log = logging.getLogger(__name__)

MANIFEST = "hnsw.manifest.json"
FORMAT = 2
_PARTS = {"index": "bin", "labels": "labels.npy", "columns": "cols.npz"}
"""The files of a generation. Generations written by earlier versions also had ``vectors`` (the unit
vectors in slot order, ``vectors.npy``); they still load, from that file. Newer ones read the
vectors from SQLite's ``vectors`` table by label (labels are never reused, so a label's row
holds exactly the vector the snapshot had)."""


@dataclass
class ReconcileReport:
    """What opening had to do to match the record store.

    ``source``: ``snapshot`` (columns and index loaded, then caught up with later commits),
    ``records`` (columns read from SQLite, index snapshot reconciled by label sets) or
    ``rebuild`` (no usable index snapshot: built from the records).
    """

    loaded_generation: int | None
    rebuilt: bool
    added: int
    deleted: int
    source: str = "snapshot"


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class VectorIndex:
    """An hnswlib cosine index whose live labels mirror the ``vectors`` rows."""

    def __init__(self, dimension: int, *, M: int, ef_construction: int, num_threads: int) -> None:
        self.dim = dimension
        self.M = M
        self.ef_construction = ef_construction
        self.num_threads = num_threads
        self.index: Any = self._new(0)
        self.unsaved = 0
        self._deleted = 0
        self._ef = -1

    def _new(self, capacity: int) -> Any:
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(
            max_elements=max(1024, capacity), M=self.M, ef_construction=self.ef_construction,
            allow_replace_deleted=True,
        )
        self._ef = -1
        return index

    def load(self, path: Path, live: int) -> None:
        """Replace the graph by the saved one at ``path`` holding ``live`` undeleted elements."""
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.load_index(str(path), max_elements=0, allow_replace_deleted=True)
        if int(index.element_count) < live:
            raise ValueError("index holds fewer elements than its label list")
        self.index = index
        self._deleted = int(index.element_count) - live
        self._ef = -1

    def rebuild(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """A fresh graph holding exactly ``labels`` (drops every tombstone)."""
        self.index = self._new(int(len(labels) * 1.25))
        self._deleted = 0
        if len(labels):
            self.index.add_items(vectors, labels, num_threads=self.num_threads)
        self.unsaved += len(labels)

    @property
    def deleted(self) -> int:
        """Tombstones in the graph (marked deleted, not yet reused)."""
        return self._deleted

    @property
    def element_count(self) -> int:
        """Elements in the graph, tombstones included."""
        return int(self.index.element_count)

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """Insert ``vectors`` under new ``labels``, reusing deleted slots and growing as needed."""
        count = len(labels)
        if not count:
            return
        index = self.index
        reuse = min(self._deleted, count)
        need = int(index.element_count) + count - reuse
        cap = int(index.max_elements)
        if need > cap:
            index.resize_index(max(need, cap * 2))
        index.add_items(vectors, labels, num_threads=self.num_threads, replace_deleted=True)
        self._deleted -= reuse
        self.unsaved += count

    def delete(self, labels: list[int]) -> None:
        """Mark ``labels`` deleted (their slots are reused by later inserts)."""
        for label in labels:
            self.index.mark_deleted(int(label))
        self._deleted += len(labels)
        self.unsaved += len(labels)

    def knn(self, query: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        """Labels and distances of the (approximate) ``k`` nearest live elements, best first."""
        if ef != self._ef:
            self.index.set_ef(ef)
            self._ef = ef
        labels, distances = self.index.knn_query(query, k=k, num_threads=1)
        return labels[0].astype(np.int64, copy=False), distances[0]


class Snapshots:
    """The generations of snapshot files in a store directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.generation = 0

    def manifest(self, store_uid: str, dimension: int) -> dict[str, Any] | None:
        """The current manifest if it belongs to this store and dimension, else None."""
        path = self.directory / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("unreadable %s (%s); ignoring the snapshot", path, exc)
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            log.warning("snapshot manifest %s has an unknown format; ignoring it", path)
            return None
        self.generation = max(self.generation, int(data.get("generation", 0)))
        if data.get("store_uid") != store_uid or data.get("dimension") != dimension:
            log.warning("snapshot in %s belongs to another store or dimension; ignoring it", self.directory)
            return None
        return data

    def path(self, manifest: dict[str, Any], part: str) -> Path:
        """The file of ``part`` (index, labels, columns; vectors in older generations) in
        ``manifest``'s generation."""
        return self.directory / str(manifest["files"][part])

    def load_labels(self, manifest: dict[str, Any]) -> np.ndarray:
        """The live labels of the snapshot's index."""
        return np.load(self.path(manifest, "labels"), allow_pickle=False).astype(np.int64, copy=False)

    def load_columns(self, manifest: dict[str, Any], dimension: int) -> tuple[Columns, bool]:
        """The in-memory columns as they were at the snapshot, and whether their vectors came
        with them (an older generation's ``vectors.npy``); if not, the caller fills
        ``vectors[:n]`` (from SQLite, by label)."""
        with np.load(self.path(manifest, "columns"), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        if "vectors" not in manifest["files"]:
            return Columns.from_snapshot(dimension, arrays, None), False
        vectors = np.load(self.path(manifest, "vectors"), mmap_mode="r", allow_pickle=False)
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != dimension:
            raise ValueError(f"snapshot vectors have shape {vectors.shape} and type {vectors.dtype}")
        return Columns.from_snapshot(dimension, arrays, vectors), True

    def save(self, store_uid: str, txn: int, index: VectorIndex, columns: Columns) -> None:
        """Write generation g+1 (fsynced) and publish it by replacing the manifest atomically."""
        gen = self.generation + 1
        names = {part: f"hnsw.{gen}.{suffix}" for part, suffix in _PARTS.items()}
        paths = {part: self.directory / name for part, name in names.items()}
        index.index.save_index(str(paths["index"]))
        _fsync_file(paths["index"])
        n = columns.n
        with open(paths["labels"], "wb") as fh:
            np.save(fh, np.ascontiguousarray(columns.labels[:n]), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        with open(paths["columns"], "wb") as fh:
            np.savez(fh, allow_pickle=False, **columns.snapshot_arrays())
            fh.flush()
            os.fsync(fh.fileno())
        manifest = {
            "format": FORMAT, "generation": gen, "store_uid": store_uid, "dimension": columns.dim,
            "space": "cosine", "txn": txn, "live": n, "files": names,
        }
        tmp = self.directory / f"{MANIFEST}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.directory / MANIFEST)
        _fsync_dir(self.directory)
        self.generation = gen
        index.unsaved = 0
        self.remove_orphans(keep=gen)

    def remove_orphans(self, keep: int | None) -> None:
        """Delete snapshot files of other generations and stray temp files. With ``keep`` None,
        only temp files go (the manifest's generation is not known yet)."""
        for path in self.directory.glob("hnsw.*"):
            name = path.name
            if name == MANIFEST:
                continue
            if name.endswith(".tmp"):
                path.unlink(missing_ok=True)
                continue
            if keep is None:
                continue
            parts = name.split(".")
            if len(parts) >= 3 and parts[1].isdigit() and int(parts[1]) != keep:
                path.unlink(missing_ok=True)

    @staticmethod
    def remove_all(directory: Path) -> None:
        """Delete every snapshot file (RECREATE, dimension change)."""
        for path in directory.glob("hnsw.*"):
            path.unlink(missing_ok=True)
