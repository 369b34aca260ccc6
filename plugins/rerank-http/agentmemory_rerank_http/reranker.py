"""``HttpReranker``: reorders search results by the scores of a rerank server.

The protocol: ``POST`` a query and a list of documents, get back ``(index, score)`` pairs. The
servers differ only in field names, which a ``Dialect`` captures:

========== ================ ============= ========== =========================== ================
dialect    default path     documents in  top-k key  results in                  score key
========== ================ ============= ========== =========================== ================
cohere     ``/v2/rerank``   documents     top_n      ``results``                 relevance_score
jina       ``/v1/rerank``   documents     top_n      ``results``                 relevance_score
voyage     ``/v1/rerank``   documents     top_k      ``data``                    relevance_score
tei        ``/rerank``      texts         (none)     the body (a JSON list)      score
vllm       ``/v1/rerank``   documents     top_n      ``results``                 relevance_score
infinity   ``/rerank``      documents     top_n      ``results``                 relevance_score
========== ================ ============= ========== =========================== ================

Documents go in batches of ``batch_size`` (cross-encoder scores are per document, so batches
compare); connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff
(``Retry-After`` honoured, capped); everything else is a typed error. The reranker only
reorders (and, with ``top_n`` / ``min_score``, drops) the results it is given: it never invents
one, and a document the server leaves unscored keeps its place after the scored ones.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from agentmemory import InvalidArgument, ModelError, SearchResult
from agentmemory.http import RETRY_STATUSES, retry_after_seconds

log = logging.getLogger(__name__)

ENV_PREFIX = "AGENTMEMORY_RERANK_"


class RerankError(ModelError):
    """The rerank server refused the request (4xx other than 408/429) or answered outside the
    protocol (not JSON, an index out of range or repeated, a score that is not a finite number)."""


class RerankUnavailable(RerankError):
    """The rerank server could not be reached or kept failing (connection error, timeout, 408,
    429, 5xx) through every retry."""


@dataclass(frozen=True)
class Dialect:
    """How one server family spells the rerank request and answer."""

    name: str
    path: str
    documents_key: str = "documents"
    top_key: str | None = "top_n"
    results_key: str | None = "results"
    """Where the scored items are; None: the body itself is the list (TEI)."""
    score_key: str = "relevance_score"
    sends_model: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Fixed request fields (ask for no document text back, truncate instead of failing)."""

    def request(self, query: str, documents: Sequence[str], model: str | None) -> dict[str, Any]:
        """The JSON body for one batch (every document scored)."""
        body: dict[str, Any] = {"query": query, self.documents_key: list(documents), **self.extra}
        if self.top_key:
            body[self.top_key] = len(documents)
        if self.sends_model and model:
            body["model"] = model
        return body

    def scores(self, answer: Any, count: int) -> dict[int, float]:
        """``index → score`` from the answer, checked against the protocol."""
        items = answer if self.results_key is None else (answer.get(self.results_key) if isinstance(answer, dict) else None)
        if not isinstance(items, list):
            where = "a JSON list" if self.results_key is None else f"an object with a {self.results_key!r} list"
            raise RerankError(f"{self.name} rerank answer is not {where}: {str(answer)[:200]}")
        out: dict[int, float] = {}
        for item in items:
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get(self.score_key) if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise RerankError(f"{self.name} rerank answer has an invalid index {index!r} (documents: {count})")
            if index in out:
                raise RerankError(f"{self.name} rerank answer scores document {index} twice")
            if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
                raise RerankError(f"{self.name} rerank answer has an invalid {self.score_key} {score!r} for document {index}")
            out[index] = float(score)
        return out


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect("cohere", "/v2/rerank"),
        Dialect("jina", "/v1/rerank", extra={"return_documents": False}),
        Dialect("voyage", "/v1/rerank", top_key="top_k", results_key="data", extra={"return_documents": False, "truncation": True}),
        Dialect("tei", "/rerank", documents_key="texts", top_key=None, results_key=None, score_key="score",
                sends_model=False, extra={"raw_scores": False, "return_text": False, "truncate": True}),
        Dialect("vllm", "/v1/rerank"),
        Dialect("infinity", "/rerank", extra={"return_documents": False}),
    )
}
"""The known server families by name."""


