"""The ``agentmemory`` command: operate a store from the shell.

Built with Typer (Click + Rich). ``app`` lives in ``application``; each group of commands lives in
its own module and registers itself on it: ``inspect_commands`` (threads, messages, memories,
links), ``report_commands`` (search, card, stats) and ``transfer_commands`` (export, import,
migrate). Every command that opens a store takes ``--store URI``, else ``AGENTMEMORY_STORE``,
else the default location — the same resolution as ``AgentMemory()``.

Start-up is kept short: these modules import only Typer and the error types; the client, the
records, the backends and Rich's tables are imported inside the commands that use them, and the
embedding model loads only when something is embedded (``agentmemory --help`` and ``stats`` never
load it). Ctrl-C prints ``interrupted`` on stderr and exits 130.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from .application import app
from .options import FormatOption, JsonlOption, JsonOption, OutputFormat, cli_errors, output_format

if TYPE_CHECKING:
    from rich.console import RenderableType

INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), as shells report it."""


@app.command("plugins")
def plugins_command(fmt: FormatOption = OutputFormat.TABLE, as_json: JsonOption = False, as_jsonl: JsonlOption = False) -> None:
    """List plugins, backends, embedders, LLMs, rerankers, extractors and card renderers.

    A table per kind; --json gives the whole report (with each registration's target)."""
    from ..plugins import get_plugin_manager

    with cli_errors():
        out = output_format(fmt, as_json, as_jsonl)
    report = get_plugin_manager().report()
    if out is OutputFormat.TABLE:
        from rich.console import Console

        Console(highlight=False).print(*_plugin_tables(report))
    else:
        typer.echo(json.dumps(report, indent=2 if out is OutputFormat.JSON else None, sort_keys=True, ensure_ascii=False, default=str))


def _plugin_tables(report: dict[str, Any]) -> list[RenderableType]:
    """The ``plugins`` report as tables: the plugins, every registration by kind, and any
    entry point that failed to load."""
    from rich.table import Table
    from rich.text import Text

    from .inspect_options import text_cell
    from .tables import IdTable, longest

    plugins = IdTable(title="plugins", caption=f"{len(report['plugins'])} loaded (descriptions in --json)")
    for name in ("plugin", "distribution", "registers"):
        plugins.add_column(name, overflow="fold")
    plugins.keep_whole(0, longest(p["name"] for p in report["plugins"]))
    for p in report["plugins"]:
        hooks = [hook.removeprefix("agentmemory_register_").replace("_", " ") for hook in p["hooks"]]
        dist = " ".join(str(part) for part in (p["distribution"], p["version"]) if part)
        plugins.add_row(text_cell(p["name"], "cyan"), text_cell(dist), text_cell(", ".join(hooks)))
    kinds: dict[str, dict[str, Any]] = {k: v for k, v in report.items() if isinstance(v, dict)}
    registered = IdTable(title="registered", caption=f"{sum(len(v) for v in kinds.values())} names (targets in --json)")
    for name in ("kind", "name", "plugin", "description"):
        registered.add_column(name, overflow="fold", ratio=1 if name == "description" else None)
    registered.keep_whole(1, longest(name for entries in kinds.values() for name in entries))
    registered.keep_whole(2, longest(e["plugin"] for entries in kinds.values() for e in entries.values()))
    for kind, entries in sorted(kinds.items()):
        for name, entry in entries.items():
            about = Text(str(entry.get("description") or ""))
            extra = {k: v for k, v in entry.items() if k not in ("plugin", "target", "description", "install_hint")}
            for key, value in extra.items():
                about.append(f"\n{key}: {value}", style="dim")
            if entry.get("install_hint"):
                about.append(f"\n{entry['install_hint']}", style="dim")
            registered.add_row(text_cell(kind.removesuffix("s").replace("_", " ")), text_cell(name, "bold"), text_cell(entry["plugin"]), about)
    tables: list[RenderableType] = [plugins, registered]
    if report["broken"]:
        broken = Table(title="broken plugins (not loaded)", title_style="bold red")
        broken.add_column("entry point", overflow="fold")
        broken.add_column("error", overflow="fold", ratio=1)
        for b in report["broken"]:
            broken.add_row(text_cell(b["name"]), text_cell(b["error"], "red"))
        tables.append(broken)
    return tables


@app.command("demo", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def demo_command(ctx: typer.Context) -> None:
    """Play the seed scenarios on the embedded default (DuckDB + the bundled local embedder)."""
    from ..demo import main as demo_main

    raise typer.Exit(demo_main(list(ctx.args)))


def _register_command_modules() -> None:
    """Import the modules whose commands attach themselves to ``app``."""
    from . import inspect_commands, report_commands, transfer_commands  # noqa: F401


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, a ``KeyboardInterrupt`` (Typer turns
    Ctrl-C into a silent exit 130; the chain still holds the interrupt)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentmemory`` command; returns the exit status (130 after Ctrl-C,
    with one ``interrupted`` line on stderr and no traceback)."""
    try:
        _register_command_modules()
        app(args=argv, prog_name="agentmemory", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if _interrupted(exc):
            return _report_interrupt()
        return code
    except KeyboardInterrupt:
        return _report_interrupt()
    return 0


def _report_interrupt() -> int:
    sys.stdout.flush()
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    return INTERRUPTED
