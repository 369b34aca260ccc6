"""The Typer application behind the ``agentmemory`` command.

Its own module, below ``cli`` and every command module, so the command modules attach their
commands to ``app`` without importing the package that imports them (``cli`` loads them all).
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="agentmemory",
    help="Memory for LLM agents: inspect a store, move it between backends, run the demo.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
