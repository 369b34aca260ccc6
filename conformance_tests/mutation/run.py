#!/usr/bin/env python3
"""Mutation testing of the conformance suite: how many single-point bugs in the reference store,
the metadata-filter matcher and the DuckDB backend does the suite catch?

    .venv/bin/python conformance_tests/mutation/run.py                # everything (hours on 2 cores)
    .venv/bin/python conformance_tests/mutation/run.py --targets core # reference_store.py + filters.py
    .venv/bin/python conformance_tests/mutation/run.py --targets duckdb --jobs 2 --timeout 300

Each mutant (``mutants.py``: operator and comparison swaps, constants off by one, negated
conditions, removed statements, off-by-one slices, SQL operator swaps) is loaded in place of its
module by a pytest plugin (``mutation_plugin.py``; no file of the tree is changed) and the
conformance suite runs on the backend built from it with the ``smoke`` profile, ``-x`` and a
fixed Hypothesis seed. Mutants of ``reference_store.py`` and ``filters.py`` run on
``InMemoryStore`` against a pristine copy of the reference (the state machine's model); DuckDB
mutants run on ``DuckDBStore``.

Only the tests that execute a mutant's lines run for it (a traced run of the unmutated suite
maps lines to tests, cheapest first); a mutant whose lines no test executes is a survivor
("not reached") without a run. A mutant survives when every selected test passes; one that
runs past its time budget counts as killed (``timeout``). Mutants classified by hand in
``equivalent.json`` are not run and are left out of the kill rate, each with its reason:
*equivalent* (no behaviour the SPI can observe changes) or *out of scope* (a backend's own
constructor options and diagnostics, which no backend-independent suite can know); an entry
names one mutant (``key``, as ``--list-keys`` prints it) or every mutant of a function
(``function``: ``file::Qualname``).

Results go to ``--out`` (default ``$TMPDIR/agentmemory-mutation``): ``results.jsonl`` (one line
per mutant, reused by the next run while the mutated source, the suite and the seed are
unchanged: an interrupted run resumes), ``summary.md`` (the kill rate and every survivor).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TREE = ROOT
"""The tree under test: this checkout, or an exported commit (``--commit``)."""
sys.path.insert(0, str(HERE))

from mutants import Mutant, generate, source_hash  # noqa: E402

SUBJECTS = {
    "memory": (
        "from agentmemory_conformance import BackendConformance\n"
        "from agentmemory.reference_store import InMemoryStore\n\n\n"
        "class TestSubject(BackendConformance):\n"
        "    def make_store(self, path):\n"
        "        return InMemoryStore()\n"
    ),
    "duckdb": (
        "from agentmemory_conformance import BackendConformance\n"
        "from agentmemory_duckdb import DuckDBStore\n\n\n"
        "class TestSubject(BackendConformance):\n"
        "    def make_store(self, path):\n"
        "        return DuckDBStore(path / 'memory.duckdb')\n"
    ),
}
DUCKDB = "backends/duckdb/agentmemory_duckdb"


@dataclass(frozen=True)
class Target:
    """A file to mutate: its module, the backend the suite runs on, SQL-string mutation."""

    file: str
    module: str
    subject: str
    sql: bool = False


TARGETS = {
    "core": [
        Target("agentmemory/reference_store.py", "agentmemory.reference_store", "memory"),
        Target("agentmemory/filters.py", "agentmemory.filters", "memory"),
    ],
    "duckdb": [
        Target(f"{DUCKDB}/store.py", "agentmemory_duckdb.store", "duckdb", sql=True),
        Target(f"{DUCKDB}/_sql.py", "agentmemory_duckdb._sql", "duckdb", sql=True),
        Target(f"{DUCKDB}/_keyword.py", "agentmemory_duckdb._keyword", "duckdb", sql=True),
        Target(f"{DUCKDB}/_schema.py", "agentmemory_duckdb._schema", "duckdb", sql=True),
        Target(f"{DUCKDB}/_windows.py", "agentmemory_duckdb._windows", "duckdb"),
    ],
}
PRISTINE_SOURCES = {"agentmemory.filters": "agentmemory/filters.py", "agentmemory.reference_store": "agentmemory/reference_store.py"}


def suite_hash() -> str:
    """Fingerprint of the suite's code: results of an older suite are not reused (nor those of
    another mutant numbering: a reused result must also carry the same mutant key)."""
    h = hashlib.sha256()
    for path in sorted((TREE / "conformance_tests/agentmemory_conformance").rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


# ---- one pytest run ---------------------------------------------------------------------------
def pytest_run(subject: str, workdir: Path, *, env_extra: dict[str, str], seed: int, timeout: float, fail_fast: bool = True) -> tuple[str, float, str]:
    """Run the suite on ``subject`` in ``workdir``; (outcome, seconds, output tail) where outcome is
    ``passed``, ``failed``, ``error`` (harness problem) or ``timeout``."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pytest.ini").write_text("[pytest]\n")
    (workdir / "test_subject.py").write_text(SUBJECTS[subject])
    paths = [str(HERE)] + ([] if TREE == ROOT else [str(TREE), str(TREE / "conformance_tests"), str(TREE / "backends/duckdb")])
    env = {**os.environ, **env_extra, "PYTHONPATH": os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "PYTHONDONTWRITEBYTECODE": "1", "AGENTMEMORY_MUTANT_TREE": str(TREE), "HYPOTHESIS_STORAGE_DIRECTORY": str(workdir / ".hypothesis")}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutation_plugin",
           "--agentmemory-profile", "smoke", "-W", "ignore", f"--hypothesis-seed={seed}",
           f"--basetemp={workdir / 'tmp'}", "test_subject.py"]
    if fail_fast:
        cmd.insert(4, "-x")
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        return "timeout", time.monotonic() - start, out[-3000:]
    seconds = time.monotonic() - start
    if proc.returncode == 0:
        return "passed", seconds, out[-3000:]
    if proc.returncode in (1, 2):  # tests failed / collection (the mutated import) failed
        return "failed", seconds, out[-3000:]
    return "error", seconds, out[-3000:]


