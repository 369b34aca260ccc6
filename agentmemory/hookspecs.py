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
    """Register memory extractors: ``register(name, factory)``; ``factory()`` (or
    ``factory(llm=...)`` when the class sets ``uses_llm``) returns an
    ``agentmemory.extraction.base.Extractor`` that turns new messages (plus context) into valid
    ``MemoryCandidate``s, deterministically for the same LLM answers. In a chain
    (``AgentMemory(extractor=[...])``) its ``chain_op`` sees the earlier extractors' candidates
    and must not drop them."""


@hookspec
def agentmemory_register_card_renderers(register: Register) -> None:
    """Register context-card renderers: ``register(name, factory)``; ``factory()`` returns an
    object with ``__call__(parts: CardParts) -> str`` and ``item(record) -> str`` (one relevant
    record, also used for token budgets). It must escape every inserted string and return ""
    for an empty card."""


@hookspec
def agentmemory_register_token_counters(register: Register) -> None:
    """Register token counters: ``register(name, factory)``; ``factory()`` returns an
    ``agentmemory.tokens.TokenCounter`` (``count(text)``, ``truncate(text, budget)`` whose result
    counts at most ``budget``), or raises ``BackendUnavailable`` when it cannot load here. Every
    budget of a client that chose it (``AgentMemory(token_counter=name)``) counts with it."""


@hookspec
def agentmemory_register_llm_adapters(register: Register) -> None:
    """Register wrappers that turn another framework's chat models into LLMs:
    ``register(name, "pkg.mod:Wrapper", wraps="module:Class")``. ``AgentMemory(llm=value)``
    (``agentmemory.llm.as_llm``) calls ``Wrapper(value)`` when ``value`` is an instance of
    ``module.Class`` and not already an ``agentmemory.llm.Llm``. ``wraps`` is only looked up in
    modules already imported (an instance cannot exist otherwise), so an unused adapter costs no
    import."""


@hookspec
def agentmemory_register_embedder_adapters(register: Register) -> None:
    """Register wrappers that turn another framework's embedding models into embedders:
    ``register(name, "pkg.mod:Wrapper", wraps="module:Class")``, used by
    ``AgentMemory(embedder=value)`` (``agentmemory.embedders.as_embedder``) as
    ``agentmemory_register_llm_adapters`` is for LLMs."""


HOOK_KINDS: dict[str, str] = {
    "backends": "agentmemory_register_backends",
    "embedders": "agentmemory_register_embedders",
    "llms": "agentmemory_register_llms",
    "rerankers": "agentmemory_register_rerankers",
    "extractors": "agentmemory_register_extractors",
    "card_renderers": "agentmemory_register_card_renderers",
    "token_counters": "agentmemory_register_token_counters",
    "llm_adapters": "agentmemory_register_llm_adapters",
    "embedder_adapters": "agentmemory_register_embedder_adapters",
}
"""Registry kind → the hook that fills it."""


