"""The plugin manager: loads entry points (never fatally), collects registrations per kind,
resolves lazy dotted paths, and reports what is installed (``agentmemory plugins``)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any

import pluggy

from . import hookspecs
from .errors import BackendUnavailable, InvalidArgument

ENTRY_POINT_GROUP = "agentmemory"


@dataclass
class Registration:
    """One registered thing: its name, target (object or dotted path), and where it came from."""

    kind: str
    name: str
    target: Any
    plugin: str
    details: dict[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        """The target object, importing a dotted path on first use."""
        if not isinstance(self.target, str):
            return self.target
        module_name, _, attr = self.target.partition(":")
        try:
            obj: Any = importlib.import_module(module_name)
            for part in attr.split(".") if attr else []:
                obj = getattr(obj, part)
        except ImportError as exc:
            hint = self.details.get("install_hint")
            advice = f"; install it with: {hint}" if hint else ""
            raise BackendUnavailable(
                f"{self.kind[:-1]} {self.name!r} could not be imported ({exc}){advice}"
            ) from exc
        self.target = obj
        return obj


@dataclass
class BrokenPlugin:
    """An entry point that failed to load or to register; reported, never fatal."""

    name: str
    error: str


class PluginManager:
    """Wraps pluggy: built-ins and entry points register through the same hooks."""

    def __init__(self, *, load_entrypoints: bool = True) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.broken: list[BrokenPlugin] = []
        self.distributions: dict[str, tuple[str, str]] = {"agentmemory.builtins": ("agentmemory", _version("agentmemory"))}
        self.summaries: dict[str, str] = {"agentmemory.builtins": "the core's own backend, embedders, LLM, rerankers, extractors and card renderers"}
        """Plugin name → its distribution's one-line description (``agentmemory plugins``)."""
        self._registry: dict[str, dict[str, Registration]] | None = None
        self._lock = threading.RLock()
        from . import builtins

        self.pm.register(builtins, name="agentmemory.builtins")
        if load_entrypoints:
            self._load_entrypoints()

    def _load_entrypoints(self) -> None:
        only = os.environ.get("AGENTMEMORY_LOAD_PLUGINS")
        allowed = None if only is None else {p.strip() for p in only.split(",") if p.strip()}
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if allowed is not None and ep.name not in allowed:
                continue
            if self.pm.has_plugin(ep.name):
                continue
            try:
                self.pm.register(ep.load(), name=ep.name)
                if ep.dist is not None:
                    self.distributions[ep.name] = (ep.dist.name, ep.dist.version)
                    self.summaries[ep.name] = (ep.dist.metadata.get_all("Summary") or [""])[0]
            except Exception as exc:  # noqa: BLE001 - a broken plugin must never crash the host
                self.broken.append(BrokenPlugin(ep.name, f"{type(exc).__name__}: {exc}"))

    def register(self, plugin: Any, name: str | None = None) -> None:
        """Register a plugin object (module or class instance with ``@hookimpl`` methods)."""
        with self._lock:
            self.pm.register(plugin, name=name)
            self._registry = None

    def unregister(self, name: str) -> None:
        """Remove a plugin by name."""
        with self._lock:
            self.pm.unregister(name=name)
            self._registry = None

    def _collect(self) -> dict[str, dict[str, Registration]]:
        with self._lock:
            if self._registry is not None:
                return self._registry
            registry: dict[str, dict[str, Registration]] = {k: {} for k in hookspecs.HOOK_KINDS}
            for kind, hook_name in hookspecs.HOOK_KINDS.items():
                hook = getattr(self.pm.hook, hook_name)
                # call implementations one by one so one failing plugin does not hide the others;
                # get_hookimpls() lists in registration order, so a plugin registered after the
                # built-ins overrides a built-in of the same name
                for impl in hook.get_hookimpls():
                    plugin_name = self.pm.get_name(impl.plugin) or repr(impl.plugin)

                    def register(
                        name: str, target: Any, _kind: str = kind, _plugin: str = plugin_name, **details: Any
                    ) -> None:
                        registry[_kind][name] = Registration(_kind, name, target, _plugin, details)

                    try:
                        impl.function(register)
                    except Exception:  # noqa: BLE001
                        self.broken.append(BrokenPlugin(plugin_name, traceback.format_exc(limit=3)))
            self._registry = registry
            return registry

    def names(self, kind: str) -> list[str]:
        """Registered names of one kind (backends, embedders, llms, rerankers, …)."""
        return sorted(self._collect()[kind])

    def get(self, kind: str, name: str) -> Registration:
        """The registration of ``name``; ``InvalidArgument`` listing the known names otherwise."""
        regs = self._collect()[kind]
        if name not in regs:
            known = ", ".join(sorted(regs)) or "none"
            raise InvalidArgument(kind[:-1], f"no {kind[:-1]} named {name!r}; installed: {known}")
        return regs[name]

    def load(self, kind: str, name: str) -> Any:
        """The object registered as ``name`` (imported on first use)."""
        return self.get(kind, name).load()

    def adapt(self, kind: str, value: Any) -> Any:
        """``value`` wrapped by the first adapter of ``kind`` (``llm_adapters``,
        ``embedder_adapters``) whose ``wraps="module:Class"`` it is an instance of (the adapter
        imported on first use); ``value`` itself when none fits. Checking imports nothing."""
        for registration in self._collect()[kind].values():
            module, _, cls = str(registration.details.get("wraps", "")).partition(":")
            if loaded_instance(value, module, cls):
                return registration.load()(value)
        return value

    def report(self) -> dict[str, Any]:
        """A JSON-able description of plugins, registrations and broken entry points."""
        registry = self._collect()
        plugins = []
        for plugin in self.pm.get_plugins():
            name = self.pm.get_name(plugin) or repr(plugin)
            dist_name, version = self.distributions.get(name, (None, None))
            plugins.append(
                {
                    "name": name,
                    "distribution": dist_name,
                    "version": version,
                    "description": self.summaries.get(name),
                    "hooks": sorted(h.name for h in self.pm.get_hookcallers(plugin) or []),
                }
            )
        return {
            "plugins": sorted(plugins, key=lambda p: p["name"]),
            **{
                kind: {
                    name: {"plugin": r.plugin, "target": r.target if isinstance(r.target, str) else repr(r.target), **_jsonable(r.details)}
                    for name, r in sorted(regs.items())
                }
                for kind, regs in registry.items()
            },
            "broken": [{"name": b.name, "error": b.error} for b in self.broken],
        }


def loaded_instance(value: Any, module: str, cls: str) -> bool:
    """True when ``value`` is an instance of ``module.cls``. Free when that module is not
    installed or not imported: an instance can only exist once its module is loaded."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, cls, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _jsonable(details: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in details.items()}


_default: PluginManager | None = None
_default_lock = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager (entry points loaded once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = PluginManager()
        return _default
