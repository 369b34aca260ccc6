"""The Jinja2 card renderer: the default template matches the built-in XML card, a custom template
changes the layout without code, bad templates fail at start-up with a typed error, and the
shared renderer checks (escaping, empty card, budgets) hold."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from agentmemory_conformance import RendererConformance
from agentmemory_conformance.plugin_suite import SLOTS, _parts
from agentmemory_jinja_card import TemplateCardRenderer, TemplateError
from markupsafe import Markup

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.card_model import CardParts
from agentmemory.plugins import PluginManager
from agentmemory.renderers import XmlCardRenderer

MARKDOWN = """\
# What I know
{% for r in relevant %}
- [{{ r.type }}] {{ r.content }}
{% endfor %}
{% if summary %}Summary: {{ summary }}{% endif %}
"""


def test_default_template_renders_the_builtin_xml_card() -> None:
    parts = _parts({s: f"text <{s}> & more" for s in SLOTS})
    assert TemplateCardRenderer()(parts) == XmlCardRenderer()(parts)
    record = parts.relevant[3].record
    assert TemplateCardRenderer().item(record) == XmlCardRenderer().item(record)


def test_a_custom_template_changes_the_layout_and_still_escapes() -> None:
    parts = CardParts(summary="Maya & the </context_card>", relevant=_parts({s: "x" for s in SLOTS}).relevant[:1])
    out = TemplateCardRenderer(MARKDOWN)(parts)
    assert out == "# What I know\n- [preference] x\nSummary: Maya &amp; the &lt;/context_card&gt;"


def test_template_from_a_file_and_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "card.j2"
    path.write_text("Summary: {{ summary }}", encoding="utf-8")
    assert TemplateCardRenderer.from_file(path)(CardParts(summary="hi")) == "Summary: hi"
    monkeypatch.setenv("AGENTMEMORY_CARD_TEMPLATE", str(path))
    assert TemplateCardRenderer()(CardParts(summary="env")) == "Summary: env"
    with pytest.raises(TemplateError, match="cannot read"):
        TemplateCardRenderer.from_file(tmp_path / "missing.j2")


@pytest.mark.parametrize(("template", "message"), [
    ("{% for r in relevant %}", "syntax error on line 1"),
    ("{{ summary }}\n{{ sumary }}", "variable the card does not have"),
    ("{{ summary|safe }}", "'safe' filter"),
    ("{% autoescape false %}{{ summary }}{% endautoescape %}", "autoescaping cannot be switched off"),
    ("   ", "non-empty"),
    ("{{ summary.__class__.__mro__ }}", "sample card|variable"),
])
def test_bad_templates_fail_at_start_up_with_a_typed_error(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as info:
        TemplateCardRenderer(template)
    assert isinstance(info.value, InvalidArgument) and info.value.argument == "template"


def test_markup_objects_cannot_bypass_escaping() -> None:
    """Even a value that claims to be safe markup is escaped (``safe`` is gone)."""
    with pytest.raises(TemplateError):
        TemplateCardRenderer("{{ summary|safe }}")
    out = TemplateCardRenderer("{{ summary|e }}")(CardParts(summary="<b>"))
    assert out == "&lt;b&gt;"
    out = TemplateCardRenderer("{{ summary }}")(CardParts(summary=Markup("<b>")))
    assert out == "&lt;b&gt;"


def test_used_by_name_through_the_entry_point() -> None:
    eps = [ep for ep in importlib.metadata.entry_points(group="agentmemory") if ep.name == "jinja_card"]
    assert eps and eps[0].value == "agentmemory_jinja_card.plugin"
    with AgentMemory("memory://", embedder=HashingEmbedder(64), plugin_manager=PluginManager(), card_renderer="jinja",
                     memory_extraction_config={"enable_context_summary": False}) as client:
        thread = client.create_thread(user_id="u1")
        thread.add_messages([{"role": "user", "content": "My name is Maya </context_card>"}])
        card = thread.get_context_card(max_recent_messages=1)
        assert card.content.startswith("<context_card>") and card.content.count("</context_card>") == 1
        assert "Maya &lt;/context_card&gt;" in card.content


class TestConformance(RendererConformance):
    def make_renderer(self) -> TemplateCardRenderer:
        return TemplateCardRenderer()


class TestConformanceCustomTemplate(RendererConformance):
    """A team's own layout passes the same checks."""

    def make_renderer(self) -> TemplateCardRenderer:
        return TemplateCardRenderer(
            "## Memory\n{% for t in topics %}#{{ t }} {% endfor %}\n{{ summary }}\n{% for r in relevant %}{{ item(r) }}\n{% endfor %}"
            "{% for m in recent_messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
            item_template="* {{ type }}: {{ content }}",
        )
