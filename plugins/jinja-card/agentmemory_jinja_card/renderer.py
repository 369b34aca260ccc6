"""``TemplateCardRenderer``: a context-card renderer driven by a Jinja2 template.

The card's guarantees hold whatever the template says:

* **every inserted string is escaped**: autoescaping is always on; the ``safe`` filter is
  removed and ``{% autoescape false %}`` blocks are refused, so a template cannot turn it off;
  the sandbox keeps templates away from Python internals;
* **an empty card is the empty string** (the template is not even run);
* **budgets hold**: ``get_context_card(token_budget=...)`` measures this renderer's own output,
  so a verbose template simply fits fewer results;
* **the template is checked when the renderer is built**: a syntax error, a forbidden construct or
  a variable the card does not have (``StrictUndefined``) is a ``TemplateError`` naming the line,
  not a failure in the middle of a conversation.

Variables: ``topics`` (list of str), ``summary`` (str), ``relevant`` and ``recent_messages``
(lists of items with ``type``, ``content``, ``role`` (or None), ``status``, ``date``
(``YYYY-MM-DD``), ``timestamp`` (ISO 8601), ``record_id``, ``score`` (relevant only)), and
``relevant_by_date``: the relevant items as a timeline, a list of ``{date, records}`` oldest first
(``agentmemory.renderers.by_date``), which the default layout uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agentmemory import InvalidArgument, Record, SearchResult
from agentmemory.card_model import CardParts
from agentmemory.renderers import by_date

TEMPLATE_ENV = "AGENTMEMORY_CARD_TEMPLATE"

DEFAULT_ITEM_TEMPLATE = (
    '<{{ type }} date="{{ date }}"{% if role %} role="{{ role }}"{% endif %}'
    '{% if status != "valid" %} status="{{ status }}"{% endif %}>{{ content }}</{{ type }}>'
)
"""One relevant record (also what token budgets count per result)."""

DEFAULT_TEMPLATE = """\
<context_card>
{% if topics %}  <topics>{% for t in topics %}<topic>{{ t }}</topic>{% endfor %}</topics>
{% endif %}
{% if summary %}  <summary>{{ summary }}</summary>
{% endif %}
{% if relevant %}  <relevant_information>
{% for day in relevant_by_date %}{% for r in day.records %}<{{ r.type }}{% if loop.first %} date="{{ day.date }}"{% endif %}{% if r.role %} role="{{ r.role }}"{% endif %}{% if r.status != "valid" %} status="{{ r.status }}"{% endif %}>{{ r.content }}</{{ r.type }}>
{% endfor %}{% endfor %}  </relevant_information>
{% endif %}
{% if recent_messages %}  <recent_messages>
{% for m in recent_messages %}    <message><timestamp>{{ m.date }}</timestamp>{% if m.role %}<role>{{ m.role }}</role>{% endif %}<content>{{ m.content }}</content></message>
{% endfor %}  </recent_messages>
{% endif %}
</context_card>"""
"""The card as the built-in XML renderer lays it out (SPEC §6)."""


class TemplateError(InvalidArgument):
    """The card template is invalid: a syntax error, a forbidden construct (``safe``,
    ``{% autoescape false %}``) or a variable the card does not provide."""


def _item_vars(record: Record, score: float | None = None) -> dict[str, Any]:
    return {
        "type": record.record_type.value,
        "content": record.content,
        "role": record.role,
        "status": record.status.value,
        "date": record.timestamp.date().isoformat(),
        "timestamp": record.timestamp.isoformat(),
        "record_id": record.record_id,
        "score": score,
    }


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                        lstrip_blocks=True, keep_trailing_newline=False)
    env.filters.pop("safe", None)  # autoescaping cannot be switched off per value
    return env


class TemplateCardRenderer:
    """A card renderer from a Jinja2 ``template`` (source text; ``from_file`` reads one) and an
    ``item_template`` for one relevant record; the item template is available to the card
    template as ``item(r)``. With no template, ``AGENTMEMORY_CARD_TEMPLATE`` (a file path) or
    the built-in XML-like layout."""

    name = "jinja"

    def __init__(self, template: str | None = None, *, item_template: str | None = None, globals: Mapping[str, Any] | None = None) -> None:
        if template is None:
            path = os.environ.get(TEMPLATE_ENV)
            template = _read(Path(path), "template") if path else DEFAULT_TEMPLATE
        self._env = _environment()
        self._env.globals.update(dict(globals or {}))
        self._item = self._compile("item_template", DEFAULT_ITEM_TEMPLATE if item_template is None else item_template)
        self._card = self._compile("template", template)
        self._env.globals["item"] = self._render_item_vars
        self._check()

    @classmethod
    def from_file(cls, path: str | Path, *, item_template: str | Path | None = None) -> TemplateCardRenderer:
        """A renderer from template files (UTF-8)."""
        item = _read(Path(item_template), "item_template") if item_template is not None else None
        return cls(_read(Path(path), "template"), item_template=item)

    def _compile(self, argument: str, source: str) -> jinja2.Template:
        if not isinstance(source, str) or not source.strip():
            raise TemplateError(argument, "must be a non-empty Jinja2 template string")
        try:
            tree = self._env.parse(source)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(argument, f"syntax error on line {exc.lineno}: {exc.message}") from None
        for modifier in tree.find_all((nodes.ScopedEvalContextModifier, nodes.EvalContextModifier)):
            raise TemplateError(argument, f"line {modifier.lineno}: autoescaping cannot be switched off in a card template")
        for used in tree.find_all(nodes.Filter):
            if used.name == "safe":
                raise TemplateError(argument, f"line {used.lineno}: the 'safe' filter is not allowed (every inserted string is escaped)")
        return self._env.from_string(tree)

    def _check(self) -> None:
        """Render a full sample card, so an unknown variable fails now, not mid-conversation."""
        from datetime import datetime, timezone

        at = datetime(2024, 1, 1, tzinfo=timezone.utc)
        from agentmemory import RecordType

        msg = Record(record_id="@check", record_type=RecordType.MESSAGE, content="sample", role="user", timestamp=at, created_at=at)
        fact = msg.model_copy(update={"record_type": RecordType.FACT, "role": None})
        sample = CardParts(topics=("sample",), summary="sample", recent_messages=(msg,),
                           relevant=(SearchResult(record=fact, distance=0.0, score=1.0, formatted_content=""),
                                     SearchResult(record=msg, distance=0.1, score=0.9, formatted_content="")))
        for argument, run in (("item_template", lambda: self.item(fact)), ("template", lambda: self(sample))):
            try:
                run()
            except jinja2.UndefinedError as exc:
                raise TemplateError(argument, f"uses a variable the card does not have: {exc.message}") from None
            except jinja2.TemplateError as exc:
                raise TemplateError(argument, f"fails on a sample card: {exc}") from None

    def _render_item_vars(self, variables: Mapping[str, Any]) -> Any:
        from markupsafe import Markup

        # the item's own output is already escaped text: mark it so the card does not escape it twice
        return Markup(self._item.render(**variables).strip())

    def item(self, record: Record) -> str:
        """One relevant record as the card shows it (used for token budgets too)."""
        return self._item.render(**_item_vars(record)).strip()

    def __call__(self, parts: CardParts) -> str:
        if parts.is_empty():
            return ""
        scores = {r.record.record_id: r.score for r in parts.relevant}
        return self._card.render(
            topics=list(parts.topics),
            summary=parts.summary,
            relevant=[_item_vars(r.record, r.score) for r in parts.relevant],
            relevant_by_date=[
                {"date": day, "records": [_item_vars(r, scores[r.record_id]) for r in records]}
                for day, records in by_date([r.record for r in parts.relevant])
            ],
            recent_messages=[_item_vars(m) for m in parts.recent_messages],
        ).strip()


def _read(path: Path, argument: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TemplateError(argument, f"cannot read template file {str(path)!r}: {exc}") from None
