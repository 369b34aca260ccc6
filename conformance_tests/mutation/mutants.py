"""An AST mutant generator: every small, single-point change of one source file, numbered in a
fixed order so that a worker process re-creates mutant ``i`` from the same source.

Operators (``Mutant.op``):

* ``cmp``    a comparison operator swapped (``<``/``<=``, ``>``/``>=``, ``==``/``!=``,
  ``in``/``not in``, ``is``/``is not``)
* ``binop``  an arithmetic or set operator swapped (``+``/``-``, ``*``/``/``, ``//``/``/``,
  ``%``/``//``, ``|``/``&``)
* ``bool``   ``and``/``or`` swapped
* ``negate`` a condition negated (``if``/``while``/ternary/comprehension filter), or a ``not``
  removed
* ``const``  a number changed by one (``n``/``n + 1``; ``1``/``0``), ``True``/``False`` swapped
* ``call``   ``min``/``max`` or ``any``/``all`` swapped
* ``slice``  an off-by-one slice bound (``a[i:j]`` to ``a[i + 1:j]`` / ``a[i:j + 1]``)
* ``stmt``   a statement removed (a call for its effect, an assignment to an attribute or item,
  a re-assignment of a local, ``+=``, ``raise``, ``continue``, ``break``, ``del``)
* ``sql``    one operator or keyword inside an SQL string swapped (``AND``/``OR``,
  ``ASC``/``DESC``, ``IS NULL``/``IS NOT NULL``, ``=``/``<>``, ``<``/``<=``, ``>``/``>=``,
  ``min``/``max``, ``DISTINCT`` and ``NOT`` dropped)

Never mutated: docstrings, type annotations, ``assert`` statements, ``if TYPE_CHECKING``
blocks, logging calls, and strings other than SQL (messages are not behaviour).
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

Apply = Callable[[], None]


@dataclass(frozen=True)
class Mutant:
    """One mutation of one file (``index`` is its number in ``generate``'s order)."""

    file: str
    index: int
    op: str
    line: int
    end_line: int
    function: str
    before: str
    after: str

    @property
    def key(self) -> str:
        """Identifies the mutant across edits elsewhere in the file (not its line number):
        file, enclosing function, operator and the changed text (with an occurrence count,
        added by ``generate``)."""
        return f"{self.file}::{self.function}::{self.op}::{self.before} -> {self.after}"

    def describe(self) -> str:
        """``file:line  before -> after`` for reports."""
        return f"{self.file}:{self.line} [{self.op}] {self.before} -> {self.after}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}


_CMP_SWAP: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BIN_SWAP: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr,
}
_CALL_SWAP = {"min": "max", "max": "min", "any": "all", "all": "any"}
_LOG_NAMES = {"log", "logger", "logging", "warnings"}

# (pattern, replacement) pairs for SQL text; each match is its own mutant
_SQL_SWAPS: list[tuple[str, str]] = [
    (r"\bAND\b", "OR"), (r"\bOR\b", "AND"), (r"\bASC\b", "DESC"), (r"\bDESC\b", "ASC"),
    (r"\bIS NOT NULL\b", "IS NULL"), (r"\bIS NULL\b", "IS NOT NULL"), (r"(?<=\s)<>(?=\s)", "="),
    (r"(?<=\s)!=(?=\s)", "="), (r"(?<=\s)=(?=\s)", "<>"), (r"(?<=\s)<(?=\s)", "<="),
    (r"(?<=\s)<=(?=\s)", "<"), (r"(?<=\s)>(?=\s)", ">="), (r"(?<=\s)>=(?=\s)", ">"),
    (r"\bmin\(", "max("), (r"\bmax\(", "min("), (r"\bDISTINCT\s+", ""), (r"\bNOT\s+(?!NULL)", ""),
]
_SQL_HINT = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE|FROM|ORDER BY|JOIN|FILTER|AND|OR|IS NULL)\b")
_SQL_CLAUSE = re.compile(r"\b(SET|WHERE|ON|WHEN|FILTER|HAVING|AND|OR|SELECT|VALUES)\b")


