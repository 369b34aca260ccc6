"""The operations layer: every behaviour of ``AgentMemory`` and ``Thread``, one concept per
module, each operation an effect generator (``agentmemory.effects``) taking an explicit
``MemoryContext`` (and a ``ThreadScope`` where a thread is involved).

``context`` (the inputs), ``lookup`` (reading records), ``threads``, ``messages``, ``memories``,
``profiles``, ``links`` (and their lifecycle), ``retention`` (TTL, purge), ``search``,
``summary``, ``card``, ``extraction`` and ``background`` (the extraction worker).
"""