def failing_test(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split("::")[-1]
    return ""


# ---- the coverage map ----------------------------------------------------------------------------
@dataclass
class CoverageMap:
    """Which tests execute which lines (from a traced run of the unmutated suite)."""

    order: list[str]
    durations: dict[str, float]
    lines: dict[str, dict[int, set[str]]]  # file -> line -> tests
    import_lines: dict[str, set[int]]

    def tests_for(self, file: str, first: int, last: int) -> list[str] | None:
        """Tests reaching lines ``first..last`` of ``file``, cheapest first; None = every test
        (the lines run at import time: module constants, defaults)."""
        if any(n in self.import_lines.get(file, set()) for n in range(first, last + 1)):
            return sorted(self.order, key=lambda t: self.durations.get(t, 0.0))
        per_line = self.lines.get(file, {})
        tests = set().union(*(per_line.get(n, set()) for n in range(first, last + 1)))
        return sorted(tests, key=lambda t: (self.durations.get(t, 0.0), self.order.index(t)))

    def seconds(self, tests: list[str]) -> float:
        return sum(self.durations.get(t, 1.0) for t in tests)


def coverage_map(subject: str, files: list[str], out: Path, seed: int, key: str) -> CoverageMap:
    cache = out / f"trace-{subject}-{key}.json"
    if not cache.exists():
        print(f"[trace] running the unmutated suite on {subject} with line tracing ...", flush=True)
        work = Path(tempfile.mkdtemp(prefix=f"trace-{subject}-", dir=out))
        env = {"AGENTMEMORY_MUTANT_TRACE": str(work / "trace.json"),
               "AGENTMEMORY_MUTANT_TRACE_FILES": json.dumps([str(TREE / f) for f in files])}
        outcome, seconds, tail = pytest_run(subject, work, env_extra=env, seed=seed, timeout=3600, fail_fast=False)
        if outcome != "passed":
            sys.exit(f"the unmutated suite does not pass on {subject} ({outcome}); fix that first:\n{tail}")
        shutil.copy(work / "trace.json", cache)
        shutil.rmtree(work, ignore_errors=True)
        print(f"[trace] {subject}: {seconds:.0f} s", flush=True)
    raw = json.loads(cache.read_text())
    order = [t for t in raw["tests"] if t != "<import>"]
    lines: dict[str, dict[int, set[str]]] = {}
    import_lines: dict[str, set[int]] = {}
    for test, per_file in raw["tests"].items():
        for absfile, nums in per_file.items():
            # the trace names files in the tree it ran in; a cached trace may come from another
            # export of the same content, so match by repo-relative path
            f = next((f for f in files if absfile.endswith("/" + f)), None)
            if f is None:
                continue
            if test == "<import>":
                import_lines.setdefault(f, set()).update(nums)
                continue
            for n in nums:
                lines.setdefault(f, {}).setdefault(n, set()).add(test)
    return CoverageMap(order, raw["durations"], lines, import_lines)


# ---- one mutant --------------------------------------------------------------------------------
def run_mutant(target: Target, mutant: Mutant, snapshot: Path, tests: list[str], budget: float, seed: int, out: Path, fail_fast: bool = True) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"m{mutant.index}-", dir=out))
    try:
        (work / "select.txt").write_text("\n".join(tests) + "\n")
        env = {
            "AGENTMEMORY_MUTANT": json.dumps({"module": target.module, "source": str(snapshot), "file": str(TREE / target.file),
                                              "index": mutant.index, "sql": target.sql}),
            "AGENTMEMORY_MUTANT_SELECT": str(work / "select.txt"),
        }
        if target.subject == "memory":
            env["AGENTMEMORY_MUTANT_PRISTINE"] = json.dumps({m: str(out / "src" / p) for m, p in PRISTINE_SOURCES.items()})
        outcome, seconds, tail = pytest_run(target.subject, work, env_extra=env, seed=seed, timeout=budget, fail_fast=fail_fast)
        if outcome == "timeout":  # a loaded machine is not a hang: one more try with thrice the time
            shutil.rmtree(work / "tmp", ignore_errors=True)
            outcome, seconds, tail = pytest_run(target.subject, work, env_extra=env, seed=seed, timeout=3 * budget, fail_fast=fail_fast)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    status = {"passed": "survived", "failed": "killed", "timeout": "timeout", "error": "error"}[outcome]
    return {"status": status, "seconds": round(seconds, 1), "tests": len(tests), "killed_by": failing_test(tail) if status == "killed" else "",
            "tail": tail[-1500:] if status != "survived" else ""}


