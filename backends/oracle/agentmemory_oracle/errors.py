"""python-oracledb exceptions mapped to agentmemory's typed errors (never leaked to callers).

Works on any exception shaped like ``oracledb.Error`` (``args[0]`` with ``full_code``,
``message``, ``isrecoverable``), so the mapping is unit tested with real driver error objects
and no server. The ORA/DPY code is kept on the mapped error as ``ora_code``.

The tables hold codes as python-oracledb reports them: the driver rewrites some server errors
to its own (``oracledb.errors.ERR_ORACLE_ERROR_XREF``: ORA-03113, 03114, 03135, 12537, 01089 and
others become DPY-4011, "the database or network closed the connection"), so only DPY-4011 can
match those. Unknown codes, and ones that mean a bug in this package (ORA-00904 invalid
identifier, DPY-1003 "the executed statement does not return rows"), are ``BackendError``.
"""

from __future__ import annotations

from typing import Any

from agentmemory.errors import (
    AgentMemoryError,
    BackendError,
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    NotFound,
    TransientBackendError,
)

CONFLICT = {
    "ORA-00001",  # unique constraint violated (duplicate record id, link id or linked pair)
    "ORA-02292",  # child record found
}
MISSING_PARENT = {"ORA-02291"}  # integrity constraint violated - parent key not found
TRANSIENT = {
    "ORA-00054",  # resource busy and acquire with NOWAIT
    "ORA-00060",  # deadlock detected
    "ORA-04021",  # timeout waiting to lock object
    "ORA-08177",  # cannot serialize access
    "ORA-30006",  # resource busy; acquire with WAIT timeout expired
    "ORA-51906",  # vector index build in progress (retried by the reference too)
    "ORA-51815",  # HNSW vector index snapshot is too old (a new snapshot was just built: retry)
    "ORA-25408",  # cannot safely replay call
    "ORA-01013",  # user requested cancel (call timeout)
    "DPY-4011",  # the database or network closed the connection: how python-oracledb reports
    #              ORA-03113, 03114, 03135, 12537, 01089, 00028, 00600 and the rest of its list
    "DPY-4024",  # call timeout exceeded
    "DPY-1001",  # not connected to database
    "DPY-4005",  # timed out waiting for the connection pool
}
UNAVAILABLE = {
    "ORA-01017",  # invalid credentials
    "ORA-28000",  # account locked
    "ORA-01033",  # initialization or shutdown in progress
    "ORA-01034",  # not available
    "ORA-12514",  # listener does not know the service (thick mode; thin reports DPY-6001)
    "ORA-12505",  # listener does not know the SID (thick mode; thin reports DPY-6003)
    "ORA-12541",  # no listener
    "ORA-12170",  # connect timeout
    "ORA-12528",  # listener: all handlers blocking new connections
    "ORA-00942",  # table or view does not exist (store not created, or no grant)
    "ORA-01031",  # insufficient privileges
    "DPY-4000",  # cannot find the TNS alias
    "DPY-4001",  # no credentials given
    "DPY-6000",  # listener refused the connection
    "DPY-6001",  # service not registered with the listener
    "DPY-6003",  # SID not registered with the listener
    "DPY-6005",  # cannot connect to database
    "DPY-1002",  # connection pool is not open
}
NOT_A_NUMBER = {"DPY-4003"}  # value cannot be represented as an Oracle NUMBER
BROKEN_INDEX = {"ORA-29861"}  # domain index is marked LOADING/FAILED/UNUSABLE: DML on its table fails
TOO_LARGE = {"ORA-12899", "ORA-01704", "ORA-40478", "ORA-01489", "ORA-22835"}
TEXT_QUERY = {"ORA-29902", "ORA-20000"}  # Oracle Text (DRG-…) errors surface through these


def error_code(exc: BaseException) -> str:
    """``ORA-xxxxx``/``DPY-xxxx`` of a driver exception, or ``""``."""
    info = exc.args[0] if exc.args else None
    code = getattr(info, "full_code", "") or ""
    if not code:
        text = str(info if info is not None else exc)
        head = text.split(":", 1)[0].strip()
        if head[:4] in ("ORA-", "DPY-", "DPI-"):
            code = head
    return code


def _message(exc: BaseException) -> str:
    info = exc.args[0] if exc.args else None
    return str(getattr(info, "message", None) or info or exc)


def map_error(exc: BaseException, *, operation: str = "operation") -> AgentMemoryError:
    """The agentmemory error for a python-oracledb exception raised during ``operation``."""
    if isinstance(exc, AgentMemoryError):
        return exc
    code = error_code(exc)
    message = _message(exc)
    info: Any = exc.args[0] if exc.args else None
    text = f"Oracle {operation} failed: {message}"
    mapped: AgentMemoryError
    if code in CONFLICT:
        mapped = Conflict(text)
    elif code in MISSING_PARENT:
        mapped = NotFound("record", f"(referenced record deleted concurrently: {message})")
    elif code in UNAVAILABLE:
        mapped = BackendUnavailable(text)
    elif code in BROKEN_INDEX:
        mapped = BackendUnavailable(
            f"{text} (an Oracle Text index is not usable; opening the store with "
            "schema_policy='create_if_necessary' drops and rebuilds it)"
        )
    elif code in TRANSIENT or getattr(info, "isrecoverable", False) or getattr(info, "is_session_dead", False):
        mapped = TransientBackendError(text)
    elif code in TOO_LARGE:
        mapped = InvalidArgument("record", f"a value is too large for the Oracle schema ({message})")
    elif code in NOT_A_NUMBER:
        mapped = InvalidArgument("record", f"a number cannot be stored as an Oracle NUMBER ({message})")
    elif code in TEXT_QUERY:
        mapped = BackendError(f"{text} (Oracle Text; is the CONTEXT index valid?)")
    else:
        mapped = BackendError(text)
    setattr(mapped, "ora_code", code)  # noqa: B010 - an extra attribute on core error types
    return mapped


def ora_code_of(exc: BaseException) -> str:
    """The ORA/DPY code kept on a mapped error (``""`` when there is none)."""
    return str(getattr(exc, "ora_code", "") or "")
