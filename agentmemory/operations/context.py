"""The explicit inputs of every operation: ``MemoryContext`` (the store and what surrounds it)
and ``ThreadScope`` (one thread handle's identity and settings).

Operations take these instead of the ``AgentMemory`` or ``Thread`` facade, so a signature shows
everything an operation may touch. The facades build them per call from their attributes, so
changing ``memory.token_counter`` or ``thread.llm`` applies to the next call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..config import MemoryExtractionConfig, MemoryRetentionConfig, ResolvedExtractionConfig
from ..embedders import Embedder
from ..plugins import PluginManager
from ..rerankers import Reranker
from ..spi import MemoryStore, RecordFilter
from ..tokens import TokenCounter
from .background import BackgroundExtraction


class Omitted:
    """Sentinel for "argument not given" where None has a meaning of its own."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = Omitted()


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class MemoryContext:
    """Everything an operation may use besides its arguments (see ``AgentMemory`` for each)."""

    store: MemoryStore
    embedder: Embedder
    llm: Any
    plugins: PluginManager
    clock: Callable[[], datetime]
    retention: MemoryRetentionConfig
    extraction_config: MemoryExtractionConfig
    """The client level of the extraction settings (below thread and call levels)."""
    rerankers: tuple[Reranker, ...]
    extractor: Any
    card_renderer: Any
    token_counter: TokenCounter
    background: BackgroundExtraction
    index_context: bool = True
    """Index messages with their role, date and previous turn (``agentmemory.index_text``)."""

    def now(self) -> datetime:
        """The current time by the injected clock."""
        return self.clock()

    def alive(self, **kwargs: Any) -> RecordFilter:
        """A filter that hides records expired by now."""
        return RecordFilter(alive_at=self.now(), **kwargs)

    def renderer(self) -> Any:
        """The configured card renderer (a registered name is built through the plugins)."""
        if isinstance(self.card_renderer, str):
            return self.plugins.load("card_renderers", self.card_renderer)()
        return self.card_renderer


@dataclass(frozen=True)
class ThreadScope:
    """One thread handle: its ids, its own LLM and live (unpersisted) settings, and the
    persisted settings as read when the handle was made."""

    thread_id: str
    user_id: str | None
    agent_id: str | None
    llm: Any
    live_overrides: MemoryExtractionConfig
    persisted_config: MemoryExtractionConfig
    card_concurrency: int

    def effective_llm(self, ctx: MemoryContext) -> Any:
        """The thread's LLM, else the client's."""
        return self.llm if self.llm is not None else ctx.llm

    def extraction_config(self, ctx: MemoryContext, call: MemoryExtractionConfig | None = None) -> ResolvedExtractionConfig:
        """Settings resolved call → live overrides → thread (persisted) → client → default."""
        return MemoryExtractionConfig.resolve(call, self.live_overrides, self.persisted_config, ctx.extraction_config)
