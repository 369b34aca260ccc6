"""A local HTTP server speaking the OpenAI-compatible chat-completions and embeddings protocol,
answering from a script. Tests point the real HTTP clients at it, so the client code that talks
to OpenAI, Ollama or vLLM in production is exactly the code under test."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Responder = Callable[[dict[str, Any]], Any]


class ScriptedServer:
    """Serves ``/v1/chat/completions`` from ``chat`` and ``/v1/embeddings`` from ``embed``.

    ``chat(request) -> str | dict | int | (int, headers)``: a str is the assistant content (dicts
    are JSON-encoded); an int is an HTTP error status to return, optionally with extra response
    headers (``(429, {"Retry-After": "1"})``). Every request is kept in ``requests`` with its
    path, body, headers and ``peer`` (the client's address: one per pooled connection).
    Connections are kept alive (HTTP/1.1), as production servers do.
    """

    def __init__(self, chat: Responder | None = None, embed: Callable[[list[str]], list[list[float]]] | None = None) -> None:
        self.chat = chat
        self.embed = embed
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(
                    {"path": self.path, "body": body, "headers": dict(self.headers), "peer": self.client_address}
                )
                status, answer, *extra = server._answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            request_queue_size = 64
            daemon_threads = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def _answer(self, path: str, body: dict[str, Any]) -> tuple[Any, ...]:
        if path.endswith("/chat/completions") and self.chat is not None:
            out = self.chat(body)
            if isinstance(out, tuple):
                return out[0], {"error": {"message": f"scripted error {out[0]}"}}, dict(out[1])
            if isinstance(out, int):
                return out, {"error": {"message": f"scripted error {out}"}}
            content = out if isinstance(out, str) else json.dumps(out)
            usage = {"prompt_tokens": sum(len(m.get("content", "")) // 4 for m in body.get("messages", [])),
                     "completion_tokens": len(content) // 4}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            return 200, {
                "id": "scripted",
                "object": "chat.completion",
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": usage,
            }
        if path.endswith("/embeddings") and self.embed is not None:
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = self.embed(texts)
            return 200, {"object": "list", "data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]}
        return 404, {"error": {"message": f"no script for {path}"}}

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
