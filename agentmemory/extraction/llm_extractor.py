"""The LLM extractor: the production extractor, one structured call per extraction (links and a
due summary update included, as the settings ask)."""

from __future__ import annotations

from typing import Any

from ..effects import Op
from . import prompts
from .base import Extractor, structured_op
from .models import ExtractionContext, ExtractionOutput, ExtractionWithSummaryOutput


class LlmExtractor(Extractor):
    """Prompts the LLM with the window (untrusted), summary and past memories; parses the answer
    against ``ExtractionOutput``'s schema (``ExtractionWithSummaryOutput``'s when the context asks
    for a summary update) with retries."""

    name = "llm"
    uses_llm = True

    def __init__(self, llm: Any, attempts: int = 3) -> None:
        self.llm = llm
        self.attempts = attempts

    def extract_op(self, context: ExtractionContext) -> Op[ExtractionOutput]:
        messages = prompts.extraction_messages(
            context.messages,
            context.new_message_ids,
            context.past_memories,
            context.summary,
            context.custom_instructions,
            context.link_during_extraction,
            context.token_limit,
            link_custom_instructions=context.link_custom_instructions,
            update_summary=context.update_summary,
            counter=context.token_counter,
        )
        answer: ExtractionOutput | ExtractionWithSummaryOutput
        if context.update_summary:
            answer = yield from structured_op(self.llm, messages, ExtractionWithSummaryOutput, self.attempts)
        else:
            answer = yield from structured_op(self.llm, messages, ExtractionOutput, self.attempts)
        # metadata is for code (plugins), not for model output: an answer cannot set it
        memories = [c.model_copy(update={"metadata": {}}) if c.metadata else c for c in answer.memories]
        return ExtractionOutput(memories=memories, summary=answer.summary)

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        from ..effects import run_sync

        return run_sync(self.extract_op(context))
