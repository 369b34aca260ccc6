"""Schema object names of one named memory store, derived from a validated prefix.

Every identifier that reaches SQL text is built here from ``memory_store_id`` (a letter, then
letters, digits or ``_``, at most 16 characters, upper-cased, as in the reference product) plus
fixed suffixes, so no caller string can inject SQL through a name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentmemory.errors import InvalidArgument

DEFAULT_STORE_ID = "AGENTMEMORY"
MAX_STORE_ID_CHARS = 16
_STORE_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_IDENTIFIER = re.compile(r"[A-Z][A-Z0-9_]*\Z")


def validate_store_id(memory_store_id: object) -> str:
    """The upper-cased store id, or ``InvalidArgument`` naming ``memory_store_id``."""
    if memory_store_id is None:
        return DEFAULT_STORE_ID
    if not isinstance(memory_store_id, str):
        raise InvalidArgument("memory_store_id", f"must be a string, got {type(memory_store_id).__name__}")
    if not memory_store_id or len(memory_store_id) > MAX_STORE_ID_CHARS:
        raise InvalidArgument(
            "memory_store_id", f"must be 1..{MAX_STORE_ID_CHARS} characters, got {len(memory_store_id)}"
        )
    if not memory_store_id.isascii() or not _STORE_ID.match(memory_store_id):
        raise InvalidArgument(
            "memory_store_id",
            f"must start with a letter and contain only letters, digits and '_', got {memory_store_id!r}",
        )
    return memory_store_id.upper()


def store_id_for_key(key: str) -> str:
    """A valid 16-character store id derived from any string (e.g. a test harness's per-test
    path): ``K`` plus 15 hex digits of its hash."""
    if not isinstance(key, str) or not key:
        raise InvalidArgument("memory_store_key", "must be a non-empty string")
    return "K" + hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest().upper()[:15]


def _ident(name: str) -> str:
    """Assert an identifier is simple (defence in depth; every name passes through here)."""
    if not _IDENTIFIER.match(name) or len(name) > 128:
        raise InvalidArgument("memory_store_id", f"derived identifier {name!r} is not a simple SQL name")
    return name


@dataclass(frozen=True)
class StoreNames:
    """Table, sequence, index and constraint names of the store ``store_id``."""

    store_id: str

    @classmethod
    def for_store(cls, memory_store_id: str | None) -> StoreNames:
        """Validate ``memory_store_id`` and derive the names."""
        return cls(validate_store_id(memory_store_id))

    def __post_init__(self) -> None:
        if validate_store_id(self.store_id) != self.store_id:
            raise InvalidArgument("memory_store_id", f"must be upper-case, got {self.store_id!r}")

    def name(self, suffix: str) -> str:
        """``<STORE_ID>_<SUFFIX>``, checked to be a simple identifier."""
        return _ident(f"{self.store_id}_{suffix}")

    @property
    def meta(self) -> str:
        return self.name("STORE_META")

    @property
    def record(self) -> str:
        return self.name("RECORD")

    @property
    def chunk(self) -> str:
        return self.name("RECORD_CHUNK")

    @property
    def link(self) -> str:
        return self.name("MEMORY_LINK")

    @property
    def seq(self) -> str:
        return self.name("RECORD_SEQ")

    @property
    def vector_index(self) -> str:
        return self.name("RECORD_CHUNK_EMBEDDING_VEC_I")

    @property
    def text_index(self) -> str:
        return self.name("RECORD_CHUNK_TEXT_TXT_I")

    @property
    def metadata_index(self) -> str:
        return self.name("RECORD_MDKEYS_MVI")

    def tables(self) -> tuple[str, ...]:
        """Tables in drop order (children first)."""
        return (self.link, self.chunk, self.record, self.meta)
