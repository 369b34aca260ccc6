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

    @property
    def formatted_content(self) -> str:
        """Alias of ``content``."""
        return self.content

    def __str__(self) -> str:
        return self.content
