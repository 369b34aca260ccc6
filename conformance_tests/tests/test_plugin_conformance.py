"""The built-in plugins pass the plugin conformance checks: the XML and Markdown renderers, the
MMR and recency rerankers, the rule-based and LLM extractors; and the zero-code flags work."""

from __future__ import annotations

from typing import Any

import pytest
from agentmemory_conformance import ExtractorConformance, RendererConformance, RerankerConformance

from agentmemory import SearchResult
from agentmemory.extraction.llm_extractor import LlmExtractor
from agentmemory.extraction.rules import RuleBasedExtractor
from agentmemory.renderers import MarkdownCardRenderer, XmlCardRenderer
from agentmemory.rerankers import MmrReranker, RecencyReranker


class TestXmlRenderer(RendererConformance):
    def make_renderer(self) -> Any:
        return XmlCardRenderer()


class TestMarkdownRenderer(RendererConformance):
    def make_renderer(self) -> Any:
        return MarkdownCardRenderer()


class TestMmrReranker(RerankerConformance):
    def make_reranker(self) -> Any:
        return MmrReranker()


class TestRecencyReranker(RerankerConformance):
    def make_reranker(self) -> Any:
        return RecencyReranker()


class TestRuleBasedExtractor(ExtractorConformance):
    def make_extractor(self, llm: Any) -> Any:
        return RuleBasedExtractor()


class TestLlmExtractor(ExtractorConformance):
    def make_extractor(self, llm: Any) -> Any:
        return LlmExtractor(llm)


# ---- the checks catch broken plugins -------------------------------------------------------------
class Inventing:
    def __call__(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        fake = results[0].model_copy(update={"record": results[0].record.model_copy(update={"record_id": "@invented"})})
        return [fake, *results]


class Unescaped(XmlCardRenderer):
    def __call__(self, parts: Any) -> str:
        if parts.is_empty():
            return ""
        return "<context_card>\n<summary>" + parts.summary + "</summary>\n" + "\n".join(
            f"<fact><content>{r.record.content}</content></fact>" for r in parts.relevant) + "\n" + "\n".join(
            f"<message>{m.content}</message>" for m in parts.recent_messages) + "\n</context_card>"


@pytest.mark.parametrize(("cls", "make", "test"), [
    (RerankerConformance, "make_reranker", "test_returns_a_reordering_of_its_input"),
    (RendererConformance, "make_renderer", "test_hostile_strings_stay_in_their_slot_escaped"),
])
def test_the_checks_fail_broken_plugins(cls: type, make: str, test: str) -> None:
    """An inventing reranker and an unescaping renderer fail their checks."""
    broken = type("Broken", (cls,), {make: lambda self: Inventing() if make == "make_reranker" else Unescaped()})()
    method = getattr(broken, test)
    with pytest.raises(AssertionError):
        if make == "make_reranker":
            method(broken.make_reranker())
        else:
            method(broken.make_renderer(), "</context_card>")


def test_zero_code_flags_run_the_checks_on_registered_plugins(pytester: pytest.Pytester) -> None:
    """``--agentmemory-renderer markdown --agentmemory-reranker mmr --agentmemory-extractor rules``."""
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance.test_registered_plugins", "-p", "no:cacheprovider", "-p", "no:asyncio",
        "--agentmemory-renderer", "markdown", "--agentmemory-reranker", "mmr", "--agentmemory-extractor", "rules", "-q",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes["passed"] >= 30


def test_without_flags_the_plugin_checks_skip(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("--pyargs", "agentmemory_conformance.test_registered_plugins", "-p", "no:cacheprovider", "-p", "no:asyncio", "-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes["skipped"] > 10
