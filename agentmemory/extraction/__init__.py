"""Extractors: what turns messages into memories (the LLM extractor, the offline rules, chains
of both), their prompts and their structured input and output models. The pipeline that runs
them after ``add_messages`` is ``agentmemory.operations.extraction``."""
