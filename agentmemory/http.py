"""A small JSON-over-HTTP client (stdlib only) shared by the OpenAI-compatible embedder and LLM.

Retries connection errors, 429 and 5xx with exponential backoff; other failures raise
``ModelError`` with the server's message.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .errors import ModelError


@dataclass(frozen=True)
class HttpSettings:
    """Where and how to call an OpenAI-compatible server."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5


def post_json(settings: HttpSettings, path: str, payload: dict[str, Any]) -> dict[str, Any]:
    """POST ``payload`` to ``base_url + path`` and return the decoded JSON answer."""
    url = settings.base_url.rstrip("/") + "/" + path.lstrip("/")
    body = json.dumps(payload).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if settings.api_key:
        headers["Authorization"] = f"Bearer {settings.api_key}"
    last_error = ""
    for attempt in range(settings.max_retries + 1):
        if attempt:
            time.sleep(settings.backoff_s * 2 ** (attempt - 1))
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=settings.timeout_s) as response:
                answer = json.loads(response.read().decode("utf-8"))
                if not isinstance(answer, dict):
                    raise ModelError(f"{url}: expected a JSON object, got {type(answer).__name__}")
                return answer
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            last_error = f"HTTP {exc.code}: {detail}"
            if exc.code != 429 and exc.code < 500:
                break
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            last_error = f"connection failed: {exc}"
        except json.JSONDecodeError as exc:
            last_error = f"answer is not JSON: {exc}"
            break
    raise ModelError(f"POST {url} failed after {attempt + 1} attempt(s): {last_error}")