def _src(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    return " ".join(text.split())


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Walker:
    """Walks a module in source order and yields ``(node, op, before, after, apply)``; the
    ``apply`` callable performs that one mutation on the walked tree."""

    def __init__(self, source: str, sql: bool) -> None:
        self.source = source
        self.sql = sql
        self.tree = ast.parse(source)
        self.scope: list[str] = []
        self.assigned: list[dict[str, int]] = []

    def run(self) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        yield from self._body(self.tree, "body")

    # ---- traversal -------------------------------------------------------------------------
    def _body(self, owner: ast.AST, field: str) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        stmts: list[ast.stmt] = getattr(owner, field)
        for i, stmt in enumerate(stmts):
            if i == 0 and _is_docstring(stmt):
                continue
            yield from self._stmt(stmt, owner, field, i)

    def _stmt(self, stmt: ast.stmt, owner: ast.AST, field: str, i: int) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assert, ast.Pass, ast.Global, ast.Nonlocal)):
            return
        if _is_docstring(stmt):  # also the attribute docstrings after an assignment
            return
        if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            return
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in stmt.decorator_list:
                yield from self._expr(d)
            for default in [*stmt.args.defaults, *[d for d in stmt.args.kw_defaults if d is not None]]:
                yield from self._expr(default)
            self.scope.append(stmt.name)
            self.assigned.append(_assign_counts(stmt))
            yield from self._body(stmt, "body")
            self.assigned.pop()
            self.scope.pop()
            return
        if isinstance(stmt, ast.ClassDef):
            self.scope.append(stmt.name)
            yield from self._body(stmt, "body")
            self.scope.pop()
            return
        if _is_log_call(stmt):
            return
        # removal of the statement itself
        removable = self._removable(stmt)
        if removable:
            stmts = getattr(owner, field)

            def remove(stmts: list[ast.stmt] = stmts, i: int = i) -> None:
                stmts[i] = ast.copy_location(ast.Pass(), stmts[i])

            yield stmt, "stmt", _short(_src(self.source, stmt)), "pass", "removed", remove
        # the statement's expressions and nested bodies
        if isinstance(stmt, (ast.If, ast.While)):
            yield from self._negate(stmt, "test")
            yield from self._expr(stmt.test)
            yield from self._body(stmt, "body")
            if stmt.orelse:
                yield from self._body(stmt, "orelse")
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            yield from self._expr(stmt.iter)
            yield from self._body(stmt, "body")
            if stmt.orelse:
                yield from self._body(stmt, "orelse")
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                yield from self._expr(item.context_expr)
            yield from self._body(stmt, "body")
            return
        if isinstance(stmt, ast.Try):
            yield from self._body(stmt, "body")
            for handler in stmt.handlers:
                yield from self._body(handler, "body")
            if stmt.orelse:
                yield from self._body(stmt, "orelse")
            if stmt.finalbody:
                yield from self._body(stmt, "finalbody")
            return
        if isinstance(stmt, ast.AnnAssign):
            if stmt.value is not None:
                yield from self._expr(stmt.value)
            return
        if isinstance(stmt, ast.Raise):
            return  # removing it is the mutation; its message is not behaviour
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                yield from self._expr(child)

    def _removable(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, (ast.Raise, ast.Continue, ast.Break, ast.Delete, ast.AugAssign)):
            return True
        if isinstance(stmt, ast.Expr):
            return isinstance(stmt.value, (ast.Call, ast.Await))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if stmt.value is None:
                return False
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                return True
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            counts = self.assigned[-1] if self.assigned else {}
            return bool(names) and all(counts.get(n, 0) > 1 for n in names)
        return False

    def _negate(self, owner: ast.AST, field: str) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        test = getattr(owner, field)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # the `not` removal below covers it
        after = f"not ({_short(_src(self.source, test), 100)})"

        def apply(owner: ast.AST = owner, field: str = field) -> None:
            old = getattr(owner, field)
            setattr(owner, field, ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=old), old))

        yield test, "negate", _short(_src(self.source, test)), after, "negated", apply

    def _expr(self, node: ast.expr) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        """Mutations inside one expression tree, in source order (pre-order)."""
        stack: list[ast.AST] = [node]
        order: list[ast.AST] = []
        while stack:
            cur = stack.pop()
            order.append(cur)
            stack.extend(reversed(list(ast.iter_child_nodes(cur))))
        for cur in order:
            yield from self._expr_node(cur)

    def _expr_node(self, cur: ast.AST) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        src = self.source
        if isinstance(cur, ast.Compare):
            for j, op in enumerate(cur.ops):
                new = _CMP_SWAP.get(type(op))
                if new is None:
                    continue

                def apply(cur: ast.Compare = cur, j: int = j, new: type = new) -> None:
                    cur.ops[j] = new()

                yield cur, "cmp", _short(_src(src, cur)), _short(_unparse_with(cur, j, new)), "", apply
        elif isinstance(cur, ast.BinOp):
            new = _BIN_SWAP.get(type(cur.op))
            if new is not None and not _is_str_format(cur):

                def apply_bin(cur: ast.BinOp = cur, new: type = new) -> None:
                    cur.op = new()

                yield cur, "binop", _short(_src(src, cur)), _short(_unparse_op(cur, new)), "", apply_bin
        elif isinstance(cur, ast.BoolOp):
            new_b = ast.Or if isinstance(cur.op, ast.And) else ast.And

            def apply_bool(cur: ast.BoolOp = cur, new: type = new_b) -> None:
                cur.op = new()

            yield cur, "bool", _short(_src(src, cur)), _short(_unparse_op(cur, new_b)), "", apply_bool
        elif isinstance(cur, ast.UnaryOp) and isinstance(cur.op, ast.Not):
            parent_fix = _ReplaceInParent(self.tree, cur)

            def apply_not(cur: ast.UnaryOp = cur, fix: _ReplaceInParent = parent_fix) -> None:
                fix.replace(cur.operand)

            yield cur, "negate", _short(_src(src, cur)), _short(_src(src, cur.operand)), "", apply_not
        elif isinstance(cur, ast.IfExp):
            yield from self._negate(cur, "test")
        elif isinstance(cur, ast.comprehension):
            for j in range(len(cur.ifs)):
                yield from self._negate_list(cur, j)
        elif isinstance(cur, ast.Constant):
            yield from self._const(cur)
        elif isinstance(cur, ast.Call) and isinstance(cur.func, ast.Name) and cur.func.id in _CALL_SWAP:
            name = _CALL_SWAP[cur.func.id]

            def apply_call(cur: ast.Call = cur, name: str = name) -> None:
                assert isinstance(cur.func, ast.Name)
                cur.func = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), cur.func)

            yield cur, "call", _short(_src(src, cur)), _short(name + _src(src, cur)[len(cur.func.id):]), "", apply_call
        elif isinstance(cur, ast.Slice):
            for bound in ("lower", "upper"):
                value = getattr(cur, bound)
                if value is None:
                    continue

                def apply_slice(cur: ast.Slice = cur, bound: str = bound) -> None:
                    old = getattr(cur, bound)
                    setattr(cur, bound, ast.copy_location(ast.BinOp(left=old, op=ast.Add(), right=ast.Constant(1)), old))

                before = _src(src, cur)
                yield cur, "slice", _short(f"[{before}]"), _short(f"[{bound} {_src(src, value)} + 1]"), "", apply_slice

    def _negate_list(self, comp: ast.comprehension, j: int) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        test = comp.ifs[j]
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return

        def apply(comp: ast.comprehension = comp, j: int = j) -> None:
            old = comp.ifs[j]
            comp.ifs[j] = ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=old), old)

        yield test, "negate", _short(_src(self.source, test)), f"not ({_short(_src(self.source, test), 100)})", "", apply

    def _const(self, cur: ast.Constant) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        value = cur.value
        if isinstance(value, bool):
            new: Any = not value
        elif isinstance(value, int):
            new = 0 if value == 1 else value + 1
        elif isinstance(value, float):
            new = value + 1.0
        elif isinstance(value, str) and self.sql:
            yield from self._sql(cur)
            return
        else:
            return

        def apply(cur: ast.Constant = cur, new: Any = new) -> None:
            cur.value = new

        yield cur, "const", _short(_src(self.source, cur)), repr(new), "", apply

    def _sql(self, cur: ast.Constant) -> Iterator[tuple[ast.AST, str, str, str, str, Apply]]:
        text = str(cur.value)
        if not _SQL_HINT.search(text):
            return
        for pattern, repl in _SQL_SWAPS:
            for m in re.finditer(pattern, text):
                if repl == "<>" and _last_clause(text[: m.start()]) in ("SET", "SELECT", "VALUES", None):
                    continue  # assignments and projections are not comparisons
                new = text[: m.start()] + repl + text[m.end():]
                lo, hi = max(0, m.start() - 25), min(len(text), m.end() + 25)

                def apply(cur: ast.Constant = cur, new: str = new) -> None:
                    cur.value = new

                before = " ".join(text[lo:hi].split())
                after = " ".join((text[lo:m.start()] + repl + text[m.end():hi]).split())
                yield cur, "sql", _short(f"'…{before}…'"), _short(f"'…{after}…'"), "", apply


