"""agentmemory-hnswlib: a local store with an hnswlib ANN index beside a SQLite record store.

``HnswlibStore`` is imported lazily so that importing the package (e.g. by the plugin entry
point) stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import HnswlibStore

__all__ = ["HnswlibStore"]


def __getattr__(name: str) -> Any:
    if name == "HnswlibStore":
        from .store import HnswlibStore

        return HnswlibStore
    raise AttributeError(name)
