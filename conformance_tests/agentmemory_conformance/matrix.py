"""The self-reported compliance matrix: capability / spec clause x result for one backend (in the
spirit of OpenTelemetry's spec-compliance matrix), and the combined table over several.

Built from the conformance report (``--agentmemory-report-json``, see ``report.py``): the
matrix adds nothing the report does not know except its shape — every clause and capability of
the suite is a row (``not run`` when the run did not select it), each with one result, the
counts, the gist of every skip reason and the failed tests.

    agentmemory-conformance report --backend duckdb --out duckdb.md --out duckdb.json
    agentmemory-conformance report --backend duckdb --from-json report.json --format md
    agentmemory-conformance combine memory.json duckdb.json --readme README.md

(``python -m agentmemory_conformance ...`` is the same command.) ``report`` runs the suite in a
subprocess (``pytest --pyargs agentmemory_conformance --agentmemory-backend NAME``) unless
``--from-json`` names a report it wrote already.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

MATRIX_FORMAT = 1
RESULTS = ("passed", "failed", "skipped", "xfailed", "not run")
COUNTS = ("passed", "failed", "skipped", "xfailed")
README_START = "<!-- compliance-matrix:start (generated: agentmemory-conformance combine) -->"
README_END = "<!-- compliance-matrix:end -->"


# ---- what the suite has --------------------------------------------------------------------------
def suite_catalogue() -> dict[str, dict[str, list[str]]]:
    """The suite's own rows, read from its test classes (no run): ``{"clauses": {clause: [test
    names]}, "capabilities": {capability: [test names]}}``; ``core`` holds the tests that need no
    optional capability, ``unclassified`` the tests without a clause (as in the report)."""
    from agentmemory.spi import Capability

    from .suite import BackendConformance

    clauses: dict[str, set[str]] = {}
    capabilities: dict[str, set[str]] = {"core": set(), **{c.value: set() for c in Capability}}
    for name in dir(BackendConformance):
        if not name.startswith("test_"):
            continue
        marks = getattr(getattr(BackendConformance, name), "pytestmark", [])
        found = sorted({c for m in marks if m.name == "agentmemory_clause" for c in m.args})
        needs = sorted({c for m in marks if m.name == "agentmemory_requires" for c in m.args})
        for clause in found or ["unclassified"]:
            clauses.setdefault(clause, set()).add(name)
        for cap in needs or ["core"]:
            capabilities.setdefault(cap, set()).add(name)
    return {
        "clauses": {k: sorted(v) for k, v in sorted(clauses.items())},
        "capabilities": {k: sorted(v) for k, v in capabilities.items()},
    }


# ---- one backend ----------------------------------------------------------------------------------
def reason_gist(reason: str, limit: int = 200) -> str:
    """A skip reason as one short line: first line, per-test paths and ids left out."""
    text = (reason or "").strip().removeprefix("Skipped: ").splitlines()[0] if (reason or "").strip() else "no reason given"
    text = re.sub(r"(?<![\w.])(/[\w.@+-]+){2,}/?", "<path>", text)  # absolute paths (per-test directories)
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id>", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def short_test(nodeid: str) -> str:
    """``path::Class::test_x[memory-sync]`` -> ``test_x[sync]`` (the backend id left out)."""
    name = nodeid.rsplit("::", 1)[-1]
    base, bracket, params = name.partition("[")
    if not bracket:
        return base
    parts = params.rstrip("]").split("-")
    kept = [p for p in parts[1:]] if len(parts) > 1 else []
    return f"{base}[{'-'.join(kept)}]" if kept else base


def _result(counts: Mapping[str, int]) -> str:
    if counts.get("failed"):
        return "failed"
    if counts.get("passed"):
        return "passed"
    if counts.get("skipped"):
        return "skipped"
    if counts.get("xfailed"):
        return "xfailed"
    return "not run"


def _row(key: str, name: str, tests: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    counts = dict.fromkeys(COUNTS, 0)
    reasons: dict[str, int] = {}
    failures: list[dict[str, str]] = []
    opt_outs: list[dict[str, str]] = []
    for t in tests:
        counts[t["outcome"]] += 1
        if t["outcome"] == "skipped":
            gist = reason_gist(str(t.get("detail", "")))
            reasons[gist] = reasons.get(gist, 0) + 1
        elif t["outcome"] == "failed":
            failures.append({"test": short_test(t["test"]), "error": reason_gist(str(t.get("detail", "")), 200)})
        elif t["outcome"] == "xfailed":
            opt_outs.append({"test": short_test(t["test"]), "reason": reason_gist(str(t.get("detail", "")), 200)})
    row: dict[str, Any] = {key: name, **(extra or {}), "result": _result(counts), **counts}
    row["skip_reasons"] = [{"reason": r, "tests": n} for r, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    row["failures"] = failures
    row["opt_outs"] = opt_outs
    return row


def pick_report(data: Mapping[str, Any], backend: str | None) -> dict[str, Any]:
    """The backend's report out of a ``--agentmemory-report-json`` file (``{"reports": [...]}``)
    or a single report (``validate().to_dict()``)."""
    reports = list(data.get("reports", [data]))
    if backend is not None:
        named = [r for r in reports if (r.get("backend") or {}).get("name") == backend or str(r.get("group", "")).endswith(f"[{backend}]")]
        if named:
            return dict(named[0])
    with_backend = [r for r in reports if "TestRegisteredBackend" in str(r.get("group", "")) or r.get("backend")]
    if not with_backend:
        raise ValueError(f"no backend report in the file (groups: {[r.get('group') for r in reports]})")
    return dict(with_backend[0])


def backend_info(name: str | None, report: Mapping[str, Any]) -> dict[str, Any]:
    """The backend header: from the report (a store was built), else from the registered class
    (e.g. Oracle offline: no store was ever built, its class still says what it is)."""
    info = dict(report.get("backend") or {})
    if info:
        return info
    out: dict[str, Any] = {"name": name, "class": None, "spec_version": None, "capabilities": None, "min_recall_at_10": None}
    if name:
        try:
            from agentmemory.plugins import get_plugin_manager

            cls = get_plugin_manager().load("backends", name)
            out.update({"name": getattr(cls, "name", name), "class": f"{cls.__module__}.{cls.__qualname__}",
                        "spec_version": getattr(cls, "spec_version", None),
                        "capabilities": None, "note": "no store was built: capabilities unknown (declared by an open store)"})
        except Exception as exc:  # noqa: BLE001 - the header says why it is incomplete
            out["note"] = f"backend class not loadable: {exc}"
    return out


def build_matrix(report: Mapping[str, Any], *, backend: str | None = None, command: str | None = None,
                 selection: str | None = None) -> dict[str, Any]:
    """The compliance matrix of one backend from its conformance report."""
    from agentmemory.spi import SPEC_VERSION, Capability

    from . import __version__

    catalogue = suite_catalogue()
    info = backend_info(backend, report)
    declared = set(info.get("capabilities") or [])
    tests = list(report.get("tests", []))
    by_clause: dict[str, list[Mapping[str, Any]]] = {c: [] for c in catalogue["clauses"]}
    by_cap: dict[str, list[Mapping[str, Any]]] = {c: [] for c in catalogue["capabilities"]}
    for t in tests:
        for c in t.get("clauses") or ["unclassified"]:
            by_clause.setdefault(c, []).append(t)
        for c in t.get("requires") or ["core"]:
            by_cap.setdefault(c, []).append(t)
    known_caps = {c.value for c in Capability}
    capabilities = [
        _row("capability", cap, by_cap[cap], {
            "declared": True if cap == "core" else (cap in declared if info.get("capabilities") is not None else None),
            "suite_tests": len(catalogue["capabilities"].get(cap, [])),
        })
        for cap in ["core", *sorted(c for c in by_cap if c != "core")]
        if cap == "core" or cap in known_caps or by_cap[cap]
    ]
    clauses = [_row("clause", c, by_clause[c], {"suite_tests": len(catalogue["clauses"].get(c, []))}) for c in sorted(by_clause)]
    totals = {k: int(report.get("totals", {}).get(k, 0)) for k in COUNTS}
    return {
        "matrix_format": MATRIX_FORMAT,
        "suite": "agentmemory-conformance",
        "suite_version": report.get("suite_version", __version__),
        "spec_version": report.get("spec_version", SPEC_VERSION),
        "profile": report.get("profile"),
        "selection": selection,
        "command": command,  # what regenerates it (the run; --from-json renders a report that run wrote)
        "backend": info,
        "ok": totals["failed"] == 0 and totals["passed"] > 0,
        "totals": totals,
        "capabilities": capabilities,
        "clauses": clauses,
    }


def _counts_cell(row: Mapping[str, Any]) -> str:
    return " / ".join(str(row[k]) for k in COUNTS)


def _notes(row: Mapping[str, Any]) -> str:
    parts = [f"{r['tests']} skipped: {r['reason']}" for r in row["skip_reasons"]]
    parts += [f"FAILED {f['test']}: {f['error']}" for f in row["failures"]]
    parts += [f"opt-out {o['test']}: {o['reason']}" for o in row["opt_outs"]]
    return "<br>".join(_md(p) for p in parts)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(matrix: Mapping[str, Any]) -> str:
    """One backend's matrix as Markdown."""
    b = matrix["backend"]
    t = matrix["totals"]
    caps = b.get("capabilities")
    lines = [
        f"# Compliance matrix: `{b.get('name')}`",
        "",
        f"* suite: {matrix['suite']} {matrix['suite_version']} (profile `{matrix['profile']}`), SPI spec {matrix['spec_version']}",
        f"* backend: `{b.get('name')}` (`{b.get('class')}`), spec_version {b.get('spec_version')}",
        f"* declared capabilities: {', '.join(f'`{c}`' for c in caps) if caps else ('none' if caps == [] else 'unknown')}"
        + (f" ({b['note']})" if b.get("note") else ""),
        f"* totals: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped, {t['xfailed']} xfailed"
        + (f" (selection: `{matrix['selection']}`)" if matrix.get("selection") else ""),
    ]
    if matrix.get("command"):
        lines.append(f"* regenerate: `{matrix['command']}`")
    lines += ["", "## Capabilities", "", "| capability | declared | result | passed / failed / skipped / xfailed | notes |", "|---|---|---|---|---|"]
    for row in matrix["capabilities"]:
        declared = {True: "yes", False: "no", None: "?"}[row["declared"]]
        lines.append(f"| `{row['capability']}` | {declared} | {row['result']} | {_counts_cell(row)} | {_notes(row)} |")
    lines += ["", "## Spec clauses", "", "| clause | result | passed / failed / skipped / xfailed | notes |", "|---|---|---|---|"]
    for row in matrix["clauses"]:
        lines.append(f"| `{row['clause']}` | {row['result']} | {_counts_cell(row)} | {_notes(row)} |")
    return "\n".join(lines) + "\n"