class _ReplaceInParent:
    """Replaces ``node`` by another in whatever field of its parent holds it."""

    def __init__(self, tree: ast.AST, node: ast.AST) -> None:
        self.tree, self.node = tree, node

    def replace(self, new: ast.AST) -> None:
        for parent in ast.walk(self.tree):
            for field, value in ast.iter_fields(parent):
                if value is self.node:
                    setattr(parent, field, new)
                    return
                if isinstance(value, list):
                    for i, item in enumerate(value):
                        if item is self.node:
                            value[i] = new
                            return
        raise LookupError("node not found in its tree")


def _last_clause(prefix: str) -> str | None:
    found = _SQL_CLAUSE.findall(prefix)
    return found[-1] if found else None


def _unparse_with(cur: ast.Compare, j: int, new: type) -> str:
    clone = ast.Compare(left=cur.left, ops=[new() if i == j else o for i, o in enumerate(cur.ops)], comparators=cur.comparators)
    return " ".join(ast.unparse(clone).split())


def _unparse_op(cur: ast.AST, new: type) -> str:
    if isinstance(cur, ast.BinOp):
        clone: ast.AST = ast.BinOp(left=cur.left, op=new(), right=cur.right)
    else:
        assert isinstance(cur, ast.BoolOp)
        clone = ast.BoolOp(op=new(), values=cur.values)
    return " ".join(ast.unparse(clone).split())


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_log_call(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in _LOG_NAMES


def _is_str_format(node: ast.BinOp) -> bool:
    return isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)


