"""LLMs: the ``Llm`` interface, an OpenAI-compatible HTTP client (no vendor SDK), and ``as_llm``
(any LangChain chat model becomes an ``Llm``; see ``agentmemory.integrations.langchain``)."""

from .base import Llm, LlmResult, as_llm
from .http import OpenAICompatibleLlm

__all__ = ["Llm", "LlmResult", "OpenAICompatibleLlm", "as_llm"]