def render_json(matrix: Mapping[str, Any]) -> str:
    """The matrix as stable JSON."""
    return json.dumps(matrix, indent=2, sort_keys=True) + "\n"


# ---- several backends -------------------------------------------------------------------------------
_MARK = {"passed": "✅", "failed": "❌", "skipped": "⏭️", "xfailed": "⚠️", "not run": "—"}


def _cell(row: Mapping[str, Any] | None, footnotes: dict[str, int]) -> str:
    if row is None:
        return "—"
    result = row["result"]
    if result == "not run":
        return "—"
    text = f"{_MARK[result]} {row['passed']}" if result == "passed" else _MARK[result]
    if result == "failed":
        text = f"{_MARK['failed']} {row['failed']} of {row['passed'] + row['failed']}"
    if result == "xfailed":
        text = f"{_MARK['xfailed']} {row['xfailed']} opt-out"
    if row["skipped"]:
        marks = []
        for r in row["skip_reasons"]:
            number = footnotes.setdefault(r["reason"], len(footnotes) + 1)
            marks.append(str(number))
        text += f" ({row['skipped']} skipped<sup>{','.join(marks)}</sup>)" if result != "skipped" else f" {row['skipped']}<sup>{','.join(marks)}</sup>"
    return text


def render_combined(matrices: Sequence[Mapping[str, Any]]) -> str:
    """Several backends' matrices as one Markdown table (rows: capabilities, then clauses)."""
    names = [str(m["backend"].get("name")) for m in matrices]
    versions = sorted({(m["suite_version"], m["spec_version"], m["profile"]) for m in matrices})
    footnotes: dict[str, int] = {}
    head = "| | " + " | ".join(f"`{n}`" for n in names) + " |"
    rule = "|---|" + "---|" * len(names)
    lines = [
        "Suite " + "; ".join(f"agentmemory-conformance {v} (SPI spec {s}, profile `{p}`)" for v, s, p in versions)
        + ". Each cell: tests passed (✅), failed (❌), skipped (⏭️, the footnote says why), opted out (⚠️, strict xfail) or none run (—).",
        "",
        "| backend | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "---|" * len(names),
        "| spec_version | " + " | ".join(str(m["backend"].get("spec_version")) for m in matrices) + " |",
        "| totals (passed / failed / skipped) | " + " | ".join(f"{m['totals']['passed']} / {m['totals']['failed']} / {m['totals']['skipped']}" for m in matrices) + " |",
        "",
        "**Capabilities** (declared: ✔ yes, ✘ no, ? unknown: no store was built; `approximate_search` gates no test of its own, "
        "a backend declaring it is held to its `min_recall_at_10` in the vector-search tests)",
        "",
        head,
        rule,
    ]
    caps = _ordered_keys(matrices, "capabilities", "capability")
    for cap in caps:
        cells = []
        for m in matrices:
            row = next((r for r in m["capabilities"] if r["capability"] == cap), None)
            declared = "" if row is None or cap == "core" else {True: "✔ ", False: "✘ ", None: "? "}[row["declared"]]
            cells.append(declared + _cell(row, footnotes))
        lines.append(f"| `{cap}` | " + " | ".join(cells) + " |")
    lines += ["", "**Spec clauses**", "", head, rule]
    for clause in _ordered_keys(matrices, "clauses", "clause"):
        cells = [_cell(next((r for r in m["clauses"] if r["clause"] == clause), None), footnotes) for m in matrices]
        lines.append(f"| `{clause}` | " + " | ".join(cells) + " |")
    if footnotes:
        lines += ["", "Skip reasons:", ""]
        lines += [f"{n}. {_md(reason)}" for reason, n in sorted(footnotes.items(), key=lambda kv: kv[1])]
    return "\n".join(lines) + "\n"


