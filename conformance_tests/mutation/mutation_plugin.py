"""The worker side of a mutation run: a pytest plugin (``-p mutation_plugin``) that

* loads one module mutated (``AGENTMEMORY_MUTANT`` = JSON ``{"module", "source", "file",
  "index", "sql"}``) instead of its file, before anything imports it;
* keeps the suite's oracle pristine: after collection, ``agentmemory.reference_store`` (and the
  ``agentmemory.filters`` it uses) are re-created from their unmutated sources for the suite's
  own modules (the state machine's model, reference comparisons), while the backend under test
  keeps the mutated code — a mutant is a buggy backend judged against the correct reference;
* runs only the tests listed in ``AGENTMEMORY_MUTANT_SELECT`` (a file of node ids, in the order
  to run them);
* with ``AGENTMEMORY_MUTANT_TRACE`` = a path, records which lines of the target files each test
  executes (and each test's duration) and writes them there as JSON at the end.

Nothing here touches files of the working tree.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

_MUTANT = json.loads(os.environ["AGENTMEMORY_MUTANT"]) if os.environ.get("AGENTMEMORY_MUTANT") else None
_PRISTINE = json.loads(os.environ.get("AGENTMEMORY_MUTANT_PRISTINE", "{}"))
"""Module name -> unmutated source path, for the oracle copies."""
_SELECT = os.environ.get("AGENTMEMORY_MUTANT_SELECT")
_TRACE = os.environ.get("AGENTMEMORY_MUTANT_TRACE")
_TRACE_FILES = set(json.loads(os.environ.get("AGENTMEMORY_MUTANT_TRACE_FILES", "[]")))
_ORACLE_MODULES = ("agentmemory.filters", "agentmemory.reference_store")


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the mutated module in place of its file (same name, same ``__file__``)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.spec["module"]:
            return None
        return importlib.util.spec_from_file_location(fullname, self.spec["file"], loader=self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        sys.path.insert(0, str(Path(__file__).parent))
        try:
            from mutants import mutated_tree
        finally:
            sys.path.pop(0)
        source = Path(self.spec["source"]).read_text()
        tree = mutated_tree(source, int(self.spec["index"]), sql=bool(self.spec.get("sql")))
        exec(compile(tree, self.spec["file"], "exec"), module.__dict__)


if _MUTANT is not None:
    if _MUTANT["module"] in sys.modules:
        raise RuntimeError(f"{_MUTANT['module']} was imported before the mutation plugin loaded")
    sys.meta_path.insert(0, _MutantFinder(_MUTANT))


# ---- the pristine oracle ---------------------------------------------------------------------
def _load_copy(name: str, source_path: str, alias: str) -> types.ModuleType:
    module = types.ModuleType(alias)
    module.__package__ = name.rpartition(".")[0]
    module.__file__ = source_path
    sys.modules[alias] = module
    exec(compile(Path(source_path).read_text(), source_path, "exec"), module.__dict__)
    return module


def _install_pristine_oracle() -> None:
    """Re-create the reference store over unmutated filters, and point the suite's modules (and
    later imports) at it; the backend under test keeps what it imported at collection."""
    if not _PRISTINE:
        return
    mutated_ref = sys.modules.get("agentmemory.reference_store")
    mutated_filters = sys.modules.get("agentmemory.filters")
    filters = _load_copy("agentmemory.filters", _PRISTINE["agentmemory.filters"], "agentmemory._pristine_filters")
    saved = sys.modules.get("agentmemory.filters")
    sys.modules["agentmemory.filters"] = filters
    try:
        ref = _load_copy("agentmemory.reference_store", _PRISTINE["agentmemory.reference_store"], "agentmemory._pristine_reference_store")
    finally:
        if saved is not None:
            sys.modules["agentmemory.filters"] = saved
    sys.modules["agentmemory.reference_store"] = ref
    import agentmemory

    agentmemory.reference_store = ref  # type: ignore[attr-defined]
    replacements = {id(mutated_ref): ref, id(mutated_filters): filters}
    for name, module in list(sys.modules.items()):
        if not name.startswith("agentmemory_conformance") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if id(value) in replacements:
                setattr(module, attr, replacements[id(value)])
                continue
            owner = getattr(value, "__module__", None)
            source = ref if owner == "agentmemory.reference_store" else filters if owner == "agentmemory.filters" else None
            if source is not None and hasattr(source, getattr(value, "__name__", attr)):
                setattr(module, attr, getattr(source, getattr(value, "__name__", attr)))


# ---- line tracing (the coverage map that picks each mutant's tests) ------------------------------
class _Tracer:
    def __init__(self, files: set[str]) -> None:
        self.files = files
        self.current: set[tuple[str, int]] = set()
        self.by_test: dict[str, set[tuple[str, int]]] = {"<import>": self.current}
        self.durations: dict[str, float] = {}

    def global_trace(self, frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in self.files:
            return self.local_trace
        return None

    def local_trace(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            self.current.add((frame.f_code.co_filename, frame.f_lineno))
        return self.local_trace

    def start(self) -> None:
        sys.settrace(self.global_trace)
        threading.settrace(self.global_trace)

    def dump(self, path: str) -> None:
        out: dict[str, Any] = {"tests": {}, "durations": self.durations}
        for test, lines in self.by_test.items():
            per_file: dict[str, list[int]] = {}
            for file, line in lines:
                per_file.setdefault(file, []).append(line)
            out["tests"][test] = {f: sorted(v) for f, v in per_file.items()}
        Path(path).write_text(json.dumps(out))


_tracer = _Tracer(_TRACE_FILES) if _TRACE else None
if _tracer is not None:
    _tracer.start()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep (and order) only the selected tests."""
    if not _SELECT:
        return
    wanted = [line for line in Path(_SELECT).read_text().splitlines() if line]
    rank = {nodeid: i for i, nodeid in enumerate(wanted)}
    keep = sorted((item for item in items if item.nodeid in rank), key=lambda item: rank[item.nodeid])
    dropped = [item for item in items if item.nodeid not in rank]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the code comes from the tree under test; swap the oracle for a pristine copy once
    the test modules (and the backend) are imported."""
    tree = os.environ.get("AGENTMEMORY_MUTANT_TREE")
    if tree:
        for name in ("agentmemory", "agentmemory_conformance", "agentmemory_duckdb"):
            module = sys.modules.get(name)
            if module is not None and not str(Path(module.__file__ or "").resolve()).startswith(str(Path(tree).resolve())):
                raise pytest.UsageError(f"{name} was imported from {module.__file__}, not from the tree under test {tree}")
    _install_pristine_oracle()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Any:
    if _tracer is None:
        return (yield)
    lines: set[tuple[str, int]] = set()
    _tracer.current = _tracer.by_test[item.nodeid] = lines
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        _tracer.durations[item.nodeid] = time.perf_counter() - start
        _tracer.current = _tracer.by_test["<import>"]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _tracer is not None and _TRACE:
        sys.settrace(None)
        threading.settrace(None)
        _tracer.dump(_TRACE)
