"""``agentmemory demo`` plays into the default store without harming what else is in it.

It writes only its three marked threads (link extraction off), a rerun replaces them instead of
adding a second copy, a thread with a demo id that the demo did not write stops it before it
writes anything, and what it stored is what ``agentmemory memories --user maya`` and
``agentmemory card demo-maya`` show. Played with the hashing embedder to stay fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.config import MemoryLinkExtractionMode
from agentmemory.demo import DEMO_MARKER, DEMO_THREADS, main
from agentmemory.records import Record
from agentmemory.registry import HOME_ENV, STORE_ENV
from agentmemory.spi import RecordFilter

pytest.importorskip("agentmemory_duckdb")
NO_EXTRACTION = {"extract_memories": False}


def open_store(uri: str) -> AgentMemory:
    return AgentMemory(uri, embedder=HashingEmbedder())


def everything(uri: str) -> tuple[list[Record], list[object]]:
    with open_store(uri) as memory:
        return memory.store.query(RecordFilter()), list(memory.store.links())


def not_demo(records: list[Record]) -> list[Record]:
    return [r for r in records if r.thread_id not in DEMO_THREADS]


@pytest.fixture
def user_store(tmp_path: Path) -> str:
    """A store with a user's own data: Maya of the same agent as the demo (a README quick-start
    thread, with a lifecycle link) and another user."""
    uri = f"duckdb://{tmp_path / 'mine.duckdb'}"
    with open_store(uri) as memory:
        mine = memory.create_thread("quickstart", user_id="maya", agent_id="ops-assistant", memory_extraction_config=NO_EXTRACTION)
        mine.add_messages([{"role": "user", "content": "I'm Maya. I'm migrating our nightly invoice reconciliation to LangGraph."}])
        old = mine.add_memory("The user's name is Maya.", memory_type="fact")
        mine.add_memory("Maya's full name is Maya Lopez.", memory_type="fact", memory_id_to_link=old, link_type="refines")
        mine.add_memory("Maya prefers email.", memory_type="preference", metadata={"source": "crm"})
        memory.add_memory("Zed likes tea.", user_id="zed")
    return uri


def play(uri: str) -> int:
    return main(["--store", uri, "--embedder", "hashing"])


def test_demo_keeps_other_data_and_replaces_its_own_on_rerun(user_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    before, links_before = everything(user_store)
    assert play(user_store) == 0
    first, _ = everything(user_store)
    demo_first = [r for r in first if r.thread_id in DEMO_THREADS]
    assert not_demo(first) == before  # the user's records, statuses and metadata untouched
    assert {r.thread_id for r in demo_first} == set(DEMO_THREADS)
    assert any(r.record_type.value == "fact" and r.thread_id == "demo-maya" for r in demo_first)

    assert play(user_store) == 0
    second, links_after = everything(user_store)
    demo_second = [r for r in second if r.thread_id in DEMO_THREADS]
    assert not_demo(second) == before and links_after == links_before  # the demo adds no links
    assert len(demo_second) == len(demo_first)  # replaced, not duplicated
    written = [{r.record_id for r in rows if r.record_type.value != "thread"} for rows in (demo_first, demo_second)]
    assert written[0] and not written[0] & written[1]  # the first run's messages and memories are gone
    with open_store(user_store) as memory:
        for thread_id in DEMO_THREADS:
            thread = memory.get_thread(thread_id)
            assert thread.metadata == {DEMO_MARKER: True}
            assert thread.persisted_config.memory_link_extraction_mode is MemoryLinkExtractionMode.DISABLED
    out = capsys.readouterr().out
    assert "removed the previous demo run" in out
    assert f"agentmemory memories --user maya --store {user_store} --embedder hashing" in out
    assert f"agentmemory card demo-maya --store {user_store} --embedder hashing" in out


def test_demo_stops_on_a_thread_it_did_not_write(user_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    with open_store(user_store) as memory:
        memory.create_thread("demo-bob", user_id="bob", memory_extraction_config=NO_EXTRACTION).add_messages(
            [{"role": "user", "content": "my own thread, not the demo's"}]
        )
    before = everything(user_store)
    assert play(user_store) == 1
    assert everything(user_store) == before
    err = capsys.readouterr().err
    assert err.startswith("error: thread 'demo-bob'") and "--store" in err


def test_demo_then_inspect_on_the_default_store(tmp_path: Path) -> None:
    """The issue's done-when: ``agentmemory demo`` then ``memories --user maya`` and
    ``card demo-maya`` on the default store, as separate processes."""
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
    env[HOME_ENV] = str(tmp_path / "home")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "agentmemory.cli", *args, "--embedder", "hashing"],
                              capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    demo = run("demo")
    assert (tmp_path / "home" / "memory.duckdb").exists()
    assert "agentmemory memories --user maya --embedder hashing" in demo.stdout
    memories = run("memories", "--user", "maya").stdout
    assert "The failing step is ledger enrichment after reconciliation." in memories
    card = run("card", "demo-maya")
    assert card.stdout.startswith("<context_card>") and "ledger enrichment" in card.stdout
    assert "tokens" in card.stderr


def test_every_demo_card_is_smaller_than_its_transcript_or_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#29: each card either costs less than the transcript it stands for or says why, the
    support scenario also shows the transcript itself, and no card repeats a line of text."""
    assert play(f"duckdb://{tmp_path / 'demo.duckdb'}") == 0
    out = capsys.readouterr().out
    cards = out.split("<context_card>")[1:]
    assert len(cards) == 3
    figures = [line for line in out.splitlines() if line.strip().startswith("card: ")]
    assert len(figures) == 3
    assert "the transcript itself, sent in place of a card: " in out  # the support thread, as it is
    for line, after in zip(figures, out.split("  card: ")[1:]):
        tokens, transcript = int(line.split()[1]), int(line.split("stands for: ")[1].split()[0])
        assert tokens <= transcript or "is larger than the" in after.split("\n====")[0]
    assert "user: Hi, order 7421 arrived damaged." in out.split("short_thread='transcript'")[-1]
    for card in cards:
        body = card.split("</context_card>")[0]
        summary = body.split("<summary>")[1].split("</summary>")[0] if "<summary>" in body else ""
        rest = body.replace(summary, "")
        clauses = [c.split(": ", 1)[-1].strip() for c in summary.replace(";", "\n").splitlines() if len(c.strip()) > 20]
        assert len(clauses) == len(set(clauses)), "the summary repeats a text"
        assert not [c for c in clauses if c in rest], "the summary repeats a text shown elsewhere in the card"
