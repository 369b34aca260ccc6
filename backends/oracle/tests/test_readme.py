"""The README's porting claim, checked: the seed-style program and its agentmemory port differ only
in imports and the statement that builds the memory, and the port's construction runs (over the
fake pool; the rest of the program needs a server and a model)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(marker: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(rf"<!-- port:{marker} -->\s*```python\n(.*?)```", text, re.S)
    assert match, f"README has no port:{marker} block"
    return match.group(1)


def _split(source: str) -> tuple[list[str], list[str]]:
    """(changeable lines: imports and the ``memory = ...`` statement, the rest in order)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    changeable: set[int] = set()
    for node in tree.body:
        is_memory = isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "memory" for t in node.targets
        )
        if isinstance(node, (ast.Import, ast.ImportFrom)) or is_memory:
            changeable.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    kept = [line for i, line in enumerate(lines, 1) if i not in changeable and line.strip()]
    changed = [lines[i - 1] for i in sorted(changeable)]
    return changed, kept


def test_port_changes_only_imports_and_construction() -> None:
    before, after = _block("before"), _block("after")
    changed_before, kept_before = _split(before)
    changed_after, kept_after = _split(after)
    assert kept_before == kept_after, "the port must not touch anything but imports and the memory construction"
    assert any("OracleAgentMemory(" in line for line in changed_before)
    assert any("AgentMemory(" in line for line in changed_after) and "oracleagentmemory" not in after
    assert any("OracleStore(pool=db_pool, memory_store_id=memory_store_id)" in line for line in changed_after)


def test_ported_construction_runs(h: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import oracledb
    from agentmemory_oracle import OracleStore

    import agentmemory
    import agentmemory.llm
    from agentmemory import HashingEmbedder

    server = h.Server(dimension=64)
    monkeypatch.setattr(oracledb, "SessionPool", lambda **kw: h.FakePool(server))
    monkeypatch.setattr(agentmemory, "OpenAICompatibleEmbedder", lambda model: HashingEmbedder(64))
    monkeypatch.setattr(agentmemory.llm, "OpenAICompatibleLlm", lambda model: object())
    source = _block("after")
    tree = ast.parse(source)
    upto = next(
        i
        for i, node in enumerate(tree.body)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "memory" for t in node.targets)
    )
    prefix = ast.Module(body=tree.body[: upto + 1], type_ignores=[])
    namespace: dict[str, Any] = {}
    exec(compile(prefix, str(README), "exec"), namespace)  # noqa: S102 - our own README
    memory = namespace["memory"]
    assert isinstance(memory.store, OracleStore) and memory.store.is_open
    assert memory.store.memory_store_id == "T_CARD_CONTENT" and memory.store.dimension == 64
    created = [sql.split()[2] for _, sql, _ in server.log if sql.startswith("CREATE TABLE")]
    assert created[:2] == ["T_CARD_CONTENT_STORE_META", "T_CARD_CONTENT_RECORD"]
    memory.close()
