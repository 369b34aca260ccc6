"""The ``Extractor`` interface, and structured LLM calls with validation and retries."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..effects import Call, Op
from ..errors import ModelError
from ..llm.http import InvalidJsonAnswer, parse_json_text
from .models import ExtractionContext, ExtractionOutput, json_schema

M = TypeVar("M", bound=BaseModel)


class Extractor:
    """Turns new messages (plus context) into typed memory candidates.

    Implement ``extract`` (and ``aextract`` for native async); the pipeline calls
    ``extract_op``, which extractors built on effects (like the LLM extractor) override so one
    implementation serves both the sync and the async API.
    """

    name = "extractor"
    uses_llm = False

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
