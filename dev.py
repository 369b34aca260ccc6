#!/usr/bin/env python3
"""The project's two commands, each installing what it needs into ./.venv first.

    python3 dev.py demo    # play the seed scenarios on the embedded default (DuckDB + local embedder)
    python3 dev.py test    # lint, type-check and run every test suite

Only a Python >= 3.10 with venv is required; packages come from the package index.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
TEST_PATHS = [
    "tests",
    "backends/duckdb/tests",
    "backends/hnswlib/tests",
    "backends/oracle/tests",
    "backends/postgres/tests",
    "conformance_tests/tests",
    "benchmarks/tests",
    "plugins/rerank-http/tests",
    "plugins/dates/tests",
    "plugins/jinja-card/tests",
]


def run(*cmd: str | Path) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True)


def install(name: str, *args: str) -> None:
    """``pip install *args`` into the venv, skipped when nothing it reads changed since the last
    install of ``name``: the arguments and every ``pyproject.toml`` and requirements file (the
    installs are editable, so code changes need no reinstall). Delete ``.venv`` to force one."""
    inputs = sorted([*ROOT.glob("**/pyproject.toml"), *ROOT.glob("requirements*.txt")])
    digest = hashlib.sha256(" ".join([sys.version, *args]).encode())
    for path in inputs:
        if ".venv" not in path.parts:
            digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    stamp = VENV / f".installed-{name}"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    run(PY, "-m", "pip", "install", "-q", *args)
    stamp.write_text(digest.hexdigest())


def ensure_venv() -> None:
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
        run(PY, "-m", "pip", "install", "-q", "--upgrade", "pip")


def demo() -> int:
    ensure_venv()
    install("demo", "-e", ".[local]", "-e", "./backends/duckdb")
    return subprocess.run([str(BIN / "agentmemory"), "demo", *sys.argv[2:]], cwd=ROOT).returncode


def test() -> int:
    ensure_venv()
    install("test", "-r", "requirements-dev.txt")
    run(PY, "-m", "ruff", "check", "agentmemory")
    run(PY, "-m", "mypy", "agentmemory")
    run(BIN / "lint-imports", "--no-cache")  # the layers and the absence of cycles (pyproject.toml, docs/architecture.md)
    paths = [p for p in TEST_PATHS if (ROOT / p).is_dir()]
    code = subprocess.run([str(PY), "-m", "pytest", *paths, *sys.argv[2:]], cwd=ROOT).returncode
    if code == 5:  # pytest's "no tests collected" must not pass as green
        print("no tests were collected: failing", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    commands = {"demo": demo, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(__doc__)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]]())
