"""The zero-code entry for plugins: ``pytest --pyargs agentmemory_conformance
--agentmemory-reranker NAME`` (``--agentmemory-renderer NAME``, ``--agentmemory-extractor NAME``)
runs the plugin checks on what is registered under NAME. Without a name each class skips."""

from __future__ import annotations

from typing import Any

import pytest

from agentmemory_conformance.plugin_suite import ExtractorConformance, RendererConformance, RerankerConformance

OPTIONS = {"registered_reranker": "agentmemory_reranker", "registered_renderer": "agentmemory_renderer",
           "registered_extractor": "agentmemory_extractor"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One copy of a class per name given on the command line."""
    for fixture, option in OPTIONS.items():
        if fixture in metafunc.fixturenames:
            names: list[Any] = list(metafunc.config.getoption(option, None) or []) or [None]
            metafunc.parametrize(fixture, names, ids=[n or "none" for n in names], scope="class")


def _load(kind: str, name: str | None, flag: str) -> Any:
    if name is None:
        pytest.skip(f"no {kind[:-1]} selected: pass {flag} NAME")
    from agentmemory.plugins import get_plugin_manager

    return get_plugin_manager().load(kind, name)


class TestRegisteredReranker(RerankerConformance):
    """The reranker checks against ``--agentmemory-reranker NAME`` (built with no arguments)."""

    @pytest.fixture(autouse=True)
    def _select(self, registered_reranker: str | None) -> None:
        self._factory = _load("rerankers", registered_reranker, "--agentmemory-reranker")

    def make_reranker(self) -> Any:
        return self._factory()


class TestRegisteredRenderer(RendererConformance):
    """The renderer checks against ``--agentmemory-renderer NAME`` (built with no arguments)."""

    @pytest.fixture(autouse=True)
    def _select(self, registered_renderer: str | None) -> None:
        self._factory = _load("card_renderers", registered_renderer, "--agentmemory-renderer")

    def make_renderer(self) -> Any:
        return self._factory()


class TestRegisteredExtractor(ExtractorConformance):
    """The extractor checks against ``--agentmemory-extractor NAME`` (``factory(llm=...)`` when
    it needs an LLM, else ``factory()``)."""

    @pytest.fixture(autouse=True)
    def _select(self, registered_extractor: str | None) -> None:
        self._factory = _load("extractors", registered_extractor, "--agentmemory-extractor")
        self._name = registered_extractor

    def make_extractor(self, llm: Any) -> Any:
        if self._name == "llm" or getattr(self._factory, "uses_llm", False):
            return self._factory(llm=llm)
        return self._factory()
