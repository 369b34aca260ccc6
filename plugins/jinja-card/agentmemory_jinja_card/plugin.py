"""Entry-point plugin: registers the ``jinja`` card renderer by dotted path (imports nothing heavy)."""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_card_renderers(register: Register) -> None:
    """``jinja``: the card from a Jinja2 template (``AGENTMEMORY_CARD_TEMPLATE`` names a file,
    else the built-in template, which matches the default XML card's layout)."""
    register(
        "jinja",
        "agentmemory_jinja_card.renderer:TemplateCardRenderer",
        description="context card from a Jinja2 template (autoescaped, sandboxed, checked at start-up)",
        install_hint="pip install agentmemory-jinja-card",
    )
