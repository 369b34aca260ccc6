"""Token budgets: None is no budget, 0 an empty one, a negative one an error (search, card, summary)."""

from __future__ import annotations

import pytest

from agentmemory.errors import InvalidArgument

from .conftest import make_memory
from .test_card import say


def _thread():  # type: ignore[no-untyped-def]
    memory = make_memory()
    thread = memory.create_thread(thread_id="t", user_id="u")
    memory.add_memory("Maya's ledger enrichment step fails after reconciliation.", user_id="u", memory_type="fact")
    say(thread, "The ledger enrichment step fails.", "Which step exactly?", "Ledger enrichment, after reconciliation.", "Noted.")
    say(thread, "What fails in the ledger?")
    return thread


def test_an_empty_budget_holds_nothing_optional() -> None:
    thread = _thread()
    assert thread.search("ledger enrichment", max_results=5)
    assert thread.search("ledger enrichment", max_results=5, token_budget=0) == []
    empty = thread.get_context_card(token_budget=0)
    full = thread.get_context_card()
    assert empty.relevant == () and len(empty.content) < len(full.content)
    assert thread.get_summary(token_budget=0).content == ""


@pytest.mark.parametrize("call", ["search", "card", "summary"])
def test_a_negative_budget_is_an_error(call: str) -> None:
    thread = _thread()
    with pytest.raises(InvalidArgument, match="token_budget"):
        if call == "search":
            thread.search("ledger", token_budget=-1)
        elif call == "card":
            thread.get_context_card(token_budget=-5)
        else:
            thread.get_summary(token_budget=-1)
