"""The typed error hierarchy shared by the core and every backend.

Backends raise these (never driver exceptions) so callers can handle one set of types.
"""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base of every error the framework raises on purpose."""


class InvalidArgument(AgentMemoryError, ValueError):
    """An argument is malformed; ``argument`` names it. Nothing was written."""

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        self.problem = problem
        super().__init__(f"invalid argument {argument!r}: {problem}")


class NotFound(AgentMemoryError, LookupError):
    """A record, thread, profile or link with the given id does not exist (or is expired)."""

    def __init__(self, kind: str, identifier: str) -> None:
        self.kind = kind
        self.identifier = identifier
        super().__init__(f"{kind} {identifier!r} not found")


class Conflict(AgentMemoryError):
    """The write clashes with stored state (duplicate id, schema or dimension mismatch)."""


class CapabilityNotSupported(AgentMemoryError, NotImplementedError):
    """The backend does not declare the capability the operation needs."""

    def __init__(self, capability: str, backend: str) -> None:
        self.capability = capability
        self.backend = backend
        super().__init__(f"backend {backend!r} does not support capability {capability!r}")


class BackendError(AgentMemoryError):
    """The storage backend failed; the batch in flight was not applied."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached, opened, or imported (missing driver, locked file, closed)."""


class TransientBackendError(BackendError):
    """A failure worth retrying (connection reset, lock timeout)."""


class ModelError(AgentMemoryError):
    """An embedder or LLM call failed after its retries, or answered with unusable output."""
