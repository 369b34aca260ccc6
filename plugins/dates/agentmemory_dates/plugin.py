"""Entry-point plugin: registers the ``dates`` extractor by dotted path (imports nothing heavy)."""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_extractors(register: Register) -> None:
    """``dates``: absolute dates for relative time expressions; chain it after the default."""
    register(
        "dates",
        "agentmemory_dates.extractor:DatesExtractor",
        description="resolves 'yesterday', 'last Friday', 'two weeks ago' to dates (metadata + text); chain: extractor=[None, 'dates']",
        install_hint="pip install agentmemory-dates",
    )
