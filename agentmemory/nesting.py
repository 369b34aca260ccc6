"""How deep metadata and metadata filters may nest, and the one measure of nesting.

Shared by ``validation`` (metadata) and ``filters`` (metadata filters); both re-use it, and
``validation`` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_METADATA_DEPTH = 64
"""Deepest nesting of objects and arrays in metadata: the metadata object itself is level 1,
so ``{"a": {"b": [1]}}`` is 3 levels deep. Deeper metadata is ``InvalidArgument``."""
MAX_FILTER_DEPTH = 2 * MAX_METADATA_DEPTH
"""Deepest nesting of a metadata filter (its objects, operators and arrays): room to reach the
deepest metadata through ``$not`` and array operators."""


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests mappings, lists and tuples more than ``limit`` levels (``value``
    itself is level 1). Iterative, so any depth is measured without a ``RecursionError``; a
    cyclic value counts as too deep."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        for item in node.values() if isinstance(node, Mapping) else node:
            if isinstance(item, (Mapping, list, tuple)):
                stack.append((item, depth + 1))
    return False
