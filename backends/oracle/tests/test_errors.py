"""ORA/DPY codes mapped to agentmemory's typed errors, using real python-oracledb error objects:
server errors built the way the thin driver builds them (message and numeric code, so the driver
rewrites the ones it knows, e.g. ORA-03113 to DPY-4011), driver errors raised by the driver."""

from __future__ import annotations

import oracledb
import oracledb.errors as driver_errors
import pytest
from agentmemory_oracle import errors as mapping
from agentmemory_oracle.errors import error_code, map_error, ora_code_of
from oracledb.errors import _Error

from agentmemory.errors import (
    BackendError,
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    NotFound,
    TransientBackendError,
)


def driver_error(
    code: str, *, cls: type[oracledb.Error] = oracledb.DatabaseError, recoverable: bool = False
) -> oracledb.Error:
    """A server error (``ORA-``) as the thin driver builds it, or a driver error by its code."""
    number = int(code[4:]) if code.startswith("ORA-") else 0
    return cls(_Error(message=f"{code}: something happened", isrecoverable=recoverable, code=number))


def raised_by_driver(error_num: int, **args: object) -> oracledb.Error:
    """The exception python-oracledb itself raises for one of its DPY errors."""
    with pytest.raises(oracledb.Error) as info:
        driver_errors._raise_err(error_num, **args)
    return info.value


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ORA-00001", Conflict),
        ("ORA-02292", Conflict),
        ("ORA-02291", NotFound),
        ("ORA-00054", TransientBackendError),
        ("ORA-00060", TransientBackendError),
        ("ORA-51815", TransientBackendError),  # HNSW snapshot too old: retry
        ("DPY-4011", TransientBackendError),
        ("DPY-4005", TransientBackendError),
        ("ORA-01017", BackendUnavailable),
        ("ORA-12541", BackendUnavailable),
        ("ORA-12514", BackendUnavailable),
        ("ORA-01034", BackendUnavailable),
        ("DPY-6005", BackendUnavailable),
        ("ORA-00942", BackendUnavailable),
        ("ORA-01031", BackendUnavailable),
        ("ORA-12899", InvalidArgument),
        ("DPY-4003", InvalidArgument),
        ("ORA-00904", BackendError),  # invalid identifier: a bug in our SQL, not an absent store
        ("DPY-1003", BackendError),  # "the executed statement does not return rows": a bug too
        ("ORA-29902", BackendError),
        ("ORA-51962", BackendError),
        ("ORA-00907", BackendError),  # missing right parenthesis (ORA-00600 arrives as DPY-4011, below)
    ],
)
def test_codes(code: str, expected: type[Exception]) -> None:
    exc = driver_error(code, cls=oracledb.IntegrityError if code == "ORA-00001" else oracledb.DatabaseError)
    mapped = map_error(exc, operation="write")
    assert type(mapped) is expected
    assert ora_code_of(mapped) == code
    assert not isinstance(mapped, oracledb.Error)


@pytest.mark.parametrize("code", ["ORA-03113", "ORA-03114", "ORA-03135", "ORA-12537", "ORA-01089", "ORA-00600"])
def test_lost_connections_arrive_as_dpy_4011_and_are_transient(code: str) -> None:
    exc = driver_error(code)
    assert error_code(exc) == "DPY-4011" and code in str(exc)  # the driver's rewrite
    mapped = map_error(exc, operation="query")
    assert type(mapped) is TransientBackendError and ora_code_of(mapped) == "DPY-4011" and code in str(mapped)


def test_tables_hold_codes_as_the_driver_reports_them() -> None:
    """No entry can be one python-oracledb rewrites to a DPY code (it would never match)."""
    rewritten = {f"ORA-{number:05d}" for number in driver_errors.ERR_ORACLE_ERROR_XREF}
    tables = {
        name: getattr(mapping, name)
        for name in ("CONFLICT", "MISSING_PARENT", "TRANSIENT", "UNAVAILABLE", "NOT_A_NUMBER", "BROKEN_INDEX",
                     "TOO_LARGE", "TEXT_QUERY")
    }
    for name, codes in tables.items():
        assert not codes & rewritten, f"{name} holds {sorted(codes & rewritten)}, which python-oracledb reports as DPY-…"


@pytest.mark.parametrize(
    ("error_num", "args", "expected"),
    [
        (driver_errors.ERR_NOT_A_QUERY, {}, BackendError),
        (driver_errors.ERR_ORACLE_NUMBER_NO_REPR, {}, InvalidArgument),
        (driver_errors.ERR_POOL_NOT_OPEN, {}, BackendUnavailable),
        (driver_errors.ERR_CONNECTION_CLOSED, {}, TransientBackendError),
        (driver_errors.ERR_POOL_NO_CONNECTION_AVAILABLE, {}, TransientBackendError),
    ],
)
def test_errors_the_driver_raises(error_num: int, args: dict[str, object], expected: type[Exception]) -> None:
    exc = raised_by_driver(error_num, **args)
    mapped = map_error(exc)
    assert type(mapped) is expected and ora_code_of(mapped) == f"DPY-{error_num:04d}"


def test_messages_name_the_operation_and_keep_the_driver_text() -> None:
    mapped = map_error(driver_error("ORA-00001"), operation="write")
    assert "Oracle write failed" in str(mapped) and "ORA-00001" in str(mapped)
    too_big = map_error(driver_error("ORA-12899"))
    assert isinstance(too_big, InvalidArgument) and too_big.argument == "record"


def test_broken_domain_index_says_how_to_fix_it() -> None:
    mapped = map_error(driver_error("ORA-29861"), operation="write")
    assert type(mapped) is BackendUnavailable and "create_if_necessary" in str(mapped)


def test_recoverable_errors_are_transient() -> None:
    assert isinstance(map_error(driver_error("ORA-99999", recoverable=True)), TransientBackendError)


def test_code_extraction_fallbacks() -> None:
    assert error_code(RuntimeError("ORA-00942: table or view does not exist")) == "ORA-00942"
    assert error_code(RuntimeError("no code here")) == ""
    assert error_code(RuntimeError()) == ""
    plain = map_error(RuntimeError("boom"))
    assert type(plain) is BackendError and ora_code_of(plain) == ""


def test_agentmemory_errors_pass_through() -> None:
    original = NotFound("record", "x")
    assert map_error(original) is original
