"""ORA/DPY codes mapped to agentmemory's typed errors, using real python-oracledb error objects."""

from __future__ import annotations

import oracledb
import pytest
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
    return cls(_Error(message=f"{code}: something happened", isrecoverable=recoverable))


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("ORA-00001", Conflict),
        ("ORA-02292", Conflict),
        ("ORA-02291", NotFound),
        ("ORA-00054", TransientBackendError),
        ("ORA-00060", TransientBackendError),
        ("ORA-03113", TransientBackendError),
        ("ORA-03135", TransientBackendError),
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
        ("ORA-29902", BackendError),
        ("ORA-51962", BackendError),
        ("ORA-00600", BackendError),
    ],
)
def test_codes(code: str, expected: type[Exception]) -> None:
    exc = driver_error(code, cls=oracledb.IntegrityError if code == "ORA-00001" else oracledb.DatabaseError)
    mapped = map_error(exc, operation="write")
    assert type(mapped) is expected
    assert ora_code_of(mapped) == code
    assert not isinstance(mapped, oracledb.Error)


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
