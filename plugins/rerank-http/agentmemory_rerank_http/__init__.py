"""agentmemory-rerank-http: rerank search results with any server speaking the rerank HTTP
protocol (``POST /rerank``: a query and documents in, scored document indices out).

Import-light: the entry point (``agentmemory_rerank_http.plugin``) registers the reranker by
dotted path, and the names below load httpx only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DIALECTS", "Dialect", "HttpReranker", "RerankError", "RerankUnavailable"]

if TYPE_CHECKING:
    from .reranker import DIALECTS, Dialect, HttpReranker, RerankError, RerankUnavailable


def __getattr__(name: str) -> Any:
    """Import the reranker module on first use of a public name."""
    if name not in __all__:
        raise AttributeError(f"module 'agentmemory_rerank_http' has no attribute {name!r}")
    from . import reranker

    return getattr(reranker, name)
