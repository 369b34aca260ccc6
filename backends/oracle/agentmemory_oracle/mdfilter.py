"""Metadata filters as ``JSON_EXISTS`` over hashed facts: bound parameters only, exact semantics.

Why not ``JSON_EXISTS(metadata, '$."key"?(@ == $v)')`` on the metadata itself? Oracle requires the
path to be a SQL text literal, so every metadata *key* would have to be pasted into SQL text, and
SQL/JSON comparison semantics (lax array unwrapping, string/number casts, numbers vs booleans,
deep object equality) differ from ``agentmemory.filters`` in ways that cannot be checked without
a server. Instead each record stores, next to its metadata, a JSON column ``md_keys`` =
``{"k": [fact, ...]}`` computed in Python at write time. A fact is a short string naming one
thing that is true of the metadata, with keys and values hashed:

- ``n:<path>``            a value exists at ``path`` (a list of object keys from the top)
- ``o:<path>`` / ``a:<path>``  that value is an object / an array
- ``v:<path>:<value>``    that value equals ``value`` (canonical form, deep)
- ``e:<path>:<value>``    that value is an array holding an element equal to ``value``

A filter compiles to a boolean tree over such facts (``compile_filter``), and each leaf renders to
``JSON_EXISTS(alias.md_keys, '$.k?(@.string() == $v)' PASSING :bind AS "v")``: the SQL text is a
fixed template, every caller key and value reaches the server only as a hash in a bind. The
canonical form reproduces ``agentmemory.filters._equal`` (booleans are not numbers, numbers compare
as floats, lists by order, objects by key set), and ``evaluate`` runs the same tree in Python, so
``evaluate(compile_filter(f), metadata_facts(m)) == metadata_matches(m, f)`` is tested directly.
A multivalue index on ``md_keys.k`` (see ``ddl``) lets Oracle answer each leaf from an index.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentmemory.filters import OPERATORS

FACTS_KEY = "k"
"""Field of ``md_keys`` that holds the fact array."""

JSON_EXISTS_TEMPLATE = "JSON_EXISTS({column}, '$.k?(@.string() == $v)' PASSING {bind} AS \"v\")"
"""The only SQL/JSON path this module ever emits; ``{bind}`` is a bind placeholder like ``:m0``."""


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def path_hash(path: tuple[str, ...]) -> str:
    """Hash of a key path (unambiguous: the JSON array of its keys)."""
    return _digest(json.dumps(list(path), ensure_ascii=True, separators=(",", ":")))


def canonical(value: Any) -> str:
    """A string equal for two JSON values exactly when ``agentmemory.filters._equal`` says so."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        # filters._equal compares numbers exactly (Python's int/float ==): an integral float is
        # the int it equals (-0.0 is 0), any other float its repr, so 2**53 + 1 != float(2**53)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"i{value}" if isinstance(value, int) else f"n{value!r}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, Mapping):
        items = sorted((str(k), canonical(v)) for k, v in value.items())
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=True)}:{v}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def value_hash(value: Any) -> str:
    """Hash of a value's canonical form."""
    return _digest(canonical(value))


def fact(tag: str, path: tuple[str, ...], value: Any = None, *, with_value: bool = False) -> str:
    """One fact string (see the module docstring)."""
    head = f"{tag}:{path_hash(path)}"
    return f"{head}:{value_hash(value)}" if with_value else head


def metadata_facts(metadata: Mapping[str, Any] | None) -> list[str]:
    """Every fact true of ``metadata``, sorted and de-duplicated (the stored ``md_keys.k``)."""
    out: set[str] = set()

    def visit(path: tuple[str, ...], value: Any) -> None:
        out.add(fact("n", path))
        out.add(fact("v", path, value, with_value=True))
        if isinstance(value, Mapping):
            out.add(fact("o", path))
            for key, sub in value.items():
                visit((*path, str(key)), sub)
        elif isinstance(value, (list, tuple)):
            out.add(fact("a", path))
            for element in value:
                out.add(fact("e", path, element, with_value=True))

    for key, value in (metadata or {}).items():
        visit((str(key),), value)
    return sorted(out)


