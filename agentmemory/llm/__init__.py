"""LLMs: the ``Llm`` interface and an OpenAI-compatible HTTP client (no vendor SDK)."""

from .base import Llm, LlmResult
from .http import OpenAICompatibleLlm

__all__ = ["Llm", "LlmResult", "OpenAICompatibleLlm"]
