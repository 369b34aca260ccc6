"""Precision and recall of the offline rule-based extractor on a hand-written, labelled chat
sample (``tests/data/rules_labelled_chat.json``: casual multi-party chat, customer support, coding
help, small talk; positives and tricky negatives), plus phrasings the benchmark generator never
produces.

A memory counts as correct when it has the labelled type, every gist word occurs in it (any
case), and it reads as a statement about the user in the third person (no "I/me/my/you/your/we"
outside a quoted instruction or report). Every other memory is a false positive.

Run ``pytest -s tests/test_rules_precision.py`` to see the figures and the misses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from agentmemory.extraction.models import ExtractionContext, MemoryCandidate
from agentmemory.extraction.rules import RuleBasedExtractor
from agentmemory.records import Record, RecordType

SAMPLE = Path(__file__).parent / "data" / "rules_labelled_chat.json"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
MIN_PRECISION = 0.9
MIN_RECALL = 0.5  # a floor against a silent extractor; the rules trade recall for precision
_QUOTED = ("User instruction:", "User reported", "User mentioned")
_WRONG_PERSON = re.compile(r"\b(?:i|i'm|i've|me|my|mine|myself|you|your|yours|we|us|our)\b", re.I)


def extract(text: str, role: str = "user") -> list[MemoryCandidate]:
    msg = Record(record_id="m", record_type=RecordType.MESSAGE, content=text, role=role, timestamp=NOW, created_at=NOW)
    return RuleBasedExtractor().extract(ExtractionContext(messages=[msg], new_message_ids=frozenset({"m"}))).memories


def reads_third_person(content: str) -> bool:
    """A memory about the user, not a quote of them (quoted instructions/reports are exempt)."""
    return content.startswith(_QUOTED) or not _WRONG_PERSON.search(content)


def gist_matches(gist: str, content: str) -> bool:
    return all(word.lower() in content.lower() for word in gist.split())


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    expected: int = 0
    found: int = 0
    false_positives: list[tuple[str, str]] = field(default_factory=list)
    misses: list[tuple[str, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0


def score(messages: list[dict[str, Any]]) -> Score:
    out = Score()
    for item in messages:
        expected = list(item["expected"])
        out.expected += len(expected)
        open_labels = list(expected)
        for memory in extract(item["text"], item["role"]):
            label = next((lb for lb in open_labels if lb["type"] == memory.type and gist_matches(lb["gist"], memory.content)), None)
            if label is not None and reads_third_person(memory.content):
                open_labels.remove(label)
                out.tp += 1
                out.found += 1
            else:
                out.fp += 1
                out.false_positives.append((item["text"], f"{memory.type}: {memory.content}"))
        out.misses.extend((item["text"], f"{lb['type']}: {lb['gist']}") for lb in open_labels)
    return out


def load() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(SAMPLE.read_text(encoding="utf-8"))["messages"]
    return data


def test_the_sample_is_large_varied_and_well_formed() -> None:
    messages = load()
    assert len(messages) >= 150
    assert {m["domain"] for m in messages} >= {"casual", "support", "coding", "smalltalk"}
    assert len({m["text"] for m in messages}) == len(messages)
    positives = [m for m in messages if m["expected"]]
    assert 50 <= len(positives) <= len(messages) - 80  # plenty of both positives and negatives
    for m in messages:
        assert m["role"] in {"user", "assistant"}
        assert all(lb["type"] in {"fact", "preference", "guideline", "memory"} and lb["gist"].strip() for lb in m["expected"])


def test_precision_and_recall_on_the_labelled_sample() -> None:
    result = score(load())
    print(f"\nrule extractor on {SAMPLE.name}: precision {result.precision:.3f} ({result.tp}/{result.tp + result.fp}), "
          f"recall {result.recall:.3f} ({result.found}/{result.expected})")
    for text, memory in result.false_positives:
        print(f"  false positive: {text!r} -> {memory!r}")
    for text, label in result.misses:
        print(f"  missed: {text!r} -> {label}")
    assert result.precision >= MIN_PRECISION, result.false_positives
    assert result.recall >= MIN_RECALL, result.misses


def test_every_memory_reads_as_a_third_person_statement() -> None:
    for item in load():
        for memory in extract(item["text"], item["role"]):
            assert reads_third_person(memory.content), (item["text"], memory.content)
            assert memory.content.rstrip(".").split()[-1].lower() not in {"a", "an", "the", "few", "some", "of", "to", "my", "their"}


# ---- phrasings the benchmark generator never produces -------------------------------------------
@pytest.mark.parametrize(("text", "kind", "content"), [
    ("I love camping with my family.", "preference", "The user loves camping with their family."),
    ("Honestly, I really enjoy baking sourdough on Sundays.", "preference", "The user enjoys baking sourdough on Sundays."),
    ("I can't stand horror movies.", "preference", "The user cannot stand horror movies."),
    ("I'm learning Haskell in my spare time.", "memory", "The user is learning Haskell in their spare time."),
    ("I'm building a shed with my dad this summer.", "memory", "The user is building a shed with their dad this summer."),
    ("My favorite band is Radiohead.", "preference", "The user's favorite band is Radiohead."),
    ("My shipping address is 12 Elm Street, Springfield.", "fact", "The user's shipping address is 12 Elm Street."),
    ("My account email is dana.kim@example.com.", "fact", "The user's account email is dana.kim@example.com."),
    ("I work as a backend developer at a fintech startup.", "fact", "The user works as a backend developer."),
    ("I'm a nurse, so night shifts are normal for me.", "fact", "The user is a nurse."),
    ("Message me on Slack, I rarely check email.", "preference", "The user wants to be contacted on Slack."),
    ("My dog is a golden retriever named Max.", "fact", "The user's dog is called Max."),
])
def test_phrasings_outside_the_generator(text: str, kind: str, content: str) -> None:
    assert (kind, content) in [(m.type, m.content) for m in extract(text)], [m.content for m in extract(text)]


@pytest.mark.parametrize("text", [
    "Hey Sam! I love that you picked woodcarving for your project.",  # a remark about the other person's choice
    "I'm planning a few.",  # a fragment
    "My art is important to me.",  # an opinion, and first person in the object
    "I love your painting, the colors are so vivid!",
    "I like it when you send pictures of your garden.",
    "My friend loves jazz, she goes to concerts every week.",  # someone else
    "Priya said she loves the new cafe downtown.",  # reported speech
    "If I moved to Denver I'd need a car.",  # hypothetical
    "I'd love it if we moved to Portugal someday.",
    "I think I'd prefer the beach this year.",  # hedge
    "I guess I like jazz more than I thought.",
    "Not that I dislike the city, it's just loud.",  # negated
    "Do you like hiking?",  # a question
    "I like the sound of that.",  # no self-contained object
    "I prefer the blue one over the red.",
    "I love this photo of the lake!",
    "I like to think I'm a good listener.",
    "I'm learning so much from this group.",
    "My cat is so annoying today.",
    "My company is great about remote work.",
    "You can call me anytime.",
    "Text me at 7 if you're running late.",
    "Never mind, I figured it out.",
    "Always happy to help a friend!",
    "This is Python code, not JavaScript.",
    "I'm Jewish, so we celebrate Hanukkah at home.",
    "I'm at Costco now, grabbing snacks for the team.",
])
def test_tricky_negatives_yield_nothing(text: str) -> None:
    assert [m.content for m in extract(text)] == []
