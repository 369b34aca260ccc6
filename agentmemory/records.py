"""The record model: every stored thing is a ``Record``; links join memory-like records.

Records are immutable pydantic models shared by the core, the SPI and every backend.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from datetime import date, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

if TYPE_CHECKING:
    from typing_extensions import Self


class RecordType(str, Enum):
    """What a record is. Threads and summaries are records too, kept out of search by default."""

    def __str__(self) -> str:
        return str(self.value)

    MESSAGE = "message"
    MEMORY = "memory"
    FACT = "fact"
    GUIDELINE = "guideline"
    PREFERENCE = "preference"
    USER = "user"
    AGENT = "agent"
    THREAD = "thread"
    SUMMARY = "summary"


MEMORY_TYPES: frozenset[RecordType] = frozenset(
    {RecordType.MEMORY, RecordType.FACT, RecordType.GUIDELINE, RecordType.PREFERENCE}
)
"""Memory-like types: the only ones that can be linked and carry a lifecycle."""
MESSAGE_TYPES: frozenset[RecordType] = frozenset({RecordType.MESSAGE})
"""Messages only (a filter's ``record_types`` for a thread's conversation)."""

SEARCHABLE_TYPES: frozenset[RecordType] = MEMORY_TYPES | {
    RecordType.MESSAGE,
    RecordType.USER,
    RecordType.AGENT,
}
"""Types that carry a vector and are returned by search."""

TTL_TYPES: frozenset[RecordType] = MEMORY_TYPES | {RecordType.MESSAGE}
"""Types that may expire (profiles, threads, summaries never do)."""


class RecordStatus(str, Enum):
    """``invalid`` records stay stored as history (superseded, refined, duplicated)."""

    def __str__(self) -> str:
        return str(self.value)

    VALID = "valid"
    INVALID = "invalid"


class LinkType(str, Enum):
    """Relations between memory-like records, stored in the source→target orientation."""

    def __str__(self) -> str:
        return str(self.value)

    SUPERSEDES = "supersedes"
    REFINES = "refines"
    DUPLICATES = "duplicates"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"

    @property
    def opposite(self) -> str:
        """The name of the relation as seen from the target."""
        return _OPPOSITES[self]

    @property
    def is_lifecycle(self) -> bool:
        """Lifecycle links invalidate their target while they exist."""
        return self in LIFECYCLE_LINKS


_OPPOSITES = {
    LinkType.SUPERSEDES: "is_superseded_by",
    LinkType.REFINES: "is_refined_by",
    LinkType.DUPLICATES: "duplicates",
    LinkType.SUPPORTS: "is_supported_by",
    LinkType.CONTRADICTS: "contradicts",
}
LIFECYCLE_LINKS: frozenset[LinkType] = frozenset(
    {LinkType.SUPERSEDES, LinkType.REFINES, LinkType.DUPLICATES}
)


class Record(BaseModel):
    """One stored row as every backend returns it.

    ``seq`` is the store-wide insertion order (messages are ordered by it); ``expires_at`` is
    None for records that never expire. ``index_text`` is what the keyword index (and the
    core's embedder) sees in place of ``content`` when it differs: a message indexed with its
    speaker, date and previous turn is still returned with its own words. None = ``content``.
    """

    model_config = ConfigDict(frozen=True)

    record_id: str
    record_type: RecordType
    content: str
    user_id: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None
    role: str | None = None
    seq: int = 0
    timestamp: datetime
    created_at: datetime
    expires_at: datetime | None = None
    status: RecordStatus = RecordStatus.VALID
    metadata: dict[str, Any] = Field(default_factory=dict)
    index_text: str | None = None

    @property
    def indexed_text(self) -> str:
        """The text search indexes for this record: ``index_text``, else ``content``."""
        return self.content if self.index_text is None else self.index_text


class Link(BaseModel):
    """A directed relation ``source --link_type--> target`` between memory-like records."""

    model_config = ConfigDict(frozen=True)

    link_id: str
    source_id: str
    target_id: str
    link_type: LinkType
    created_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def opposite_link_type(self) -> str:
        """The relation read from the target's side."""
        return self.link_type.opposite

    def relation_from(self, record_id: str) -> str:
        """The relation name as seen from ``record_id`` (one of the two endpoints)."""
        return self.link_type.value if record_id == self.source_id else self.opposite_link_type


class LinkedResult(BaseModel):
    """A record reached from a search result through links, with the first link of its path."""

    model_config = ConfigDict(frozen=True)

    relation: str
    link: Link
    depth: int
    record: Record


class SearchResult(BaseModel):
    """One search hit: the record, its vector distance and/or fused score, rendered text.

    ``formatted_content`` given to the constructor is kept as given. The core's search builds
    its results with ``rendered_on_read`` instead: the text (``formatting.format_record`` of the
    record and its linked results) is rendered the first time anything reads it (the attribute,
    ``model_dump``, ``==``, ``repr``), so a caller that never reads it does not pay for it
    (rendering was a plain search's largest cost after the store call)."""

    model_config = ConfigDict(frozen=True)

    record: Record
    distance: float | None = None
    score: float
    formatted_content: str
    linked_results: tuple[LinkedResult, ...] = ()

    @classmethod
    def rendered_on_read(
        cls, record: Record, distance: float | None, score: float, linked_results: tuple[LinkedResult, ...],
        render: Callable[[Record, tuple[LinkedResult, ...]], str],
    ) -> SearchResult:
        """A result whose ``formatted_content`` is ``render(record, linked_results)``, rendered
        on first read. Validated as the constructor validates; equal to the result built with
        that text given. (The renderer is passed in: the record model sits below formatting.)"""
        if (type(record) is Record and type(score) is float and (distance is None or type(distance) is float)
                and linked_results == () and cls is SearchResult):
            # a search's plain hit: values validation would pass through unchanged, set as
            # ``model_construct`` sets them (the validating constructor cost twice as much)
            result = _new_object(cls)
            _set_attribute(result, "__dict__", {"record": record, "distance": distance, "score": score,
                                                "linked_results": (), _RENDER_LATER: render})
            _set_attribute(result, "__pydantic_fields_set__", set(_RESULT_FIELDS))
            _set_attribute(result, "__pydantic_extra__", None)
            _set_attribute(result, "__pydantic_private__", None)
            return result
        result = cls(record=record, distance=distance, score=score, formatted_content="", linked_results=linked_results)
        fields = result.__dict__
        del fields["formatted_content"]
        fields[_RENDER_LATER] = render  # not a field: pydantic's ==, repr and dict() skip it
        return result

    def _rendered(self) -> str:
        """``formatted_content``, rendering it now if it was left for later."""
        fields = self.__dict__
        render = fields.get(_RENDER_LATER)
        if render is None:
            return str(fields["formatted_content"])
        text = str(render(self.record, self.linked_results))
        # a new dict in field order, as the constructor leaves it (repr, dict(), pickling), put
        # in place in one step: a thread reading this result meanwhile sees the old dict or the
        # new one, never a half-built one (at worst it renders the same text again)
        _set_attribute(self, "__dict__", {name: text if name == "formatted_content" else fields[name]
                                          for name in type(self).model_fields})
        return text

    if not TYPE_CHECKING:  # mypy keeps checking attribute names on results

        def __getattr__(self, name: str) -> Any:
            if name == "formatted_content":
                return self._rendered()
            return super().__getattr__(name)

    # everything that reads the fields as a whole renders the text first
    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> Any:
        self._rendered()
        return handler(self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SearchResult):
            self._rendered()
            other._rendered()
        return super().__eq__(other)

    def __iter__(self) -> Any:
        self._rendered()
        return super().__iter__()

    def __repr_args__(self) -> Any:
        self._rendered()
        return super().__repr_args__()

    def __getstate__(self) -> dict[Any, Any]:
        self._rendered()
        return super().__getstate__()

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        self._rendered()  # a copy with another record keeps this text, as an eager result would
        return super().model_copy(update=update, deep=deep)

    @property
    def content(self) -> str:
        """The record's raw content."""
        return self.record.content

    @property
    def record_type(self) -> RecordType:
        """The record's type."""
        return self.record.record_type


_RENDER_LATER = "_render_later"
"""The ``__dict__`` key of a ``SearchResult``'s pending renderer (``rendered_on_read``)."""
_RESULT_FIELDS = frozenset(SearchResult.model_fields)
_new_object = object.__new__
_set_attribute = object.__setattr__


class ThreadInfo(BaseModel):
    """A thread as listed: ids, metadata and its persisted extraction settings."""

    model_config = ConfigDict(frozen=True)

    thread_id: str
    user_id: str | None
    agent_id: str | None
    metadata: dict[str, Any]
    created_at: datetime
    memory_extraction_config: dict[str, Any] = Field(default_factory=dict)


class Profile(BaseModel):
    """A user or agent profile: free text about the actor, searchable."""

    model_config = ConfigDict(frozen=True)

    actor_id: str
    actor_type: RecordType
    information: str
    metadata: dict[str, Any]
    created_at: datetime


class Summary(BaseModel):
    """A thread's running summary and topics, and the last message sequence it covers."""

    model_config = ConfigDict(frozen=True)

    content: str
    topics: tuple[str, ...] = ()
    last_message_seq: int = 0
    revision: int = 0
    """Stored summaries count revisions from 1; 0 = computed now by the LLM, not stored;
    -1 = the offline extractive fallback (it quotes recent messages verbatim)."""


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data, exactly: pydantic models and dataclasses by field, datetimes
    as ISO-8601 with their offset (``isoformat``, which ``datetime.fromisoformat`` reads back on
    every supported Python), enums by value, tuples as lists; metadata passes through as stored
    (ints of any size stay ints). The CLI's JSON output and the dump format both use it."""
    if isinstance(value, BaseModel):
        return {name: jsonable(getattr(value, name)) for name in type(value).model_fields}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    return value