class HttpReranker:
    """A reranker (``(query, results) -> results``) backed by a rerank HTTP server.

    ``url``: the endpoint (ending in ``rerank``) or the server's base URL, to which the dialect's
    path is appended. Arguments left out come from ``AGENTMEMORY_RERANK_URL``, ``_DIALECT``,
    ``_MODEL`` and ``_API_KEY``, so ``AgentMemory(rerankers=["http"])`` works from the
    environment. ``top_n`` keeps only the best N; ``min_score`` drops results scored below it.
    ``on_error="keep"`` logs a failure and returns the results unchanged instead of raising.
    """

    name = "http"

    def __init__(
        self,
        url: str | None = None,
        *,
        dialect: str | Dialect | None = None,
        model: str | None = None,
        api_key: str | None = None,
        batch_size: int = 32,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        top_n: int | None = None,
        min_score: float | None = None,
        max_chars: int = 4000,
        headers: Mapping[str, str] | None = None,
        on_error: str = "raise",
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = url or os.environ.get(ENV_PREFIX + "URL")
        if not url or not url.startswith(("http://", "https://")):
            raise InvalidArgument("url", f"the rerank server's http(s) URL is required (or set {ENV_PREFIX}URL), got {url!r}")
        chosen = dialect or os.environ.get(ENV_PREFIX + "DIALECT") or "cohere"
        if isinstance(chosen, str):
            if chosen not in DIALECTS:
                raise InvalidArgument("dialect", f"must be one of {', '.join(DIALECTS)} or a Dialect, got {chosen!r}")
            chosen = DIALECTS[chosen]
        self.dialect: Dialect = chosen
        self.url = url if url.rstrip("/").endswith("rerank") else url.rstrip("/") + self.dialect.path
        self.model = model or os.environ.get(ENV_PREFIX + "MODEL")
        for arg, value in (("batch_size", batch_size), ("max_chars", max_chars), ("max_retries", max_retries + 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgument(arg, f"must be a positive integer, got {value!r}")
        if top_n is not None and (not isinstance(top_n, int) or top_n < 1):
            raise InvalidArgument("top_n", f"must be a positive integer or None, got {top_n!r}")
        for arg, number, least in (("timeout_s", timeout_s, 1e-9), ("backoff_s", backoff_s, 0.0), ("max_backoff_s", max_backoff_s, 0.0)):
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not math.isfinite(number) or number < least:
                raise InvalidArgument(arg, f"must be a {'positive' if least else 'non-negative'} number, got {number!r}")
        if on_error not in ("raise", "keep"):
            raise InvalidArgument("on_error", f"must be 'raise' or 'keep', got {on_error!r}")
        self.batch_size, self.max_chars, self.top_n, self.min_score = batch_size, max_chars, top_n, min_score
        self.timeout_s, self.max_retries, self.backoff_s, self.max_backoff_s = timeout_s, max_retries, backoff_s, max_backoff_s
        self.on_error = on_error
        self._sleep = sleep
        key = api_key or os.environ.get(ENV_PREFIX + "API_KEY")
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {}), **dict(headers or {})}
        self._transport = transport
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    # ---- the reranker -------------------------------------------------------------------------
    def __call__(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        """``results`` reordered by the server's scores (best first, ties in input order), cut
        to ``top_n`` and ``min_score``."""
        if not results:
            return []
        try:
            scores = self.scores(query, [r.record.content for r in results])
        except RerankError as exc:
            if self.on_error == "keep":
                log.warning("rerank failed, keeping the search order: %s", exc)
                return list(results)
            raise
        scored = sorted(scores, key=lambda i: (-scores[i], i))
        if self.min_score is not None:
            scored = [i for i in scored if scores[i] >= self.min_score]
        unscored = [i for i in range(len(results)) if i not in scores]
        order = scored + ([] if self.min_score is not None else unscored)
        if self.top_n is not None:
            order = order[: self.top_n]
        return [results[i] for i in order]

    def scores(self, query: str, documents: Sequence[str]) -> dict[int, float]:
        """Score every document against ``query`` (batched); ``index → score``. Documents the
        server leaves out are absent."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("query", "must be a non-empty string")
        out: dict[int, float] = {}
        for start in range(0, len(documents), self.batch_size):
            batch = [d[: self.max_chars] for d in documents[start : start + self.batch_size]]
            answer = self._post(self.dialect.request(query, batch, self.model))
            out.update({start + i: s for i, s in self.dialect.scores(answer, len(batch)).items()})
        return out

    # ---- HTTP ---------------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout_s, headers=self._headers, transport=self._transport)
            return self._client

    def _post(self, body: dict[str, Any]) -> Any:
        problem = ""
        for attempt in range(self.max_retries + 1):
            wait = min(self.max_backoff_s, self.backoff_s * 2**attempt)
            try:
                response = self._http().post(self.url, json=body)
            except httpx.TimeoutException as exc:
                problem = f"timed out after {self.timeout_s}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code < 300:
                    try:
                        return response.json()
                    except ValueError:
                        raise RerankError(f"rerank server at {self.url} answered non-JSON: {response.text[:200]!r}") from None
                problem = f"HTTP {response.status_code}: {response.text[:300]}"
                if response.status_code not in RETRY_STATUSES:
                    raise RerankError(f"rerank server at {self.url} refused the request: {problem}")
                wait = min(self.max_backoff_s, retry_after_seconds(response.headers.get("Retry-After")) or wait)
            if attempt < self.max_retries:
                self._sleep(wait)
        raise RerankUnavailable(f"rerank server at {self.url} failed {self.max_retries + 1} times; last: {problem}")

    def close(self) -> None:
        """Close the HTTP connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> HttpReranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HttpReranker(url={self.url!r}, dialect={self.dialect.name!r}, model={self.model!r})"
