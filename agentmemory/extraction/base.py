"""The ``Extractor`` interface, and structured LLM calls with validation and retries."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..effects import Call, Op
from ..errors import InvalidArgument, ModelError
from ..llm.http import InvalidJsonAnswer, parse_json_text
from .models import MAX_MEMORIES, ExtractionContext, ExtractionOutput, MemoryCandidate, json_schema

M = TypeVar("M", bound=BaseModel)


class Extractor:
    """Turns new messages (plus context) into typed memory candidates.

    Implement ``extract`` (and ``aextract`` for native async); the pipeline calls
    ``extract_op``, which extractors built on effects (like the LLM extractor) override so one
    implementation serves both the sync and the async API.
    """

    name = "extractor"
    uses_llm = False
    reads_summary = True
    """Whether ``extract`` reads ``context.summary`` (an extractor that never does spares the
    turn a read of the stored summary)."""

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        """Return the memories found in ``context.messages`` (new ones marked)."""
        raise NotImplementedError

    async def aextract(self, context: ExtractionContext) -> ExtractionOutput:
        """Async ``extract`` (a worker thread unless overridden)."""
        return await asyncio.to_thread(self.extract, context)

    def extract_op(self, context: ExtractionContext) -> Op[ExtractionOutput]:
        """The extraction as an effect generator."""
        output: ExtractionOutput = yield Call(self, "extract", (context,))
        return output

    def chain_op(self, context: ExtractionContext) -> Op[ExtractionOutput]:
        """This extractor's step in a chain (``AgentMemory(extractor=[...])``): the candidates
        found so far (``context.candidates``) followed by this extractor's own, less those whose
        content an earlier candidate already has (case and spacing ignored). Override it to
        revise earlier candidates instead (the dates plugin annotates them with the dates it
        resolves)."""
        output: ExtractionOutput = yield from self.extract_op(context)
        return ExtractionOutput(memories=merge_candidates(context.candidates, output.memories), summary=output.summary)


def candidate_key(candidate: MemoryCandidate) -> str:
    """What makes two candidates the same memory: their content, case and spacing ignored."""
    return " ".join(candidate.content.lower().split())


def merge_candidates(first: Sequence[MemoryCandidate], then: Sequence[MemoryCandidate]) -> list[MemoryCandidate]:
    """``first`` followed by the candidates of ``then`` whose content is new (first one wins),
    at most ``MAX_MEMORIES``."""
    seen: set[str] = set()
    out: list[MemoryCandidate] = []
    for cand in [*first, *then]:
        key = candidate_key(cand)
        if key not in seen:
            seen.add(key)
            out.append(cand)
    return out[:MAX_MEMORIES]


class ExtractorChain(Extractor):
    """Several extractors run in order over the same messages, each through its ``chain_op``:
    extractor *i* sees what extractors 1..i-1 found in ``context.candidates``; the last one's
    answer is what gets written. With the default ``chain_op`` that is every extractor's
    candidates, earlier extractors first, duplicates dropped. A due summary update
    (``context.update_summary``) is offered to each extractor until one returns it."""

    def __init__(self, extractors: Sequence[Extractor]) -> None:
        if not extractors:
            raise InvalidArgument("extractor", "an extractor chain needs at least one extractor")
        self.extractors = tuple(extractors)
        self.name = "+".join(e.name for e in self.extractors)
        self.uses_llm = any(e.uses_llm for e in self.extractors)
        self.reads_summary = any(e.reads_summary for e in self.extractors)

    def extract_op(self, context: ExtractionContext) -> Op[ExtractionOutput]:
        candidates: tuple[MemoryCandidate, ...] = context.candidates
        summary = None
        for extractor in self.extractors:
            step = replace(context, candidates=candidates, update_summary=context.update_summary and summary is None)
            output: ExtractionOutput = yield from extractor.chain_op(step)
            candidates = tuple(output.memories)
            summary = summary or (output.summary if step.update_summary else None)
        return ExtractionOutput(memories=list(candidates)[:MAX_MEMORIES], summary=summary)

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        from ..effects import run_sync

        return run_sync(self.extract_op(context))


def structured_op(llm: Any, messages: list[dict[str, str]], model: type[M], attempts: int = 3) -> Op[M]:
    """Ask ``llm`` for JSON matching ``model``; on invalid output, show the model its error and
    retry; after ``attempts`` raise ``ModelError`` (nothing is written from invalid output)."""
    schema = json_schema(model)
    conversation = list(messages)
    problem = ""
    for _ in range(attempts):
        answer = ""
        try:
            result = yield Call(llm, "generate", (conversation,), {"response_json_schema": schema})
            answer = result.text
            data = result.json if result.json is not None else parse_json_text(result.text)
            return model.model_validate(data)
        except InvalidJsonAnswer as exc:  # other ModelErrors (HTTP, timeouts) are not retried here
            answer, problem = exc.text, str(exc)[:1000]
        except ValidationError as exc:
            problem = str(exc)[:1000]
        conversation = [
            *messages,
            {"role": "assistant", "content": answer[:4000]},
            {"role": "user", "content": f"That answer was invalid: {problem}\nAnswer again with JSON that matches the schema exactly."},
        ]
    raise ModelError(f"{model.__name__}: no valid answer after {attempts} attempts: {problem}")
