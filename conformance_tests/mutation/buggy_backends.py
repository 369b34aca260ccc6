#!/usr/bin/env python3
"""Which of the deliberately broken backends (``conformance_tests/tests/mutant_stores.py``) does
the suite catch, and how?

    .venv/bin/python conformance_tests/mutation/buggy_backends.py            # the second set
    .venv/bin/python conformance_tests/mutation/buggy_backends.py --set first --seeds 0,1,2

Runs the whole suite (no ``-x``, ``smoke`` profile) on each store with each Hypothesis seed and
prints, per store, the failing tests: *deterministic* when an example test fails (the state
machine aside), *state machine only* when only the randomised model-based test fails (caught
in some runs, not in others), *missed* when nothing fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
STATE_MACHINE = "test_state_machine_against_reference"

TEST_FILE = """
from agentmemory_conformance import BackendConformance
from mutant_stores import make


class TestUnderTest(BackendConformance):
    def make_store(self, path):
        return make({name!r}, path)
"""


def run(name: str, seed: int, timeout: float, tree: Path | None) -> tuple[str, int, list[str], str]:
    with tempfile.TemporaryDirectory(prefix="buggy-") as tmp:
        work = Path(tmp)
        (work / "pytest.ini").write_text("[pytest]\n")
        (work / "test_under_test.py").write_text(TEST_FILE.format(name=name))
        paths = [str(TESTS)] + ([] if tree is None else [str(tree), str(tree / "conformance_tests"), str(tree / "backends/duckdb")])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               "HYPOTHESIS_STORAGE_DIRECTORY": str(work / ".hypothesis")}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--agentmemory-profile", "smoke", "-W", "ignore",
               f"--hypothesis-seed={seed}", f"--basetemp={work / 'tmp'}", "test_under_test.py"]
        try:
            proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
            out = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            return name, seed, [], "timeout"
    failed = sorted({m.group(1) for line in out.splitlines() if (m := re.match(r"(?:FAILED|ERROR) \S+::(\S+?)(?: - |$)", line))})
    return name, seed, failed, out[-400:] if not failed and "passed" not in out else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", choices=["first", "second"], default="second")
    parser.add_argument("--seeds", default="0", help="comma-separated Hypothesis seeds (default 0)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--tree", type=Path, default=None,
                        help="run the suite and core of this exported tree (e.g. one run.py --commit made) instead of the installed ones")
    parser.add_argument("names", nargs="*", help="only these stores")
    args = parser.parse_args()
    sys.path.insert(0, str(TESTS))
    import mutant_stores

    stores = mutant_stores.SECOND_SET if args.set == "second" else mutant_stores.MUTANTS
    names = args.names or list(stores)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: dict[str, list[tuple[int, list[str], str]]] = {}

    def one(job: tuple[str, int]) -> tuple[str, int, list[str], str]:
        return run(job[0], job[1], args.timeout, args.tree)

    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for name, seed, failed, note in pool.map(one, [(n, s) for n in names for s in seeds]):
            results.setdefault(name, []).append((seed, failed, note))
            print(f"{name} seed={seed}: {len(failed)} failing {failed[:6]}{' ' + note if note else ''}", flush=True)
    print()
    caught = 0
    for name in names:
        runs = results[name]
        examples = sorted({t for _, failed, _ in runs for t in failed if not t.startswith(STATE_MACHINE)})
        machine = sum(1 for _, failed, _ in runs if any(t.startswith(STATE_MACHINE) for t in failed))
        if examples and all(any(not t.startswith(STATE_MACHINE) for t in failed) for _, failed, _ in runs):
            verdict = "deterministic"
            caught += 1
        elif machine:
            verdict = f"state machine only ({machine}/{len(runs)} runs)"
        else:
            verdict = "missed"
        doc = (stores[name].__doc__ or "").split("\n\n")[0].replace("\n", " ")
        print(f"- {name}: {verdict}" + (f" — by {', '.join(examples[:4])}" if examples else "") + f"\n    {doc}")
    print(f"\ncaught deterministically: {caught} of {len(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
