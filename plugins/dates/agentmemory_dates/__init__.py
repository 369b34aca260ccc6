"""agentmemory-dates: an extractor that resolves relative time expressions ("yesterday",
"last Friday", "two weeks ago", "next month") against each message's timestamp and stores the
absolute dates on memories, alone or after another extractor (``extractor=[None, "dates"]``).

Import-light: the names below load dateparser only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DatesExtractor", "ResolvedDate", "find_dates"]

if TYPE_CHECKING:
    from .extractor import DatesExtractor, ResolvedDate, find_dates


def __getattr__(name: str) -> Any:
    """Import the extractor module on first use of a public name."""
    if name not in __all__:
        raise AttributeError(f"module 'agentmemory_dates' has no attribute {name!r}")
    from . import extractor

    return getattr(extractor, name)