def md_keys_document(metadata: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """The JSON document stored in the ``md_keys`` column."""
    return {FACTS_KEY: metadata_facts(metadata)}


# ---- the boolean tree ----------------------------------------------------------------------
@dataclass(frozen=True)
class Has:
    """Leaf: the record's fact set contains ``fact``."""

    fact: str


@dataclass(frozen=True)
class All:
    """Conjunction (empty = true)."""

    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class AnyOf:
    """Disjunction (empty = false)."""

    parts: tuple[Predicate, ...]


@dataclass(frozen=True)
class Not:
    """Negation."""

    part: Predicate


Predicate = Has | All | AnyOf | Not


def _all(parts: Iterable[Predicate]) -> Predicate:
    flat: list[Predicate] = []
    for part in parts:
        flat.extend(part.parts if isinstance(part, All) else (part,))
    return flat[0] if len(flat) == 1 else All(tuple(flat))


def _any(parts: Iterable[Predicate]) -> Predicate:
    flat: list[Predicate] = []
    for part in parts:
        flat.extend(part.parts if isinstance(part, AnyOf) else (part,))
    return flat[0] if len(flat) == 1 else AnyOf(tuple(flat))


def _not(part: Predicate) -> Predicate:
    return part.part if isinstance(part, Not) else Not(part)


def compile_filter(flt: Mapping[str, Any]) -> Predicate:
    """The predicate over facts equivalent to ``agentmemory.filters.metadata_matches(_, flt)``.

    ``flt`` must already be validated (``validate_metadata_filter``).
    """
    return _all(_compile(((str(key),)), expr) for key, expr in flt.items())


def _is_operator(expr: Any) -> bool:
    return isinstance(expr, Mapping) and len(expr) == 1 and next(iter(expr)) in OPERATORS


def _compile(path: tuple[str, ...], expr: Any) -> Predicate:
    """``_match(value_at(path), expr)``, false whenever nothing exists at ``path`` except ``$not``."""
    if _is_operator(expr):
        ((op, arg),) = expr.items()
        if op == "$not":
            exists = Has(fact("n", path))
            # missing counts as a match; otherwise the negation of the inner expression
            return _any((_not(exists), _all((exists, _not(_compile(path, arg))))))
        if op == "$array_contains":
            wanted = arg if isinstance(arg, list) else [arg]
            if not wanted:
                return Has(fact("a", path))
            return _all(Has(fact("e", path, w, with_value=True)) for w in wanted)
        # $array_contains_any: a non-empty list (validated)
        return _any(Has(fact("e", path, w, with_value=True)) for w in arg)
    if isinstance(expr, Mapping):
        # a nested object: the value must be an object and match every sub-expression
        return _all((Has(fact("o", path)), *(_compile((*path, str(k)), e) for k, e in expr.items())))
    return Has(fact("v", path, expr, with_value=True))


def evaluate(pred: Predicate, facts: Iterable[str]) -> bool:
    """Evaluate ``pred`` against a fact set in Python (the reference for the SQL rendering)."""
    have = facts if isinstance(facts, (set, frozenset)) else set(facts)
    return _eval(pred, have)


def _eval(pred: Predicate, have: set[str] | frozenset[str]) -> bool:
    if isinstance(pred, Has):
        return pred.fact in have
    if isinstance(pred, All):
        return all(_eval(p, have) for p in pred.parts)
    if isinstance(pred, AnyOf):
        return any(_eval(p, have) for p in pred.parts)
    return not _eval(pred.part, have)


def render(pred: Predicate, column: str, bind: Any) -> str:
    """SQL text for ``pred`` over the ``md_keys`` column ``column``.

    ``bind(value) -> str`` registers a bind value and returns its placeholder (``:m0``); the only
    values passed are fact strings (hex hashes), and the SQL text holds only fixed templates.
    """
    if isinstance(pred, Has):
        return JSON_EXISTS_TEMPLATE.format(column=column, bind=bind(pred.fact))
    if isinstance(pred, All):
        if not pred.parts:
            return "1 = 1"
        return "(" + " AND ".join(render(p, column, bind) for p in pred.parts) + ")"
    if isinstance(pred, AnyOf):
        if not pred.parts:
            return "1 = 0"
        return "(" + " OR ".join(render(p, column, bind) for p in pred.parts) + ")"
    return "NOT " + render(pred.part, column, bind)