def _ordered_keys(matrices: Sequence[Mapping[str, Any]], part: str, key: str) -> list[str]:
    seen: list[str] = []
    for m in matrices:
        for row in m[part]:
            if row[key] not in seen:
                seen.append(row[key])
    return seen


def replace_readme_section(readme: str, table: str) -> str:
    """``readme`` with the text between the matrix markers replaced by ``table``."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {README_START!r} ... {README_END!r} section")
    return readme[: start + len(README_START)] + "\n\n" + table + "\n" + readme[end:]


# ---- running the suite ------------------------------------------------------------------------------
def run_suite(backend: str, *, options: Iterable[str] = (), uri: str | None = None, profile: str | None = None,
              select: str | None = None, pytest_args: Iterable[str] = (), quiet: bool = True) -> dict[str, Any]:
    """Run the zero-code suite on ``backend`` in a subprocess; its ``--agentmemory-report-json``."""
    with tempfile.TemporaryDirectory(prefix="agentmemory-matrix-") as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pytest", "--pyargs", "agentmemory_conformance", "--agentmemory-backend", backend,
               "--agentmemory-report-json", str(out), "-p", "no:cacheprovider", "-q"]
        for opt in options:
            cmd += ["--agentmemory-option", opt]
        if uri:
            cmd += ["--agentmemory-uri", uri]
        if profile:
            cmd += ["--agentmemory-profile", profile]
        if select:
            cmd += ["-k", select]
        cmd += list(pytest_args)
        env = dict(os.environ)
        if env.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
            cmd += ["-p", "agentmemory_conformance.pytest_plugin"]
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=quiet, text=True, check=False)
        if proc.returncode not in (0, 1) or not out.exists():
            tail = (proc.stdout or "")[-3000:] + (proc.stderr or "")[-3000:] if quiet else ""
            raise RuntimeError(f"the suite did not run (exit code {proc.returncode}): {' '.join(cmd)}\n{tail}")
        data: dict[str, Any] = json.loads(out.read_text())
        return data


def _write(matrix: Mapping[str, Any], target: str, fmt: str | None) -> None:
    kind = fmt or ("json" if target.endswith(".json") else "md")
    text = render_json(matrix) if kind == "json" else render_markdown(matrix)
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentmemory-conformance", description="The conformance suite's compliance matrix.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="run the suite on a backend (or read its JSON report) and write its compliance matrix")
    rep.add_argument("--backend", required=True, metavar="NAME", help="the registered backend (as --agentmemory-backend)")
    rep.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="as --agentmemory-option (repeatable)")
    rep.add_argument("--uri", default=None, help="as --agentmemory-uri")
    rep.add_argument("--profile", default=None, help="Hypothesis profile (smoke, ci, remote, nightly)")
    rep.add_argument("-k", dest="select", default=None, metavar="EXPR", help="run only the tests matching EXPR (pytest -k); the rest show as 'not run'")
    rep.add_argument("--from-json", default=None, metavar="PATH", help="read this --agentmemory-report-json file instead of running the suite")
    rep.add_argument("--format", choices=("md", "json"), default=None, help="format of standard output / of --out paths without .md or .json")
    rep.add_argument("--out", action="append", default=[], metavar="PATH", help="write the matrix here (repeatable; .json = JSON, else Markdown; default: standard output)")
    rep.add_argument("--save-report", default=None, metavar="PATH", help="also keep the suite's --agentmemory-report-json here")
    rep.add_argument("--pytest-arg", action="append", default=[], metavar="ARG", help="passed to pytest as is (repeatable)")
    com = sub.add_parser("combine", help="one Markdown table of several backends' matrix JSON files")
    com.add_argument("matrices", nargs="+", metavar="MATRIX.json")
    com.add_argument("--out", default=None, metavar="PATH", help="write the table here (default: standard output)")
    com.add_argument("--readme", default=None, metavar="PATH", help="replace the compliance-matrix section of this README with the table")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``agentmemory-conformance report|combine``; exit 1 when the matrix shows a failure."""
    args = _parser().parse_args(argv)
    if args.command == "combine":
        matrices = [json.loads(Path(p).read_text()) for p in args.matrices]
        table = render_combined(matrices)
        if args.readme:
            path = Path(args.readme)
            path.write_text(replace_readme_section(path.read_text(), table))
        if args.out:
            Path(args.out).write_text(table)
        if not args.readme and not args.out:
            sys.stdout.write(table)
        return 1 if any(not m["ok"] and m["totals"]["failed"] for m in matrices) else 0
    command = " ".join(["agentmemory-conformance report --backend", args.backend, *(f"--option {o}" for o in args.option),
                        *([f"--uri {args.uri}"] if args.uri else []), *([f"--profile {args.profile}"] if args.profile else []),
                        *([f"-k '{args.select}'"] if args.select else [])])
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        data = run_suite(args.backend, options=args.option, uri=args.uri, profile=args.profile, select=args.select,
                         pytest_args=args.pytest_arg)
        if args.save_report:
            Path(args.save_report).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    matrix = build_matrix(pick_report(data, args.backend), backend=args.backend, command=command, selection=args.select)
    for target in args.out or ["-"]:
        _write(matrix, target, args.format)
    return 1 if matrix["totals"]["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
