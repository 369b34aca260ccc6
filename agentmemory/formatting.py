"""XML-safe rendering of records for prompts (``SearchResult.formatted_content``).

Every inserted string is escaped, so stored text (model output or user input) can never close
or open a tag of the surrounding prompt structure.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from .index_text import speaker_name
from .records import LinkedResult, Record
from .validation import internal_metadata


def xml_text(text: str) -> str:
    """Escape ``&``, ``<`` and ``>`` so ``text`` cannot open or close a tag (element bodies;
    attribute values go through ``attribute``)."""
    return escape(text)


def attribute(name: str, value: str) -> str:
    """`` name="value"`` with the value quoted and escaped (quotes, ``&``, ``<``, ``>``, newlines):
    ``xml.sax.saxutils.quoteattr`` with newline, return and tab as character references, written
    out (its dictionary pass cost a card ~1 us per attribute)."""
    data = value.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
    if "\n" in data or "\r" in data or "\t" in data:
        data = data.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' in data:
        if "'" not in data:
            return f" {name}='{data}'"
        data = data.replace('"', "&quot;")
    return f' {name}="{data}"'


def element(tag: str, text: str) -> str:
    """``<tag>escaped text</tag>``."""
    return f"<{tag}>{xml_text(text)}</{tag}>"


def format_record(
    record: Record,
    linked: Sequence[LinkedResult] = (),
    *,
    show_ids: bool = True,
    show_status: bool = True,
) -> str:
    """Render one record as ``<type>…</type>`` with id, timestamp, role, status, content and
    its linked records."""
    parts = []
    if show_ids:
        parts.append(element("record_id", record.record_id))
    parts.append(element("timestamp", record.timestamp.isoformat(timespec="seconds")))
    if record.role:
        parts.append(element("role", record.role))
    if name := speaker_name(record):
        parts.append(element("name", name))
    if show_status:
        parts.append(element("status", record.status.value))
        reason = internal_metadata(record).get("invalidation_reason")
        if reason:
            parts.append(element("invalidation_reason", str(reason)))
    parts.append(element("content", record.content))
    if linked:
        inner = "".join(
            f"<linked_record>{element('relation_type', item.relation)}"
            f"{format_record(item.record, show_ids=show_ids, show_status=show_status)}</linked_record>"
            for item in linked
        )
        parts.append(f"<linked_records>{inner}</linked_records>")
    tag = record.record_type.value
    return f"<{tag}>{''.join(parts)}</{tag}>"
