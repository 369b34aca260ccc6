"""agentmemory-jinja-card: the context card laid out by a Jinja2 template, so a team changes the
card's format without code. Autoescaped, sandboxed, checked when the renderer is built.

Import-light: the names below load Jinja2 only when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DEFAULT_ITEM_TEMPLATE", "DEFAULT_TEMPLATE", "TemplateCardRenderer", "TemplateError"]

if TYPE_CHECKING:
    from .renderer import DEFAULT_ITEM_TEMPLATE, DEFAULT_TEMPLATE, TemplateCardRenderer, TemplateError


def __getattr__(name: str) -> Any:
    """Import the renderer module on first use of a public name."""
    if name not in __all__:
        raise AttributeError(f"module 'agentmemory_jinja_card' has no attribute {name!r}")
    from . import renderer

    return getattr(renderer, name)
