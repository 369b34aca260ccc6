"""LangGraph and LangChain integration (``pip install "agentmemory[langgraph]"``).

- ``AgentMemoryMiddleware``: short-term memory for ``langchain.agents.create_agent`` — persists
  the turns in an agentmemory thread and compacts the prompt into one context card plus a raw
  tail when it grows past a trigger.
- ``AgentMemoryStore``: LangGraph's ``BaseStore`` (long-term memory: ``put``/``get``/``search``/
  ``list_namespaces``, TTL, sync and async) over any agentmemory backend.
"""

from __future__ import annotations

from .middleware import CARD_MESSAGE_NAME, AgentMemoryMiddleware, message_text
from .store import AgentMemoryStore

__all__ = ["CARD_MESSAGE_NAME", "AgentMemoryMiddleware", "AgentMemoryStore", "message_text"]
