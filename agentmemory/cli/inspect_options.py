"""What the inspect and report commands share (``inspect_commands``: threads, messages,
memories, links; ``report_commands``: search, card, stats): their scope and metadata filter
options and the parsing of them, and the cells of their Rich tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from ..errors import InvalidArgument
from ..records import RecordStatus

UserFilter = Annotated[str | None, typer.Option("--user", help="Only records of this user id.")]
AgentFilter = Annotated[str | None, typer.Option("--agent", help="Only records of this agent id.")]
ThreadFilter = Annotated[str | None, typer.Option("--thread", help="Only records of this thread id.")]
MetadataFilterOption = Annotated[
    str | None,
    typer.Option("--metadata", help='Metadata filter as JSON, e.g. \'{"project": "ledger"}\' or \'{"tags": {"$array_contains": "x"}}\'.'),
]


def parse_metadata_filter(text: str | None) -> dict[str, Any] | None:
    """``--metadata`` parsed as a JSON object (the core validates the filter itself)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("--metadata", f"is not valid JSON ({exc.msg} at column {exc.colno}): {text!r}") from None
    if not isinstance(value, dict):
        raise InvalidArgument("--metadata", f"must be a JSON object, got {type(value).__name__}: {text!r}")
    return value


def split_values(values: Sequence[str] | None) -> list[str] | None:
    """Repeated and/or comma-separated option values as one list (None when none given)."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def time_cell(value: datetime | None) -> Text:
    """A timestamp for a table, to the minute in its own offset (JSON keeps the exact value)."""
    return Text("" if value is None else value.strftime("%Y-%m-%d %H:%M %z"), style="dim")


def text_cell(value: Any, style: str = "") -> Text:
    """A table cell that shows ``value`` literally (no Rich markup in stored text)."""
    return Text("" if value is None else str(value), style=style)


def content_cell(content: str, record_id: str, extra: dict[str, Any] | None = None) -> Text:
    """Content with the record id (and user metadata, if any) below it, dimmed."""
    cell = Text(content)
    cell.append(f"\n{record_id}", style="dim cyan")
    if extra:
        cell.append("\n" + json.dumps(extra, ensure_ascii=False), style="dim")
    return cell


def status_cell(status: RecordStatus) -> Text:
    return text_cell(status.value, "green" if status is RecordStatus.VALID else "yellow")