def _assign_counts(func: ast.AST) -> dict[str, int]:
    """How often each local name is bound by an assignment in ``func`` (not nested defs)."""
    counts: dict[str, int] = {}
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = [node.target]
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            targets = [node.target]
        for t in targets:
            for name in ast.walk(t):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
        stack.extend(ast.iter_child_nodes(node))
    return counts


def generate(source: str, file: str, *, sql: bool = False) -> list[Mutant]:
    """Every mutant of ``source`` (named ``file`` in reports), in a fixed order."""
    walker = _Walker(source, sql)
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for i, (node, op, before, after, _note, _apply) in enumerate(walker.run()):
        function = ".".join(walker.scope) or "<module>"
        base = Mutant(file, i, op, getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0), function, before, after)
        n = seen.get(base.key, 0)
        seen[base.key] = n + 1
        out.append(base if n == 0 else Mutant(file, i, op, base.line, base.end_line, function, before, f"{after} #{n + 1}"))
    return out


def mutated_tree(source: str, index: int, *, sql: bool = False) -> ast.Module:
    """The module tree of ``source`` with mutant ``index`` applied (-1: none, the harness check)."""
    walker = _Walker(source, sql)
    if index == -1:
        return walker.tree
    for i, (_node, _op, _before, _after, _note, apply) in enumerate(walker.run()):
        if i == index:
            apply()
            tree = ast.fix_missing_locations(walker.tree)
            return tree
    raise IndexError(f"no mutant {index} in this source")


def source_hash(source: str) -> str:
    """A short fingerprint of a source text (the cache key of a run's results)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]
