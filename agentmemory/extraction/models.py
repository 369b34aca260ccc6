"""What extractors see and return, and the JSON schemas the LLM answers against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from ..records import Record
from ..tokens import EstimateCounter, TokenCounter

MemoryKind = Literal["memory", "fact", "guideline", "preference"]
LinkKind = Literal["supersedes", "refines", "duplicates", "supports", "contradicts"]
MAX_MEMORY_CHARS = 400
MAX_MEMORIES = 100


@dataclass(frozen=True)
class ExtractionContext:
    """Everything an extractor may use. ``messages`` is the window to extract from (untrusted
    evidence); ``new_message_ids`` marks which of them are new; ``past_memories`` and ``summary``
    are context only."""

    messages: list[Record]
    new_message_ids: frozenset[str]
    past_memories: list[Record] = field(default_factory=list)
    summary: str = ""
    custom_instructions: str | None = None
    link_during_extraction: bool = False
    link_custom_instructions: str | None = None
    token_limit: int = 100_000
    user_id: str | None = None
    agent_id: str | None = None
    update_summary: bool = False
    """A summary update is due over exactly the new messages: an extractor that calls an LLM may
    fold it into its call and return it in ``ExtractionOutput.summary`` (``summary`` above is the
    previous one); others ignore it and the pipeline makes a separate summary call."""
    token_counter: TokenCounter = field(default_factory=EstimateCounter)
    """Counts ``token_limit`` (the client's counter)."""
    candidates: tuple[MemoryCandidate, ...] = ()
    """In a chain of extractors (``AgentMemory(extractor=[...])``): what the extractors before
    this one found, in order; empty for the first (or only) extractor."""


class LinkCandidate(BaseModel):
    """A proposed link from a new memory (by its index in the output) to an existing record."""

    model_config = ConfigDict(extra="forbid")

    target_id: str
    link_type: LinkKind


class MemoryCandidate(BaseModel):
    """One atomic, self-contained memory grounded in the new messages."""

    model_config = ConfigDict(extra="forbid")

    type: MemoryKind
    content: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    entities: list[str] = Field(default_factory=list)
    valid_until: str | None = None
    links: list[LinkCandidate] = Field(default_factory=list)
    slot: str | None = None
    """A stable key for single-valued facts ("user.name"): a new value supersedes the old."""
    metadata: SkipJsonSchema[dict[str, Any]] = Field(default_factory=dict)
    """Caller-visible metadata written on the memory (usable in ``metadata_filter``), e.g. the
    dates a plugin resolved. Set by code, never by the LLM: it is not in the LLM's schema and the
    LLM extractor drops it from answers. Keys follow the metadata rules (no ``$`` prefix)."""

    @field_validator("metadata")
    @classmethod
    def _caller_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        from ..validation import validate_metadata

        return validate_metadata("metadata", value)


class SummaryOutput(BaseModel):
    """The summary call's answer: a running summary and at most 8 topics."""

    model_config = ConfigDict(extra="forbid")

    summary: str
    topics: list[str] = Field(default_factory=list)
    """Up to 8 are kept; extra topics from the model are dropped, not treated as an error."""


class ExtractionOutput(BaseModel):
    """The extractor's answer."""

    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryCandidate] = Field(default_factory=list, max_length=MAX_MEMORIES)
    summary: SkipJsonSchema[SummaryOutput | None] = None
    """The updated running summary, when ``ExtractionContext.update_summary`` asked for it and
    the extractor folded it into its call; None makes the pipeline update it with a call of its
    own. Not part of the LLM's extraction schema (see ``ExtractionWithSummaryOutput``)."""


class ExtractionWithSummaryOutput(BaseModel):
    """The answer of an extraction call that also updates the running summary (one call instead
    of two, ``ContextSummaryUpdateMode.DURING_EXTRACTION``)."""

    model_config = ConfigDict(extra="forbid")

    memories: list[MemoryCandidate] = Field(default_factory=list, max_length=MAX_MEMORIES)
    summary: SummaryOutput


class LinkDecision(BaseModel):
    """A link decided by the post-extraction linking call."""

    model_config = ConfigDict(extra="forbid")

    source_id: str
    target_id: str
    link_type: LinkKind


class LinkOutput(BaseModel):
    """The linking call's answer."""

    model_config = ConfigDict(extra="forbid")

    links: list[LinkDecision] = Field(default_factory=list)


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """Make a pydantic JSON schema acceptable to strict structured-output servers."""
    if schema.get("type") == "object":
        schema["additionalProperties"] = False
        schema["required"] = sorted(schema.get("properties", {}))
    for value in list(schema.values()):
        if isinstance(value, dict):
            _strict(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _strict(item)
    return schema


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of an output model."""
    return _strict(model.model_json_schema())
