"""The JSON-over-HTTP client (httpx) shared by the OpenAI-compatible embedder and LLM.

One pooled ``httpx.Client`` per model object, and one ``httpx.AsyncClient`` per event loop for
the ``*_async`` paths (an async connection pool belongs to the loop that opened it). Proxies and
CA bundles come from the environment as httpx reads them (``HTTPS_PROXY``, ``NO_PROXY``,
``SSL_CERT_FILE``, …). Connection errors, timeouts, 429 and 5xx are retried with exponential
backoff, or after the server's ``Retry-After`` when it sends one; other failures raise
``ModelError`` with the server's message. The retry policy is written once, as a generator the
sync and async drivers share.
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import httpx

from .errors import ModelError

RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class HttpSettings:
    """Where and how to call an OpenAI-compatible server.

    ``timeout_s`` bounds each read (and write); ``connect_timeout_s`` bounds opening a
    connection, so an unreachable host fails fast while a slow generation may take its time.
    A ``Retry-After`` longer than ``max_retry_after_s`` fails at once instead of sleeping."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    connect_timeout_s: float = 10.0
    max_retry_after_s: float = 60.0


@dataclass(frozen=True)
class _Sleep:
    seconds: float


_Exchange = Generator[_Sleep | None, httpx.Response | Exception | None, dict[str, Any]]
"""Yields ``None`` to ask for one request (sent back: the response or the transport error)
and ``_Sleep`` to wait; returns the decoded answer."""


class JsonHttpClient:
    """POSTs JSON to ``settings.base_url`` through pooled httpx clients (sync and async)."""

    def __init__(self, settings: HttpSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def _options(self) -> dict[str, Any]:
        s = self.settings
        headers = {"Content-Type": "application/json"}
        if s.api_key:
            headers["Authorization"] = f"Bearer {s.api_key}"
        return {
            "base_url": s.base_url.rstrip("/") + "/",
            "headers": headers,
            "timeout": httpx.Timeout(s.timeout_s, connect=s.connect_timeout_s),
            "trust_env": True,
        }

    @property
    def client(self) -> httpx.Client:
        """The pooled sync client (created on first use)."""
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(**self._options())
            return self._client

    def async_client(self) -> httpx.AsyncClient:
        """The pooled async client of the running event loop (created on first use there)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._async_clients[loop] = httpx.AsyncClient(**self._options())
            return client

    def url(self, path: str) -> str:
        """The absolute URL of ``path``."""
        return self.settings.base_url.rstrip("/") + "/" + path.lstrip("/")

    def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``path`` and return the decoded JSON object."""
        exchange = self._exchange(path)
        step = next(exchange)
        try:
            while True:
                if isinstance(step, _Sleep):
                    time.sleep(step.seconds)
                    step = exchange.send(None)
                    continue
                answer: httpx.Response | Exception
                try:
                    answer = self.client.post(path.lstrip("/"), json=payload)
                except httpx.TransportError as exc:
                    answer = exc
                step = exchange.send(answer)
        except StopIteration as stop:
            return stop.value

    async def apost(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Async ``post`` on the event loop (no worker thread)."""
        exchange = self._exchange(path)
        step = next(exchange)
        try:
            while True:
                if isinstance(step, _Sleep):
                    await asyncio.sleep(step.seconds)
                    step = exchange.send(None)
                    continue
                answer: httpx.Response | Exception
                try:
                    answer = await self.async_client().post(path.lstrip("/"), json=payload)
                except httpx.TransportError as exc:
                    answer = exc
                step = exchange.send(answer)
        except StopIteration as stop:
            return stop.value

    def _exchange(self, path: str) -> _Exchange:
        s = self.settings
        url = self.url(path)
        last_error = ""
        attempt = 0
        for attempt in range(s.max_retries + 1):
            answer = yield None
            delay = s.backoff_s * 2**attempt
            if isinstance(answer, httpx.TimeoutException):
                last_error = f"timed out ({type(answer).__name__}): {answer}"
            elif isinstance(answer, Exception):
                last_error = f"connection failed: {answer}"
            else:
                assert isinstance(answer, httpx.Response)
                if answer.is_success:
                    try:
                        data = answer.json()
                    except ValueError as exc:
                        raise ModelError(f"POST {url}: answer is not JSON: {exc}") from None
                    if not isinstance(data, dict):
                        raise ModelError(f"POST {url}: expected a JSON object, got {type(data).__name__}")
                    return data
                last_error = f"HTTP {answer.status_code}: {answer.text[:500]}"
                if answer.status_code not in RETRY_STATUSES:
                    break
                wait = retry_after_seconds(answer.headers.get("Retry-After"))
                if wait is not None:
                    if wait > s.max_retry_after_s:
                        last_error += f" (the server asks to retry after {wait:g}s, more than max_retry_after_s={s.max_retry_after_s:g})"
                        break
                    delay = wait
            if attempt < s.max_retries:
                yield _Sleep(delay)
        raise ModelError(f"POST {url} failed after {attempt + 1} attempt(s): {last_error}")

    def close(self) -> None:
        """Close the pooled sync client (async clients close with their loops' garbage)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header as seconds from now (delta-seconds or an HTTP date); None when
    absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())

