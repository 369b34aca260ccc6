"""``BoundedMemo``: results of a pure function by key, for the card's hot path.

The card and the stores ask the same small questions again within a card and from one card to
the next (a text normalised, a message's sentences, a query's terms, a filter's SQL). A plain
dict answers them fastest; this one holds at most ``size`` entries and is emptied in one step
when full (safe beside another thread: an entry is either there or recomputed), and callers
leave out inputs too large to keep (whole documents)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """At most ``size`` remembered results; ``get`` is the dict's own (bound once, no call
    overhead on the hot path), ``keep`` stores one, emptying the memo first when it is full."""

    __slots__ = ("_kept", "_size", "get")

    def __init__(self, size: int) -> None:
        self._kept: dict[K, V] = {}
        self._size = size
        self.get = self._kept.get

    def keep(self, key: K, value: V) -> V:
        """Remember ``value`` for ``key``; returns ``value``."""
        if len(self._kept) >= self._size:
            self._kept.clear()
        self._kept[key] = value
        return value

    def clear(self) -> None:
        """Forget everything."""
        self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)
