"""The context card's data: what a renderer receives and what ``get_context_card`` returns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .records import Record, SearchResult


class CardParts(BaseModel):
    """Everything a card holds before rendering."""

    model_config = ConfigDict(frozen=True)

    topics: tuple[str, ...] = ()
    summary: str = ""
    relevant: tuple[SearchResult, ...] = ()
    recent_messages: tuple[Record, ...] = ()

    def is_empty(self) -> bool:
        """True when there is nothing to render."""
        return not (self.topics or self.summary.strip() or self.relevant or self.recent_messages)


class ContextCard(CardParts):
    """A rendered context card; ``content`` is the prompt text ("" for an empty card)."""

    content: str = ""
    tokens: int = 0
    """How many tokens ``content`` is, in the client's token counter (``token_counter``)."""
    token_counter: str = "estimate"
    """The name of the counter ``tokens`` and every budget of this card were counted with."""
    transcript_tokens: int | None = None
    """Tokens of the transcript this card stands for (its messages as ``speaker: text`` lines,
    the same counter), when the card read the whole thread; None for a longer thread."""
    is_transcript: bool = False
    """True when ``content`` is that transcript itself, not a card (``short_thread="transcript"``
    on a thread shorter than a card's overhead)."""
    note: str = ""
    """Said to the caller, never to the model: why this card is larger than its transcript."""

    @property
    def larger_than_transcript(self) -> bool:
        """Whether the card costs more tokens than the transcript it stands for."""
        return self.transcript_tokens is not None and self.tokens > self.transcript_tokens

    @property
    def formatted_content(self) -> str:
        """Alias of ``content``."""
        return self.content

    def __str__(self) -> str:
        return self.content
