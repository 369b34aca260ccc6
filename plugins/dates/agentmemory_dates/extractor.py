"""``DatesExtractor``: relative time expressions resolved to absolute dates.

A curated English pattern finds the expressions (so "may" or "march on" are never taken for
dates); dateparser resolves each against the timestamp of the message it appears in, in the
extractor's time zone. Every memory it writes or annotates carries the dates in its metadata
(``dates``: ``2024-05-09`` for a day or week, ``2024-06`` for a month, ``2024`` for a year;
``months``: every ``YYYY-MM`` touched, so ``metadata_filter={"months": {"$array_contains":
"2024-05"}}`` finds them) and in its text ("yesterday (9 May 2024)"), where retrieval by date
needs it.

In a chain (``AgentMemory(extractor=[None, "dates"])``) it first annotates the candidates of
the extractors before it, then adds a dated memory only for sentences whose expressions none of
them covered, so it adds to the built-in extractor instead of replacing it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentmemory import InvalidArgument, Record
from agentmemory.extraction.base import Extractor, candidate_key, merge_candidates
from agentmemory.extraction.models import MAX_MEMORY_CHARS, ExtractionContext, ExtractionOutput, MemoryCandidate

if TYPE_CHECKING:
    from agentmemory.effects import Op

_NUMBER = r"(?:\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a\s+few|several)"
_UNIT = r"(?:day|week|month|year)s?"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
EXPRESSION = re.compile(
    rf"""\b(?:
        (?:the\s+)?day\s+(?:before\s+yesterday|after\s+tomorrow)
      | yesterday | today | tonight | tomorrow
      | (?:last|next|this|coming|past)\s+(?:{_WEEKDAY}|week|month|year)
      | {_NUMBER}\s+{_UNIT}\s+(?:ago|from\s+now|later|earlier)
      | in\s+{_NUMBER}\s+{_UNIT}
    )(?![\w-])""",
    re.IGNORECASE | re.VERBOSE,
)
"""The relative expressions recognised (English)."""
_FUTURE = re.compile(r"\b(?:next|coming|in|from\s+now|later|tomorrow|after)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class ResolvedDate:
    """One expression and the date it means: ``period`` is day, week, month or year."""

    expression: str
    start: int
    end: int
    day: date
    period: str

    @property
    def iso(self) -> str:
        """``2024-05-09`` (day, week), ``2024-06`` (month) or ``2024`` (year)."""
        if self.period == "month":
            return f"{self.day:%Y-%m}"
        if self.period == "year":
            return f"{self.day:%Y}"
        return self.day.isoformat()

    @property
    def readable(self) -> str:
        """``9 May 2024``, ``June 2024`` or ``2023``: the form put into memory text."""
        if self.period == "month":
            return f"{self.day:%B %Y}"
        if self.period == "year":
            return f"{self.day:%Y}"
        return f"{self.day.day} {self.day:%B %Y}"


def find_dates(text: str, at: datetime, zone: tzinfo | None = None) -> list[ResolvedDate]:
    """The relative expressions in ``text`` resolved against the instant ``at`` (seen in
    ``zone``, default ``at``'s own offset). Expressions dateparser cannot resolve are left out."""
    from dateparser.date import DateDataParser

    local = at.astimezone(zone) if zone is not None else at
    base = local.replace(tzinfo=None)
    found = []
    for match in EXPRESSION.finditer(text):
        expression = match.group(0)
        prefer = "future" if _FUTURE.search(expression) else "past"
        parser = DateDataParser(languages=["en"], settings={"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "RETURN_AS_TIMEZONE_AWARE": False})
        data = parser.get_date_data(" ".join(expression.split()))
        if data.date_obj is None:
            continue
        found.append(ResolvedDate(expression, match.start(), match.end(), data.date_obj.date(), data.period or "day"))
    return found


def annotate(text: str, dates: Sequence[ResolvedDate]) -> str:
    """``text`` with each expression followed by its date: "yesterday (9 May 2024)"; an
    expression already followed by a parenthesis is left as it is."""
    out, last = [], 0
    for d in dates:
        out.append(text[last : d.end])
        if not text[d.end :].lstrip().startswith("("):
            out.append(f" ({d.readable})")
        last = d.end
    out.append(text[last:])
    return "".join(out)


def date_metadata(dates: Iterable[ResolvedDate], existing: dict[str, Any] | None = None) -> dict[str, Any]:
    """``existing`` plus ``dates`` (ISO, by granularity) and ``months`` (``YYYY-MM``), sorted."""
    meta = dict(existing or {})
    dates = list(dates)
    meta["dates"] = sorted(set(meta.get("dates") or []) | {d.iso for d in dates})
    meta["months"] = sorted(set(meta.get("months") or []) | {f"{d.day:%Y-%m}" for d in dates})
    return meta


class DatesExtractor(Extractor):
    """Writes one dated ``memory`` per sentence with a relative time expression ("User on 10 May
    2024: I went to the dentist yesterday (9 May 2024).") and, in a chain, dates the earlier
    extractors' candidates. ``timezone``: the IANA zone the conversation's days are counted in;
    ``roles``: whose messages are read."""

    name = "dates"
    uses_llm = False

    def __init__(self, timezone: str = "UTC", roles: Sequence[str] = ("user", "assistant")) -> None:
        try:
            self.zone: tzinfo = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise InvalidArgument("timezone", f"must be an IANA time zone name such as 'Europe/Paris', got {timezone!r}") from None
        if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
            raise InvalidArgument("roles", f"must be a sequence of role names, got {roles!r}")
        self.roles = tuple(roles)

    def _new_messages(self, context: ExtractionContext) -> list[Record]:
        return [m for m in context.messages if m.record_id in context.new_message_ids and (m.role or "") in self.roles]

    def _dated_sentences(self, context: ExtractionContext, skip: set[str]) -> list[MemoryCandidate]:
        out = []
        for message in self._new_messages(context):
            for sentence in _SENTENCE.split(message.content):
                dates = find_dates(sentence, message.timestamp, self.zone)
                if not dates or {d.expression.lower() for d in dates} <= skip:
                    continue
                said = message.timestamp.astimezone(self.zone)
                speaker = (message.role or "someone").capitalize()
                body = " ".join(annotate(sentence, dates).split())
                content = f"{speaker} on {said.day} {said:%B %Y}: {body}"
                if len(content) > MAX_MEMORY_CHARS:
                    content = content[: MAX_MEMORY_CHARS - 1] + "…"
                out.append(MemoryCandidate(type="memory", content=content, metadata=date_metadata(dates)))
        return out

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        """Alone: one dated memory per sentence that holds a relative time expression. With
        earlier candidates (in a chain) they come first, dated (``compose``)."""
        return ExtractionOutput(memories=self.compose(context))

    def chain_op(self, context: ExtractionContext) -> Op[ExtractionOutput]:
        """In a chain: date the earlier candidates, then add sentences none of them covered
        (``extract`` as an effect, so the async API parses dates off the event loop)."""
        output: ExtractionOutput = yield from self.extract_op(context)
        return output

    def compose(self, context: ExtractionContext) -> list[MemoryCandidate]:
        """The earlier candidates, dated where they hold an expression, then new dated ones."""
        messages = self._new_messages(context)
        covered: set[str] = set()
        revised = []
        for cand in context.candidates:
            at = _source_time(cand.content, messages)
            dates = find_dates(cand.content, at, self.zone) if at is not None else []
            if not dates:
                revised.append(cand)
                continue
            covered |= {d.expression.lower() for d in dates}
            text = annotate(cand.content, dates)
            update: dict[str, Any] = {"metadata": date_metadata(dates, cand.metadata)}
            if len(text) <= MAX_MEMORY_CHARS:
                update["content"] = text
            revised.append(cand.model_copy(update=update))
        own = [c for c in self._dated_sentences(context, covered) if candidate_key(c) not in {candidate_key(r) for r in revised}]
        return merge_candidates(revised, own)


def _source_time(text: str, messages: Sequence[Record]) -> datetime | None:
    """The timestamp of the newest message that uses one of ``text``'s expressions (else the
    newest message): a candidate's "yesterday" means the day before the message that said it."""
    wanted = {m.group(0).lower() for m in EXPRESSION.finditer(text)}
    for message in reversed(messages):
        if wanted & {m.group(0).lower() for m in EXPRESSION.finditer(message.content)}:
            return message.timestamp
    return messages[-1].timestamp if messages else None
