"""What the inspect and report commands share (``inspect_commands``: threads, messages,
memories, links; ``report_commands``: search, card, stats): their scope and metadata filter
options and the parsing of them, and the cells of their Rich tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from rich.text import Text

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


TIME_WIDTH = len("2026-01-31")
"""The ``min_width`` of a timestamp column: the date stays on one line, the time wraps below it."""


def time_cell(value: datetime | None) -> Text:
    """A timestamp for a table, to the minute in its own offset (JSON keeps the exact value)."""
    from rich.text import Text

    return Text("" if value is None else value.strftime("%Y-%m-%d %H:%M %z"), style="dim")


def text_cell(value: Any, style: str = "") -> Text:
    """A table cell that shows ``value`` literally (no Rich markup in stored text)."""
    from rich.text import Text

    return Text("" if value is None else str(value), style=style)


def id_lines(record_id: str, **ids: str | None) -> list[str]:
    """The id lines of a content cell: the record id, then ``name value`` for each other id
    given (``thread=…``, ``user=…``), each on a line of its own so that none is folded."""
    return [record_id, *(f"{name} {value}" for name, value in ids.items() if value is not None)]


def content_cell(content: str, record_id: str, extra: dict[str, Any] | None = None, **ids: str | None) -> Text:
    """Content with the record id (then any ``ids``, see ``id_lines``, and the user metadata)
    below it, dimmed."""
    from rich.text import Text

    cell = Text(content)
    first, *others = id_lines(record_id, **ids)
    cell.append(f"\n{first}", style="dim cyan")
    for line in others:
        cell.append(f"\n{line}", style="dim")
    if extra:
        cell.append("\n" + json.dumps(extra, ensure_ascii=False), style="dim")
    return cell


def status_cell(status: RecordStatus) -> Text:
    from ..records import RecordStatus

    return text_cell(status.value, "green" if status is RecordStatus.VALID else "yellow")
