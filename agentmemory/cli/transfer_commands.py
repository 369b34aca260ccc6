"""Transfer commands: ``export``, ``import``, ``migrate`` — a thin layer over
``agentmemory.transfer`` (which documents the dump format, conflicts and resumption), imported
when one of them runs (not for ``--help`` or another command)."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .application import app
from .options import EmbedderOption, StoreOption, cli_errors

if TYPE_CHECKING:
    from ..transfer import TransferReport
    from ..transfer.dump_format import DumpEntry


class OnConflictChoice(str, Enum):
    """``--on-conflict``: the values of ``agentmemory.transfer.OnConflict``, here so that the
    command line is parsed without importing the transfer package."""

    FAIL = "fail"
    SKIP = "skip"
    OVERWRITE = "overwrite"


MIGRATE_SOURCE_HINT = "check the SOURCE argument; migrate copies from an existing store (TARGET is created if needed)"
MIGRATE_EMBEDDER_HINT = "pass the --source-embedder/--target-embedder the stores were filled with"

ConflictOption = Annotated[
    OnConflictChoice,
    typer.Option("--on-conflict", help="A record or link that exists with other content: fail (default, "
                 "before its batch is written), skip (keep the stored one, report it) or overwrite."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Read everything, write nothing, report what would be written.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as one JSON document on stdout.")]
BatchOption = Annotated[int, typer.Option("--batch-size", min=1, max=10_000, help="Records per atomic write.")]


@app.command("export")
def export_command(
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    output: Annotated[str, typer.Option("--output", "-o", help="File to write (.gz compresses); - is stdout.")] = "-",
    gzip: Annotated[bool, typer.Option("--gzip", help="Compress stdout (a file compresses when its name ends in .gz).")] = False,
    no_vectors: Annotated[bool, typer.Option("--no-vectors", help="Leave vectors out (an import then re-embeds).")] = False,
) -> None:
    """Write every record and link of a store as a dump (JSON lines, versioned) to stdout or a file."""
    from ..registry import build_embedder
    from ..transfer import export_records, write_dump

    if output == "-" and sys.stdout.isatty() and not gzip:
        typer.echo("note: writing the dump to the terminal; use -o FILE or redirect it", err=True)
    with cli_errors(), _progress("exporting", None) as tick:
        entries = _counting(export_records(store, embedder=build_embedder(embedder), vectors=not no_vectors), tick)
        lines = write_dump(entries, output, compress=True if gzip else None)
    typer.echo(f"exported {lines} lines to {'stdout' if output == '-' else output}", err=True)


@app.command("import")
def import_command(
    dump: Annotated[str, typer.Argument(help="Dump file (gzip or plain); - is stdin.")],
    store: StoreOption = None,
    embedder: EmbedderOption = None,
    on_conflict: ConflictOption = OnConflictChoice.FAIL,
    dry_run: DryRunOption = False,
    batch_size: BatchOption = 1000,
    as_json: JsonOption = False,
) -> None:
    """Write a dump into a store (created if needed). Rerunnable: what is already there and equal is skipped."""
    from ..registry import build_embedder
    from ..transfer import import_records, read_dump

    if dump != "-" and not Path(dump).is_file():
        typer.echo(f"error: no such dump file: {dump}", err=True)
        raise typer.Exit(2)
    with cli_errors(), _progress("importing", None) as tick:
        report = import_records(store, read_dump(dump), embedder=build_embedder(embedder), on_conflict=on_conflict.value,
                                dry_run=dry_run, batch_size=batch_size, progress=tick)
    _print_report(report, as_json)


@app.command("migrate")
def migrate_command(
    source: Annotated[str, typer.Argument(help="Source store URI (must exist).")],
    target: Annotated[str, typer.Argument(help="Target store URI (created if needed).")],
    source_embedder: Annotated[str | None, typer.Option("--source-embedder", help="Embedder the source was filled with (default: the bundled model).")] = None,
    target_embedder: Annotated[str | None, typer.Option("--target-embedder", help="Embedder of the target (default: the bundled model).")] = None,
    on_conflict: ConflictOption = OnConflictChoice.FAIL,
    dry_run: DryRunOption = False,
    batch_size: BatchOption = 1000,
    as_json: JsonOption = False,
) -> None:
    """Copy every record and link from one store to another, streaming; rerun to resume."""
    from ..registry import build_embedder
    from ..transfer import migrate

    with cli_errors(MIGRATE_SOURCE_HINT, MIGRATE_EMBEDDER_HINT):
        total = _count(source, source_embedder)
        with _progress("migrating", total) as tick:
            report = migrate(source, target, source_embedder=build_embedder(source_embedder),
                             target_embedder=build_embedder(target_embedder), on_conflict=on_conflict.value,
                             dry_run=dry_run, batch_size=batch_size, progress=tick)
    _print_report(report, as_json)


def _count(uri: str, embedder: str | None) -> int | None:
    """How many records the source holds (for the progress bar), only when a terminal shows it."""
    if not sys.stderr.isatty():
        return None
    from ..registry import build_embedder
    from ..spi import RecordFilter, SchemaPolicy
    from ..transfer import opened

    with opened(uri, build_embedder(embedder), SchemaPolicy.REQUIRE_EXISTING) as memory:
        return memory.store.count(RecordFilter())


def _print_report(report: TransferReport, as_json: bool) -> None:
    if as_json:
        json.dump(dataclasses.asdict(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        typer.echo(report.summary())
        for line in report.conflicts:
            typer.echo(f"  conflict: {line}")
    if report.records_conflicting or report.links_conflicting:
        raise typer.Exit(1)  # skipped conflicts are reported, and the exit status says so


@contextmanager
def _progress(label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A Rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    if not sys.stderr.isatty():
        yield lambda done: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = [TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("records")]
    if total is not None:
        columns.append(TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)


def _counting(entries: Iterator[DumpEntry], tick: Callable[[int], None]) -> Iterator[DumpEntry]:
    """``entries`` unchanged, ticking the progress bar every thousand records."""
    from ..transfer.dump_format import RecordEntry

    records = 0
    for entry in entries:
        if isinstance(entry, RecordEntry):
            records += 1
            if records % 1000 == 0:
                tick(records)
        yield entry
