"""Integrations with agent frameworks, each in its own subpackage and behind its own extra.

Nothing here is imported by ``import agentmemory``: ``agentmemory.integrations.langgraph`` pulls
in ``langchain`` and ``langgraph`` only when it is imported itself
(``pip install "agentmemory[langgraph]"``).
"""
