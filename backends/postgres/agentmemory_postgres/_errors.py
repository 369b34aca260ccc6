"""psycopg errors as agentmemory's typed errors (backends never leak driver exceptions)."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from agentmemory.errors import AgentMemoryError, BackendError, BackendUnavailable, Conflict, TransientBackendError

TRANSIENT = (
    pg_errors.SerializationFailure,
    pg_errors.DeadlockDetected,
    pg_errors.LockNotAvailable,
)
"""Failures a whole transaction may simply be retried after (nothing of it was applied)."""


def map_error(exc: BaseException, operation: str = "operation") -> AgentMemoryError:
    """The agentmemory error for a psycopg (or psycopg_pool) exception."""
    if isinstance(exc, AgentMemoryError):
        return exc
    text = f"PostgreSQL {operation} failed: {type(exc).__name__}: {str(exc).strip()}"
    if isinstance(exc, pg_errors.UniqueViolation):
        return Conflict(text)
    if isinstance(exc, TRANSIENT):
        return TransientBackendError(text)
    try:
        from psycopg_pool import PoolClosed, PoolTimeout
    except ImportError:  # pragma: no cover - a dependency
        PoolTimeout = PoolClosed = ()  # type: ignore[assignment,misc]  # noqa: N806
    if isinstance(exc, (PoolTimeout, PoolClosed)):
        return BackendUnavailable(text)
    if isinstance(exc, (pg_errors.InsufficientPrivilege, pg_errors.InvalidAuthorizationSpecification)):
        return BackendUnavailable(text)
    if isinstance(exc, psycopg.OperationalError):
        # connection refused or lost, server shut down (57P01), too many connections
        return BackendUnavailable(text)
    if isinstance(exc, psycopg.InterfaceError):
        return BackendUnavailable(text)
    return BackendError(text)


def is_transient(exc: BaseException) -> bool:
    """True for errors after which the transaction may be retried whole."""
    return isinstance(exc, TRANSIENT)
