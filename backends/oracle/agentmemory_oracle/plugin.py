"""Entry point of the ``oracle`` backend: registers the store class by dotted path only.

Import-light on purpose: python-oracledb is imported when the store class is first used.
"""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl

STORE_PATH = "agentmemory_oracle.store:OracleStore"
INSTALL_HINT = "pip install agentmemory-oracle  (or: pip install 'agentmemory[oracle]')"


@hookimpl
def agentmemory_register_backends(register: Register) -> None:
    """Register ``oracle`` → ``OracleStore`` (built from ``oracle://user:pass@host:port/service``)."""
    register("oracle", STORE_PATH, install_hint=INSTALL_HINT)