class Classification:
    """The hand classification of ``equivalent.json``: per mutant key or per function."""

    def __init__(self, entries: list[dict[str, str]]) -> None:
        self.by_key: dict[str, tuple[str, str]] = {}
        self.by_function: dict[str, tuple[str, str]] = {}
        for e in entries:
            verdict = (e.get("kind", "equivalent"), e["reason"])
            if verdict[0] not in ("equivalent", "out-of-scope"):
                raise ValueError(f"unknown kind {verdict[0]!r} in equivalent.json")
            if "key" in e:
                self.by_key[e["key"]] = verdict
            else:
                self.by_function[e["function"]] = verdict

    def of(self, mutant: Mutant) -> tuple[str, str] | None:
        return self.by_key.get(mutant.key) or self.by_function.get(f"{mutant.file}::{mutant.function}")


def export(commit: str, out: Path) -> None:
    """Point ``TREE`` at ``commit`` exported under ``out`` (the venv's editable installs are
    shadowed through ``PYTHONPATH``, which the harness check verifies)."""
    global TREE
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    tree = out / f"tree-{sha[:12]}"
    if not tree.exists():
        tmp = out / f"tree-{sha[:12]}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        tmp.rename(tree)
    TREE = tree
    print(f"[tree] measuring commit {sha[:12]} exported at {tree}", flush=True)


