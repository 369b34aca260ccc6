"""Entry-point plugin: registers the ``http`` reranker by dotted path (imports nothing heavy)."""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_rerankers(register: Register) -> None:
    """``http``: a cross-encoder behind ``POST /rerank`` (configured by arguments or
    ``AGENTMEMORY_RERANK_*`` environment variables)."""
    register(
        "http",
        "agentmemory_rerank_http.reranker:HttpReranker",
        description="any rerank HTTP server: Cohere, Jina, Voyage, TEI, vLLM, Infinity",
        install_hint="pip install agentmemory-rerank-http",
    )
