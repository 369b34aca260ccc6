"""Context-card renderers: the XML-like default and Markdown. A renderer is a callable
``(parts: CardParts) -> str`` that must escape every inserted string and return "" for an
empty card."""

from __future__ import annotations

from collections.abc import Sequence

from .card_model import CardParts
from .formatting import attribute, element, xml_text
from .index_text import speaker_label, speaker_name
from .records import Record


def _item_xml(record: Record) -> str:
    """A recent message as SPEC §6 shows it: timestamp, role and content as child elements."""
    inner = element("timestamp", record.timestamp.date().isoformat())
    if record.role:
        inner += element("role", record.role)
    if name := speaker_name(record):
        inner += element("name", name)
    if record.status.value != "valid":
        inner += element("status", record.status.value)
    inner += element("content", record.content)
    return f"<{record.record_type.value}>{inner}</{record.record_type.value}>"


def _relevant_xml(record: Record, *, dated: bool = True) -> str:
    """A relevant record with its date (unless the record before it has the same one), its
    speaker (``name`` when the caller named one, else ``role``: one attribute, so a named chat
    costs no more markup than an unnamed one) and (non-valid) status as attributes."""
    attrs = attribute("date", record.timestamp.date().isoformat()) if dated else ""
    if name := speaker_name(record):
        attrs += attribute("name", name)
    elif record.role:
        attrs += attribute("role", record.role)
    if record.status.value != "valid":
        attrs += attribute("status", record.status.value)
    tag = record.record_type.value
    return f"<{tag}{attrs}>{xml_text(record.content)}</{tag}>"


def by_date(records: Sequence[Record]) -> list[tuple[str, list[Record]]]:
    """``records`` as a timeline: oldest first (records at the same instant keep their order),
    grouped by ISO date. Renderers write each date once, so a budget holds more records."""
    groups: dict[str, list[Record]] = {}
    for record in sorted(records, key=lambda r: r.timestamp):
        groups.setdefault(record.timestamp.date().isoformat(), []).append(record)
    return list(groups.items())


class XmlCardRenderer:
    """``<context_card>`` with topics, summary, relevant_information and recent_messages. The
    relevant records are typed elements (``<fact>``, ``<message role="user">``, …) in date
    order; each carries ``date`` where it differs from the record before it, so a reader takes
    a record's date from the nearest ``date`` at or above it."""

    name = "xml"

    def item(self, record: Record) -> str:
        """One relevant record as rendered inside the card (used for token budgets too)."""
        return _relevant_xml(record)

    def __call__(self, parts: CardParts) -> str:
        if parts.is_empty():
            return ""
        out = ["<context_card>"]
        if parts.topics:
            out.append("  <topics>" + "".join(f"<topic>{xml_text(t)}</topic>" for t in parts.topics) + "</topics>")
        if parts.summary:
            out.append(f"  <summary>{xml_text(parts.summary)}</summary>")
        if parts.relevant:
            # a timeline, oldest first; a record's date is written only where it changes (an
            # ``<on date>`` element per day cost 14 cl100k tokens a day, the attribute 7)
            out.append("  <relevant_information>")
            for _day, records in by_date([r.record for r in parts.relevant]):
                out.extend(_relevant_xml(r, dated=i == 0) for i, r in enumerate(records))
            out.append("  </relevant_information>")
        if parts.recent_messages:
            out.append("  <recent_messages>")
            out.extend(f"    {_item_xml(m)}" for m in parts.recent_messages)
            out.append("  </recent_messages>")
        out.append("</context_card>")
        return "\n".join(out)


def _md(text: str) -> str:
    """Neutralise Markdown/HTML structure in inserted text (one line, escaped markup)."""
    flat = " ".join(text.split())
    for ch in "\\`*_#[]<>|":
        flat = flat.replace(ch, "\\" + ch)
    return flat


class MarkdownCardRenderer:
    """A Markdown card for models that follow headings better than tags."""

    name = "markdown"

    def item(self, record: Record) -> str:
        """One relevant record as a bullet."""
        who = speaker_label(record)
        role = f" ({_md(who)})" if who else ""
        return f"- **{record.record_type.value}**{role}: {_md(record.content)}"

    def __call__(self, parts: CardParts) -> str:
        if parts.is_empty():
            return ""
        out = ["## Context card"]
        if parts.topics:
            out.append("### Topics\n" + ", ".join(_md(t) for t in parts.topics))
        if parts.summary:
            out.append("### Summary\n" + _md(parts.summary))
        if parts.relevant:
            lines = []
            for day, records in by_date([r.record for r in parts.relevant]):
                lines.append(f"{day}:")
                lines.extend(self.item(r) for r in records)
            out.append("### Relevant information\n" + "\n".join(lines))
        if parts.recent_messages:
            out.append("### Recent messages\n" + "\n".join(f"- {_md(speaker_label(m) or '')}: {_md(m.content)}" for m in parts.recent_messages))
        return "\n\n".join(out)
