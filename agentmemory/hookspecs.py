"""Hook specifications: the contract between agentmemory and its plugins.

Every hook is a ``register``-callback hook: the implementation calls
``register(name, target, **details)`` once per thing it provides. ``target`` is the object
itself or a lazy dotted path ``"package.module:attribute"`` imported only when first used, so
plugin modules stay import-light. Plugins are found through the ``agentmemory`` entry-point
group; the built-ins register through the same manager.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "agentmemory"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

Register = Callable[..., None]


@hookspec
def agentmemory_register_backends(register: Register) -> None:
    """Register storage backends: ``register(name, "pkg.mod:StoreClass", install_hint=...)``.

    The class subclasses ``agentmemory.spi.MemoryStore``; ``StoreClass.from_uri(uri)`` builds it
    from ``name://...`` and ``StoreClass(**options)`` from keyword options. ``install_hint`` is
    shown when the import fails.
    """


@hookspec
def agentmemory_register_embedders(register: Register) -> None:
    """Register embedders: ``register(name, factory)``; ``factory(**options)`` returns an
    ``agentmemory.embedders.Embedder``."""


@hookspec
def agentmemory_register_llms(register: Register) -> None:
    """Register LLM clients: ``register(name, factory)``; ``factory(**options)`` returns an
    object with ``generate(messages, response_json_schema=None)``."""


@hookspec
def agentmemory_register_rerankers(register: Register) -> None:
    """Register rerankers: ``register(name, factory)``; ``factory(**options)`` returns a callable
    ``(query: str, results: list[SearchResult]) -> list[SearchResult]`` that reorders (and may
    drop) results. It must not invent results."""


@hookspec
def agentmemory_register_extractors(register: Register) -> None:
    """Register memory extractors: ``register(name, factory)``; the extractor turns new messages
    (plus context) into typed memory candidates (see ``agentmemory.extraction``)."""


@hookspec
def agentmemory_register_card_renderers(register: Register) -> None:
    """Register context-card renderers: ``register(name, factory)``; the renderer turns the
    card's parts into prompt text and must escape every inserted string."""


HOOK_KINDS: dict[str, str] = {
    "backends": "agentmemory_register_backends",
    "embedders": "agentmemory_register_embedders",
    "llms": "agentmemory_register_llms",
    "rerankers": "agentmemory_register_rerankers",
    "extractors": "agentmemory_register_extractors",
    "card_renderers": "agentmemory_register_card_renderers",
}
"""Registry kind → the hook that fills it."""