def harness_check(target: Target, snapshot: Path, cmap: CoverageMap, seed: int, out: Path) -> None:
    """The unmutated module loaded the way mutants are (and the pristine oracle swapped in)
    must pass every test: otherwise kills would come from the harness."""
    marker = out / f"harness-{hashlib.sha256(json.dumps([target.file, snapshot.read_text(), suite_hash(), seed]).encode()).hexdigest()[:16]}.ok"
    if marker.exists():
        return
    print(f"[check] {target.file}: the unmutated module through the mutation loader ...", flush=True)
    null = Mutant(target.file, -1, "none", 0, 0, "<module>", "", "")
    row = run_mutant(target, null, snapshot, list(cmap.order), 3600, seed, out, fail_fast=False)
    if row["status"] != "survived":
        sys.exit(f"harness check failed on {target.file} ({row['status']}, {row['killed_by']}):\n{row.get('tail', '')}")
    marker.write_text("ok\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="all", help="core, duckdb, all, or repo-relative file paths (comma-separated)")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="time budget per mutant: 120 s + 5 x the traced time of its tests, at most this (default 600); "
                        "a mutant past it gets one retry with thrice the budget, then counts as killed (timeout)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed of every run (default 0)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "agentmemory-mutation")
    parser.add_argument("--only", default=None, help="run only mutants whose description contains this text")
    parser.add_argument("--every", type=int, default=1, help="a quicker estimate: only every N-th mutant of each file (default 1: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--list-keys", action="store_true", help="list the mutants' keys (for equivalent.json) and exit")
    parser.add_argument("--commit", default=None, help="measure this commit (exported with git archive) instead of the working tree")
    args = parser.parse_args()

    targets = _pick_targets(args.targets)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.commit:
        export(args.commit, out)
    (out / "src").mkdir(parents=True, exist_ok=True)
    # snapshot every target (and the oracle's sources): workers read these, so edits made to the
    # tree during the run do not change a mutant's numbering
    snapshots: dict[str, Path] = {}
    for rel in sorted({t.file for t in targets} | set(PRISTINE_SOURCES.values())):
        dest = out / "src" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text((TREE / rel).read_text())
        snapshots[rel] = dest
    suite = suite_hash()
    classified = Classification(json.loads((HERE / "equivalent.json").read_text()))

    plan: list[tuple[Target, Mutant]] = []
    hashes: dict[str, str] = {}
    for target in targets:
        source = snapshots[target.file].read_text()
        hashes[target.file] = source_hash(source)
        for mutant in generate(source, target.file, sql=target.sql):
            if (args.only is None or args.only in mutant.describe()) and mutant.index % args.every == 0:
                plan.append((target, mutant))
    if args.list or args.list_keys:
        for _, mutant in plan:
            print(json.dumps(mutant.key) if args.list_keys else mutant.describe())
        print(f"{len(plan)} mutants")
        return 0

    results_path = out / "results.jsonl"
    done: dict[tuple[str, int], dict[str, Any]] = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            row = json.loads(line)
            if row.get("suite") == suite and row.get("seed") == args.seed and row.get("source") == hashes.get(row["file"]):
                done[(row["file"], row["index"])] = row

    maps: dict[str, CoverageMap] = {}
    for subject in sorted({t.subject for t in targets}):
        files = [t.file for t in TARGETS["core" if subject == "memory" else "duckdb"]]
        key = hashlib.sha256(json.dumps([suite, args.seed, [hashes.get(f) or source_hash((TREE / f).read_text()) for f in files]]).encode()).hexdigest()[:16]
        maps[subject] = coverage_map(subject, files, out, args.seed, key)

    checked: set[str] = set()
    for target in targets:
        if target.subject in checked and target.subject != "memory":
            continue
        checked.add(target.subject)
        harness_check(target, snapshots[target.file], maps[target.subject], args.seed, out)

    todo: list[tuple[Target, Mutant, list[str], float]] = []
    rows: list[dict[str, Any]] = []
    for target, mutant in plan:
        base = {**mutant.as_dict(), "source": hashes[target.file], "suite": suite, "seed": args.seed}
        verdict = classified.of(mutant)
        if verdict is not None:
            rows.append({**base, "status": verdict[0], "reason": verdict[1]})
            continue
        cached = done.get((target.file, mutant.index))
        if cached is not None and cached.get("key") == mutant.key and cached["status"] in ("killed", "survived"):
            rows.append({**cached, **mutant.as_dict()})
            continue
        cmap = maps[target.subject]
        tests = cmap.tests_for(target.file, mutant.line, mutant.end_line)
        if not tests:
            row = {**base, "status": "not-reached", "seconds": 0, "tests": 0, "killed_by": ""}
            rows.append(row)
            _append(results_path, row)
            continue
        budget = min(args.timeout, 120.0 + 5.0 * cmap.seconds(tests))
        todo.append((target, mutant, tests, budget))

    print(f"{len(plan)} mutants: {len(rows)} known, {len(todo)} to run on {args.jobs} job(s)", flush=True)
    started = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            pool.submit(run_mutant, target, mutant, snapshots[target.file], tests, budget, args.seed, out): (target, mutant)
            for target, mutant, tests, budget in todo
        }
        for n, fut in enumerate(cf.as_completed(futures), 1):
            target, mutant = futures[fut]
            row = {**mutant.as_dict(), "source": hashes[target.file], "suite": suite, "seed": args.seed, **fut.result()}
            rows.append(row)
            _append(results_path, row)
            elapsed = time.monotonic() - started
            print(f"[{n}/{len(todo)} {elapsed / 60:.0f} min] {row['status']:9} {row['seconds']:6.1f}s {mutant.describe()}", flush=True)

    summary = summarize(rows, plan)
    (out / "summary.md").write_text(summary)
    print(summary)
    print(f"results: {results_path}\nsummary: {out / 'summary.md'}")
    return 0


