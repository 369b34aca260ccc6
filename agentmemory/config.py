"""Configuration models: extraction settings (with per-field resolution), retention, search."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import InvalidArgument


class MemoryExtractionMode(str, Enum):
    """Run extraction inside ``add_messages`` or on a background worker."""

    INLINE = "inline"
    BACKGROUND = "background"


class MemoryLinkExtractionMode(str, Enum):
    """How new memories get linked to existing ones."""

    DISABLED = "disabled"
    DURING_EXTRACTION = "during_extraction"
    POST_EXTRACTION = "post_extraction"


class ContextSummaryUpdateMode(str, Enum):
    """How a due summary update reaches the LLM: folded into that turn's extraction call, or as
    a call of its own (the earlier behaviour). A summary due on a turn with no extraction call
    (extraction off or not due, or a non-LLM extractor) always gets its own call."""

    DURING_EXTRACTION = "during_extraction"
    SEPARATE_CALL = "separate_call"


class TimeToLiveAnchor(str, Enum):
    """What ``ttl_days`` counts from: the write time or the record's own timestamp."""

    CREATED_AT = "created_at"
    TIMESTAMP = "timestamp"


class SearchStrategy(str, Enum):
    """Vector, keyword (BM25) or hybrid (both, fused by normalised score; the default wherever the
    store declares keyword search)."""

    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class MemoryExtractionConfig(BaseModel):
    """Extraction, summary and linking settings (SPEC §5).

    Every field defaults to None, meaning "not set at this level"; ``resolve`` applies the order
    call → thread → client → default, and ``DEFAULTS`` holds the defaults.
    ``memory_link_extraction_mode`` and ``context_summary_update_mode`` decide how many LLM calls
    a turn costs: both ``DURING_EXTRACTION`` (the defaults) make one call per ``add_messages``;
    ``SEPARATE_LLM_CALLS`` sets both back to separate calls. In ``DURING_EXTRACTION`` linking,
    ``memory_link_extraction_custom_instructions`` go into the extraction prompt, which
    ``memory_extraction_token_limit`` caps (``memory_link_extraction_token_limit`` caps the
    separate link call only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    extract_memories: bool | None = None
    enable_context_summary: bool | None = None
    memory_extraction_frequency: int | None = None
    memory_extraction_window: int | None = None
    context_summary_update_frequency: int | None = None
    memory_extraction_token_limit: int | None = None
    memory_extraction_custom_instructions: str | None = None
    memory_link_extraction_mode: MemoryLinkExtractionMode | None = None
    memory_link_extraction_custom_instructions: str | None = None
    memory_link_extraction_token_limit: int | None = None
    extraction_mode: MemoryExtractionMode | None = None
    context_summary_update_mode: ContextSummaryUpdateMode | None = None

    def set_fields(self) -> dict[str, Any]:
        """The fields given at this level, JSON-ready (enums as values)."""
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_any(cls, value: Any, argument: str = "memory_extraction_config") -> MemoryExtractionConfig:
        """Accept a config, a dict of fields, or None; raise ``InvalidArgument`` otherwise."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            try:
                return cls.model_validate(value)
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(p) for p in err["loc"])
                raise InvalidArgument(f"{argument}.{field}" if argument else field, err["msg"]) from None
        raise InvalidArgument(argument, f"must be a MemoryExtractionConfig or dict, got {type(value).__name__}")

    @classmethod
    def resolve(cls, *levels: MemoryExtractionConfig | None) -> ResolvedExtractionConfig:
        """Merge ``levels`` (highest priority first) over the defaults."""
        merged = dict(DEFAULTS)
        for level in reversed([lv for lv in levels if lv is not None]):
            merged.update({k: v for k, v in level.model_dump().items() if v is not None})
        return ResolvedExtractionConfig.model_validate(merged)


class ResolvedExtractionConfig(BaseModel):
    """A fully resolved extraction config: every field has a value."""

    model_config = ConfigDict(frozen=True)

    extract_memories: bool
    enable_context_summary: bool
    memory_extraction_frequency: int
    memory_extraction_window: int
    context_summary_update_frequency: int
    memory_extraction_token_limit: int
    memory_extraction_custom_instructions: str | None
    memory_link_extraction_mode: MemoryLinkExtractionMode
    memory_link_extraction_custom_instructions: str | None
    memory_link_extraction_token_limit: int
    extraction_mode: MemoryExtractionMode
    context_summary_update_mode: ContextSummaryUpdateMode


DEFAULTS: dict[str, Any] = {
    "extract_memories": True,
    "enable_context_summary": True,
    "memory_extraction_frequency": -1,
    "memory_extraction_window": -1,
    "context_summary_update_frequency": -1,
    "memory_extraction_token_limit": 100_000,
    "memory_extraction_custom_instructions": None,
    "memory_link_extraction_mode": MemoryLinkExtractionMode.DURING_EXTRACTION,
    "memory_link_extraction_custom_instructions": None,
    "memory_link_extraction_token_limit": 100_000,
    "extraction_mode": MemoryExtractionMode.INLINE,
    "context_summary_update_mode": ContextSummaryUpdateMode.DURING_EXTRACTION,
}
"""Defaults of every ``MemoryExtractionConfig`` field (inline extraction: results are visible
when ``add_messages`` returns; choose BACKGROUND for latency-sensitive agents). With an LLM the
defaults make one call per ``add_messages``: links and a due summary update are decided in the
extraction call. ``SEPARATE_LLM_CALLS`` restores the three calls of earlier versions."""

SEPARATE_LLM_CALLS = MemoryExtractionConfig(
    memory_link_extraction_mode=MemoryLinkExtractionMode.POST_EXTRACTION,
    context_summary_update_mode=ContextSummaryUpdateMode.SEPARATE_CALL,
)
"""The settings of earlier versions: extraction, linking and the summary update as separate LLM
calls (up to three per ``add_messages``); pass it at any level, e.g.
``AgentMemory(..., memory_extraction_config=SEPARATE_LLM_CALLS)``."""


class MemoryRetentionConfig(BaseModel):
    """Store-wide TTL rules: ``default_ttl_days`` when a write omits ``ttl_days``; every TTL is
    clamped to ``max_ttl_days``; ``ttl_anchor`` picks what TTLs count from. Days are positive
    finite numbers (None: no default / no maximum); a TTL that would end past year 9999 means
    the record never expires."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_ttl_days: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_ttl_days: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    ttl_anchor: TimeToLiveAnchor = TimeToLiveAnchor.CREATED_AT
