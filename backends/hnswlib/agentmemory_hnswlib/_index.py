"""The hnswlib index: growth, deletion, atomic snapshots and reconciliation with the records.

Labels are SQLite ``vectors.label`` values (AUTOINCREMENT, never reused), so a label names one
vector forever. A snapshot is a generation of two files, the index and the labels live in it,
published by atomically replacing a small manifest; a crash mid-save leaves the previous
generation in force. On open the snapshot is reconciled with the record store: vectors missing
from it are added, vectors it holds that the store no longer has are marked deleted.
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

log = logging.getLogger(__name__)

MANIFEST = "hnsw.manifest.json"
FORMAT = 1


@dataclass
class ReconcileReport:
    """What opening the index had to do to match the record store."""

    loaded_generation: int | None
    rebuilt: bool
    added: int
    deleted: int


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
    """An hnswlib cosine index whose labels mirror the live ``vectors`` rows."""

    def __init__(
        self, directory: Path, dimension: int, *, M: int, ef_construction: int, num_threads: int
    ) -> None:
        self.directory = directory
        self.dim = dimension
        self.M = M
        self.ef_construction = ef_construction
        self.num_threads = num_threads
        self.index: Any = None
        self.generation = 0
        self.unsaved = 0
        self._deleted = 0
        self._ef = -1

    # ---- lifecycle ----------------------------------------------------------------------
    def _new(self, capacity: int) -> Any:
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.init_index(
            max_elements=max(1024, capacity),
            M=self.M,
            ef_construction=self.ef_construction,
            allow_replace_deleted=True,
        )
        self._ef = -1
        return index

    def open(self, store_uid: str, labels: np.ndarray, vectors: np.ndarray) -> ReconcileReport:
        """Load the newest snapshot and reconcile it with the live ``labels``/``vectors`` (the
        record store's truth); rebuild from them when there is no usable snapshot."""
        self._remove_orphans(keep=None)
        manifest = self._read_manifest()
        if manifest is not None and manifest.get("store_uid") == store_uid and manifest.get("dimension") == self.dim:
            try:
                report = self._load_and_reconcile(manifest, labels, vectors)
                self._remove_orphans(keep=self.generation)
                return report
            except Exception as exc:  # noqa: BLE001 - any damage means: rebuild from the truth
                log.warning("hnswlib snapshot %s unusable (%s); rebuilding from records", manifest, exc)
        elif manifest is not None:
            log.warning("hnswlib snapshot belongs to another store or dimension; rebuilding")
        self.rebuild(labels, vectors)
        self.generation = int(manifest.get("generation", 0)) if manifest else 0
        self.unsaved = len(labels)  # a rebuilt, non-empty index is persisted at once
        return ReconcileReport(None, True, len(labels), 0)

    def _load_and_reconcile(
        self, manifest: dict[str, Any], labels: np.ndarray, vectors: np.ndarray
    ) -> ReconcileReport:
        gen = int(manifest["generation"])
        index_path = self.directory / manifest["index"]
        labels_path = self.directory / manifest["labels"]
        snap = np.load(labels_path, allow_pickle=False).astype(np.int64, copy=False)
        index = hnswlib.Index(space="cosine", dim=self.dim)
        index.load_index(str(index_path), max_elements=0, allow_replace_deleted=True)
        if index.element_count < len(snap):
            raise ValueError("index holds fewer elements than its label list")
        self.index = index
        self._ef = -1
        self._deleted = int(index.element_count) - len(snap)
        to_delete = np.setdiff1d(snap, labels, assume_unique=True)
        add_mask = ~np.isin(labels, snap, assume_unique=True)
        self.delete([int(x) for x in to_delete])
        added = int(add_mask.sum())
        if added:
            self.add(labels[add_mask], vectors[add_mask])
        self.generation = gen
        self.unsaved = len(to_delete) + added
        return ReconcileReport(gen, False, added, len(to_delete))

    def rebuild(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        """A fresh index holding exactly ``labels`` (drops every tombstone)."""
        self.index = self._new(int(len(labels) * 1.25))
        self._deleted = 0
        if len(labels):
            self.index.add_items(vectors, labels, num_threads=self.num_threads)
        self.unsaved += len(labels)

    def close(self) -> None:
        """Forget the in-memory index (the caller saves first when it wants to)."""
        self.index = None

    # ---- updates --------------------------------------------------------------------------
    @property
    def live(self) -> int:
        """Elements that are not marked deleted."""
        return int(self.index.element_count) - self.deleted

    @property
    def deleted(self) -> int:
        """Tombstones in the graph (marked deleted, not yet reused)."""
        return self._deleted

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

    # ---- snapshots --------------------------------------------------------------------------
    def _read_manifest(self) -> dict[str, Any] | None:
        path = self.directory / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("unreadable %s (%s); rebuilding the index", path, exc)
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        return data

    def save(self, store_uid: str, labels: np.ndarray) -> None:
        """Write a new snapshot generation (index + live labels) and publish it atomically."""
        gen = self.generation + 1
        index_name, labels_name = f"hnsw.{gen}.bin", f"hnsw.{gen}.labels.npy"
        index_path, labels_path = self.directory / index_name, self.directory / labels_name
        self.index.save_index(str(index_path))
        _fsync_file(index_path)
        with open(labels_path, "wb") as fh:
            np.save(fh, np.ascontiguousarray(labels, dtype=np.int64), allow_pickle=False)
            fh.flush()
            os.fsync(fh.fileno())
        manifest = {
            "format": FORMAT,
            "generation": gen,
            "store_uid": store_uid,
            "dimension": self.dim,
            "space": "cosine",
            "index": index_name,
            "labels": labels_name,
            "live": int(len(labels)),
        }
        tmp = self.directory / f"{MANIFEST}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.directory / MANIFEST)
        _fsync_dir(self.directory)
        self.generation = gen
        self.unsaved = 0
        self._remove_orphans(keep=gen)

    def _remove_orphans(self, keep: int | None) -> None:
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
    def remove_files(directory: Path) -> None:
        """Delete every snapshot file (RECREATE, dimension change)."""
        for path in directory.glob("hnsw.*"):
            path.unlink(missing_ok=True)