def _pick_targets(spec: str) -> list[Target]:
    every = [t for group in TARGETS.values() for t in group]
    out: list[Target] = []
    for part in spec.split(","):
        part = part.strip()
        if part == "all":
            out += every
        elif part in TARGETS:
            out += TARGETS[part]
        else:
            match = [t for t in every if t.file == part or t.file.endswith("/" + part)]
            if not match:
                sys.exit(f"unknown target {part!r}; known: core, duckdb, all, {', '.join(t.file for t in every)}")
            out += match
    return list(dict.fromkeys(out))


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def summarize(rows: list[dict[str, Any]], plan: list[tuple[Target, Mutant]]) -> str:
    """The kill rate per file and overall, and every survivor, as Markdown."""
    order = {(t.file, m.index): i for i, (t, m) in enumerate(plan)}
    rows = sorted(rows, key=lambda r: order.get((r["file"], r["index"]), 0))
    files = list(dict.fromkeys(r["file"] for r in rows))
    lines = ["| file | mutants | equivalent | out of scope | killed | timeout | survived | not reached | error | kill rate |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    totals: dict[str, int] = {}
    for f in [*files, "total"]:
        sel = rows if f == "total" else [r for r in rows if r["file"] == f]
        c = {s: sum(1 for r in sel if r["status"] == s) for s in ("equivalent", "out-of-scope", "killed", "timeout", "survived", "not-reached", "error")}
        if f == "total":
            totals = c
        scored = len(sel) - c["equivalent"] - c["out-of-scope"] - c["error"]
        rate = (c["killed"] + c["timeout"]) / scored if scored else 1.0
        lines.append(f"| {'**total**' if f == 'total' else '`' + f + '`'} | {len(sel)} | {c['equivalent']} | {c['out-of-scope']} | {c['killed']} | {c['timeout']} | "
                     f"{c['survived']} | {c['not-reached']} | {c['error']} | {rate:.1%} |")
    scored = len(rows) - totals["equivalent"] - totals["out-of-scope"] - totals["error"]
    lines += ["", f"Kill rate: {totals['killed'] + totals['timeout']} of {scored} scored mutants ({(totals['killed'] + totals['timeout']) / max(scored, 1):.1%}; "
              f"{totals['equivalent']} equivalent and {totals['out-of-scope']} out of scope left out).", ""]
    lines += ["Survivors (`file:line [operator] before -> after`; *not reached* = no test executes the line):", ""]
    for r in rows:
        if r["status"] in ("survived", "not-reached"):
            note = " *(not reached)*" if r["status"] == "not-reached" else ""
            lines.append(f"- `{r['file']}:{r['line']}` [{r['op']}] `{r['before']}` → `{r['after']}`{note}")
    left_out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["status"] in ("equivalent", "out-of-scope"):
            left_out.setdefault((r["status"], r.get("reason", "")), []).append(r)
    if left_out:
        lines += ["", "Left out of the rate by hand (`equivalent.json`):", ""]
        for (status, reason), group in left_out.items():
            where = ", ".join(f"`{r['file'].rsplit('/', 1)[-1]}:{r['line']}` {r['op']}" for r in group[:6]) + (" …" if len(group) > 6 else "")
            lines.append(f"- *{status}* ({len(group)}): {reason} — {where}")
    errors = [r for r in rows if r["status"] == "error"]
    if errors:
        lines += ["", "Harness errors (not scored):", ""] + [f"- `{r['file']}:{r['line']}` {r['before']} → {r['after']}" for r in errors]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
