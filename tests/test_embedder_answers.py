"""An embedder's answer is checked before anything uses it: a plugin or an OpenAI-compatible
server that returns too few or too many vectors, the wrong dimension, or non-finite / all-zero
values makes every write and read that embeds raise ``ModelError``, and nothing is written
(issue #14: ``add_messages`` used to store some messages and return every id)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from agentmemory import AgentMemory, HashingEmbedder, ModelError, OpenAICompatibleEmbedder
from agentmemory.embedders import Embedder
from agentmemory.testing.scripted_server import ScriptedServer

DIM = 16
OFF = {"extract_memories": False, "enable_context_summary": False}


def _short(m: np.ndarray) -> Any:
    return m[:-1]


def _long(m: np.ndarray) -> Any:
    return np.concatenate([m, m[:1]])


def _wide(m: np.ndarray) -> Any:
    return np.concatenate([m, m[:, :1]], axis=1)


def _narrow(m: np.ndarray) -> Any:
    return m[:, :-1]


def _nan(m: np.ndarray) -> Any:
    out = m.copy()
    out[-1, 0] = np.nan
    return out


def _inf(m: np.ndarray) -> Any:
    out = m.copy()
    out[-1, 0] = np.inf
    return out


def _zeros(m: np.ndarray) -> Any:
    out = m.copy()
    out[-1] = 0.0
    return out


def _flat(m: np.ndarray) -> Any:
    return m.reshape(-1)


def _ragged(m: np.ndarray) -> Any:
    return [list(row) for row in m[:-1]] + [[1.0]]


def _none(m: np.ndarray) -> Any:
    return None


DISTORTIONS: dict[str, Callable[[np.ndarray], Any]] = {
    "too few": _short,
    "too many": _long,
    "wider": _wide,
    "narrower": _narrow,
    "nan": _nan,
    "inf": _inf,
    "all zeros": _zeros,
    "one-dimensional": _flat,
    "ragged": _ragged,
    "none": _none,
}


class PluginEmbedder(HashingEmbedder):
    """A plugin that overrides ``embed`` itself (so the base class's checks never run) and
    answers correctly until ``distort`` is set."""

    name = "plugin"

    def __init__(self) -> None:
        super().__init__(DIM)
        self.distort: Callable[[np.ndarray], Any] | None = None

    def embed(self, texts: Sequence[str], *, is_query: bool = False) -> Any:
        out = super().embed(texts, is_query=is_query)
        return out if self.distort is None else self.distort(out)


class SubclassEmbedder(Embedder):
    """A plugin that implements only ``_embed`` (the documented way) and answers badly."""

    name = "subclass"
    dimension = DIM

    def __init__(self, distort: Callable[[np.ndarray], Any]) -> None:
        self.inner = HashingEmbedder(DIM)
        self.distort = distort

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        return self.distort(self.inner.embed(texts))


@pytest.fixture
def plugin() -> PluginEmbedder:
    return PluginEmbedder()


@pytest.fixture
def client(plugin: PluginEmbedder) -> Iterator[AgentMemory]:
    memory = AgentMemory("memory://", embedder=plugin, memory_extraction_config=OFF)
    yield memory
    memory.close()


def two_messages() -> list[dict[str, str]]:
    return [{"role": "user", "content": "I live in Lisbon"}, {"role": "assistant", "content": "Noted, Lisbon"}]


@pytest.mark.parametrize("distortion", list(DISTORTIONS))
def test_add_messages_with_a_bad_embedder_answer_writes_nothing(client: AgentMemory, plugin: PluginEmbedder, distortion: str) -> None:
    thread = client.create_thread(user_id="u1")
    plugin.distort = DISTORTIONS[distortion]
    with pytest.raises(ModelError, match="plugin"):
        thread.add_messages(two_messages())
    plugin.distort = None
    assert thread.get_messages(start=0) == []
    assert client.list_messages(user_id="u1") == []


@pytest.mark.parametrize("distortion", ["too few", "nan", "wider"])
async def test_add_messages_async_with_a_bad_embedder_answer_writes_nothing(client: AgentMemory, plugin: PluginEmbedder, distortion: str) -> None:
    thread = await client.create_thread_async(user_id="u1")
    plugin.distort = DISTORTIONS[distortion]
    with pytest.raises(ModelError):
        await thread.add_messages_async(two_messages())
    plugin.distort = None
    assert await thread.get_messages_async(start=0) == []


@pytest.mark.parametrize("distortion", list(DISTORTIONS))
def test_add_memory_and_profiles_with_a_bad_embedder_answer_write_nothing(client: AgentMemory, plugin: PluginEmbedder, distortion: str) -> None:
    plugin.distort = DISTORTIONS[distortion]
    with pytest.raises(ModelError):
        client.add_memory("The user lives in Lisbon", user_id="u1", memory_id="m1")
    with pytest.raises(ModelError):
        client.add_user("u1", "Maya, a data engineer")
    plugin.distort = None
    assert client.list_memories(user_id="u1") == []
    assert client.list_users() == []


@pytest.mark.parametrize("distortion", ["too few", "narrower", "inf", "all zeros"])
def test_update_memory_and_message_with_a_bad_embedder_answer_change_nothing(client: AgentMemory, plugin: PluginEmbedder, distortion: str) -> None:
    thread = client.create_thread(user_id="u1")
    (mid,) = thread.add_messages([{"role": "user", "content": "I live in Lisbon"}])
    rid = client.add_memory("The user lives in Lisbon", user_id="u1")
    plugin.distort = DISTORTIONS[distortion]
    with pytest.raises(ModelError):
        client.update_memory(rid, content="The user lives in Porto")
    with pytest.raises(ModelError):
        thread.update_message(mid, content="I live in Porto")
    plugin.distort = None
    assert client.get_memory(rid).content == "The user lives in Lisbon"
    assert thread.get_message(mid).content == "I live in Lisbon"
    assert [h.record.record_id for h in client.search("Lisbon", user_id="u1", record_types=["memory"])] == [rid]


@pytest.mark.parametrize("distortion", ["too few", "too many", "nan", "one-dimensional", "none"])
async def test_search_with_a_bad_embedder_answer_is_a_model_error(client: AgentMemory, plugin: PluginEmbedder, distortion: str) -> None:
    thread = client.create_thread(user_id="u1")
    thread.add_messages(two_messages())
    client.add_memory("The user lives in Lisbon", user_id="u1")
    plugin.distort = DISTORTIONS[distortion]
    with pytest.raises(ModelError):
        client.search("Lisbon", user_id="u1")
    with pytest.raises(ModelError):
        await client.search_async("Lisbon", user_id="u1")
    with pytest.raises(ModelError):
        thread.search("Lisbon")
    with pytest.raises(ModelError):
        thread.get_context_card()


@pytest.mark.parametrize("distortion", list(DISTORTIONS))
def test_an_embedder_subclass_with_a_bad_answer_is_a_model_error(distortion: str) -> None:
    embedder = SubclassEmbedder(DISTORTIONS[distortion])
    with pytest.raises(ModelError, match="subclass"):
        embedder.embed(["one", "two"])
    memory = AgentMemory("memory://", embedder=embedder, memory_extraction_config=OFF)
    thread = memory.create_thread(user_id="u1")
    with pytest.raises(ModelError):
        thread.add_messages(two_messages())
    assert thread.get_messages(start=0) == []
    memory.close()


# ---- the OpenAI-compatible HTTP embedder against a local scripted server ----------------------


class Answers:
    """What the scripted server's ``/embeddings`` answers: good 3-d vectors, or a distortion."""

    def __init__(self) -> None:
        self.mode = "good"

    def __call__(self, texts: list[str]) -> list[list[float]]:
        rows = [[1.0, float(len(t)), float(i + 1)] for i, t in enumerate(texts)]
        if self.mode == "too few":
            return rows[:-1]
        if self.mode == "huge":  # finite in JSON, infinite as float32
            rows[-1] = [1e39, 1.0, 1.0]
        if self.mode == "nan":
            rows[-1] = [math.nan, 1.0, 1.0]
        if self.mode == "zeros":
            rows[-1] = [0.0, 0.0, 0.0]
        if self.mode == "wider":
            rows[-1] = rows[-1] + [1.0]
        return rows


@pytest.fixture
def http_client() -> Iterator[tuple[AgentMemory, Answers]]:
    answers = Answers()
    server = ScriptedServer(embed=answers)
    embedder = OpenAICompatibleEmbedder("m", base_url=server.base_url, dimension=3, max_retries=0)
    memory = AgentMemory("memory://", embedder=embedder, memory_extraction_config=OFF)
    yield memory, answers
    memory.close()
    server.close()


@pytest.mark.parametrize("mode", ["too few", "huge", "nan", "zeros", "wider"])
def test_http_embedder_bad_answers_write_nothing(http_client: tuple[AgentMemory, Answers], mode: str) -> None:
    memory, answers = http_client
    thread = memory.create_thread(user_id="u1")
    answers.mode = mode
    with pytest.raises(ModelError):
        thread.add_messages(two_messages())
    with pytest.raises(ModelError):
        memory.add_memory("The user lives in Lisbon", user_id="u1")
    with pytest.raises(ModelError):
        memory.search("Lisbon", user_id="u1")
    answers.mode = "good"
    assert thread.get_messages(start=0) == []
    assert memory.list_memories(user_id="u1") == []
    thread.add_messages(two_messages())
    assert len(thread.get_messages(start=0)) == 2
