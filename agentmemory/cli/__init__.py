"""The ``agentmemory`` command: operate a store from the shell.

Built with Typer (Click + Rich). ``app`` lives in ``application``; each group of commands lives in
its own module and registers itself on it: ``inspect_commands`` (threads, messages, memories,
links), ``report_commands`` (search, card, stats) and ``transfer_commands`` (export, import,
migrate). Every command that opens a store takes ``--store URI``, else ``AGENTMEMORY_STORE``,
else the default location — the same resolution as ``AgentMemory()``.
"""

from __future__ import annotations

import json
import sys

import typer

from ..plugins import get_plugin_manager
from .application import app


@app.command("plugins")
def plugins_command() -> None:
    """List plugins, backends, embedders, LLMs, rerankers, extractors and card renderers as JSON."""
    json.dump(get_plugin_manager().report(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


@app.command("demo", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def demo_command(ctx: typer.Context) -> None:
    """Play the seed scenarios on the embedded default (DuckDB + the bundled local embedder)."""
    from ..demo import main as demo_main

    raise typer.Exit(demo_main(list(ctx.args)))


def _register_command_modules() -> None:
    """Import the modules whose commands attach themselves to ``app``."""
    from . import inspect_commands, report_commands, transfer_commands  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentmemory`` command; returns the exit status."""
    _register_command_modules()
    try:
        app(args=argv, prog_name="agentmemory", standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
