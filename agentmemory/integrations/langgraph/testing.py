"""A scripted LangChain chat model for offline examples and tests: it records every prompt it
receives, so a test can assert what reached the model after compaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Responder = Callable[[list[BaseMessage]], "AIMessage | str"]


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's ``GenericFakeChatModel`` plus a prompt log.

    Replies come from ``respond(prompt)`` when given, else from the ``messages`` iterator (as in
    ``GenericFakeChatModel``). ``prompts`` holds every list of messages the model was called with.
    ``bind_tools`` returns the model itself, so it works in ``create_agent(tools=[...])``; scripted
    ``AIMessage(tool_calls=...)`` replies drive the tool loop.
    """

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    respond: Responder | None = None
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        if self.respond is None:
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
        reply = self.respond(list(messages))
        message = AIMessage(content=reply) if isinstance(reply, str) else reply
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        """Tools are accepted and ignored: the script decides when to call them."""
        return self

    @property
    def last_prompt_text(self) -> str:
        """The text of every message of the latest prompt, joined (for assertions)."""
        if not self.prompts:
            return ""
        from .middleware import message_text

        return "\n".join(message_text(m) for m in self.prompts[-1])
