"""The core's shape, as ``docs/architecture.md`` describes it: no module reaches into another's
private names, and no module of the package grows past 500 lines. (The import layers and the absence of
cycles are import-linter contracts in ``pyproject.toml``, run by ``python3 dev.py test``.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "agentmemory"
MAX_LINES = 500


def _modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_names(tree: ast.Module) -> set[str]:
    """Every name a module binds itself: functions, classes, attributes it assigns, parameters."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def private_reaches(path: Path) -> list[str]:
    """``from m import _x`` of another module, and ``obj._x`` (not ``self``, ``cls`` or ``super()``)
    where this module never defines ``_x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = _defined_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in own:
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue  # a subclass using its base class's protected hook
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                continue
            found.append(f"{path.name}:{node.lineno} reaches {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_no_module_reaches_into_another_modules_private_names(path: Path) -> None:
    assert private_reaches(path) == []


def test_the_check_catches_a_private_reach(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from agentmemory.x import _helper\n\ndef f(client):\n    return client._alive()\n")
    assert private_reaches(bad) == ["bad.py:1 imports _helper", "bad.py:4 reaches client._alive"]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_modules_stay_small(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines < MAX_LINES, f"{path.relative_to(CORE)} has {lines} lines; split it by concept"
