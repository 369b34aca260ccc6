"""agentmemory backend for Oracle AI Database 23ai+ (python-oracledb, thin mode).

Importing this package is cheap: ``OracleStore`` (and with it python-oracledb) is loaded on first
attribute access, so the plugin entry point never pays for the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import OracleStore

__all__ = ["OracleStore"]


def __getattr__(name: str) -> Any:
    if name == "OracleStore":
        from .store import OracleStore

        return OracleStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
