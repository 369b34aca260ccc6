"""Crash safety of ``add_messages`` with inline extraction on the persistent local backends
(issue #31): a child process adds turns and reports each acknowledged call; it is killed
with SIGKILL at an arbitrary moment, three times. After every kill the store holds every
acknowledged message, and no message was extracted twice; the next call extracts whatever is
pending, so in the end every stored turn has exactly one memory. The extractor writes one
memory per extraction naming its turns and a fresh id, so a repeat cannot hide behind the
duplicate filter."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, RecordType
from agentmemory.records import MEMORY_TYPES
from agentmemory.spi import RecordFilter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics")

EXTRACTOR = textwrap.dedent(
    """
    from agentmemory.extraction.base import Extractor
    from agentmemory.extraction.models import ExtractionOutput, MemoryCandidate
    from agentmemory.ids import new_id

    class Stamped(Extractor):
        name = "stamped"

        def extract(self, context):
            new = [m.content.split()[1] for m in context.messages if m.record_id in context.new_message_ids and m.role == "user"]
            return ExtractionOutput(memories=[MemoryCandidate(type="fact", content=f"orders {' '.join(new)} [{new_id()}]")] if new else [])
    """
)
"""The extractor of the child and of the final check (source, so the child can run it)."""

CHILD = EXTRACTOR + textwrap.dedent(
    """
    import sys
    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.errors import NotFound

    memory = AgentMemory(sys.argv[1], embedder=HashingEmbedder(64), extractor=Stamped())
    try:
        thread = memory.get_thread("t")
    except NotFound:
        thread = memory.create_thread(thread_id="t", user_id="u")
    n = len(thread.get_messages(0, -1)) // 2
    while True:
        thread.add_messages([
            {"role": "user", "content": f"Order {10000 + n} arrived damaged and I need a return."},
            {"role": "assistant", "content": "Sorry to hear that."},
        ])
        print(n, flush=True)
        n += 1
    """
)


def orders_in(text: str) -> list[int]:
    """The turns a user message (``Order N ...``) or a memory (``orders N M [id]``) is about."""
    return [int(word) - 10000 for word in text.split("[")[0].split()[1:] if word.isdigit()]


def kill_child(uri: str, after: int, rng: random.Random) -> int:
    """Run the child until it acknowledged ``after`` calls, then SIGKILL it a random few
    milliseconds later (mid-call, usually); return the last acknowledged order."""
    proc = subprocess.Popen([sys.executable, "-c", CHILD, uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last, seen = -1, 0
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            last, seen = int(line), seen + 1
            if seen >= after:
                time.sleep(rng.uniform(0, 0.02))
                break
            if time.monotonic() > deadline:
                pytest.fail("child too slow")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, f"child ended on its own ({proc.returncode}): {stderr}"
    return last


def check(uri: str, acknowledged: int, settle: bool) -> None:
    """Every acknowledged turn is stored, no turn has two memories; with ``settle`` one more
    call leaves every stored turn with exactly one."""
    namespace: dict[str, Any] = {}
    exec(EXTRACTOR, namespace)
    memory = AgentMemory(uri, embedder=HashingEmbedder(64), extractor=namespace["Stamped"]())
    try:
        if settle:
            memory.get_thread("t").add_messages([{"role": "user", "content": "Order 19999 arrived damaged and I need a return."}])
        store = memory.store
        messages = store.query(RecordFilter(record_types=frozenset({RecordType.MESSAGE})))
        turns = sorted(n for m in messages if m.role == "user" for n in orders_in(m.content))
        found = sorted(n for m in store.query(RecordFilter(record_types=MEMORY_TYPES)) for n in orders_in(m.content))
        assert set(range(acknowledged + 1)) <= set(turns), "an acknowledged message is lost"
        assert len(found) == len(set(found)), "a message was extracted twice"
        if settle:
            assert found == turns and 9999 in turns
    finally:
        memory.close()


@pytest.mark.parametrize("backend", ["duckdb", "hnswlib"])
def test_sigkill_during_add_messages_loses_nothing_acknowledged_and_extracts_once(backend: str, tmp_path: Path) -> None:
    pytest.importorskip(f"agentmemory_{backend}")
    uri = f"{backend}://{tmp_path / 'store'}"
    rng = random.Random(31)
    acknowledged = -1
    for _ in range(3):
        acknowledged = max(acknowledged, kill_child(uri, rng.randint(3, 12), rng))
        check(uri, acknowledged, settle=False)
    check(uri, acknowledged, settle=True)
