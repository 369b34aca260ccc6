"""``BoundedMemo`` and the analyzer's remembered query terms (``Analyzer.term_set``)."""

from __future__ import annotations

from agentmemory.analysis import Analyzer
from agentmemory.memo import BoundedMemo


def test_a_memo_keeps_at_most_its_size_and_starts_over_when_full() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(3)
    assert memo.get("a") is None
    assert [memo.keep(k, i) for i, k in enumerate("abc")] == [0, 1, 2]
    assert (memo.get("a"), memo.get("c"), len(memo)) == (0, 2, 3)
    memo.keep("d", 3)  # full: emptied, then "d" kept
    assert (memo.get("a"), memo.get("d"), len(memo)) == (None, 3, 1)
    memo.clear()
    assert len(memo) == 0 and memo.get("d") is None


def test_term_set_is_the_query_terms_as_one_set_remembered() -> None:
    analyzer = Analyzer.for_language("english")
    text = "Which running shoes did Melanie buy, and the shoes' colour?"
    terms = analyzer.term_set(text)
    assert terms == set(analyzer.terms(text)) and "shoe" in terms and "the" not in terms
    assert analyzer.term_set(text) is terms  # the same set again: stores sum in one order
    assert list(terms) == list(set(analyzer.terms(text)))  # the order the reference summed in
    assert analyzer.term_set("the and of") == frozenset()
