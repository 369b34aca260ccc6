"""A local server speaking the rerank HTTP protocol, answering from a script, so the tests run
the real client code (httpx, retries, parsing) against real sockets."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any, dict[str, str]]


def overlap_scores(query: str, documents: list[str]) -> list[float]:
    """A stand-in cross-encoder: the share of query words in each document."""
    words = set(re.findall(r"\w+", query.lower()))
    return [len(words & set(re.findall(r"\w+", d.lower()))) / max(len(words), 1) for d in documents]


def answer_as(dialect: str, body: dict[str, Any]) -> Any:
    """What a server of ``dialect`` answers to ``body`` (overlap scores)."""
    docs = body["texts"] if dialect == "tei" else body["documents"]
    ranked = sorted(enumerate(overlap_scores(body["query"], docs)), key=lambda p: -p[1])
    if dialect == "tei":
        return [{"index": i, "score": s} for i, s in ranked]
    items = [{"index": i, "relevance_score": s} for i, s in ranked]
    return {"data": items} if dialect == "voyage" else {"results": items, "id": "x"}


class RerankServer:
    """Answers ``POST`` with ``script(path, body)`` → ``(status, json, headers)`` (or a plain
    JSON-able body for 200); ``delay_s`` delays every answer. Requests are kept."""

    def __init__(self, script: Callable[[str, dict[str, Any]], Any]) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.delay_s = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                if server.delay_s:
                    time.sleep(server.delay_s)
                answer = server.script(self.path, body)
                status, payload, headers = answer if isinstance(answer, tuple) else (200, answer, {})
                data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
