"""How LangGraph's namespaces, keys and value filters map onto agentmemory records: label checks,
the metadata layout, filter operators and what of a filter the backend can evaluate itself."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import (
    InvalidNamespaceError,
    MatchCondition,
)

from ...errors import InvalidArgument

META_KEY = "langgraph"
"""The metadata key under which an item's namespace, key and value are kept."""
MAX_CANDIDATES = 10_000
"""The most records one search or namespace listing reads from the backend."""


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def check_labels(namespace: Any, *, for_write: bool) -> tuple[str, ...]:
    """LangGraph's namespace rules: string labels, none empty, no ``.``, no NUL; a written
    namespace is non-empty and does not start with ``langgraph``."""
    if not isinstance(namespace, tuple):
        namespace = tuple(namespace) if isinstance(namespace, list) else namespace
    if not isinstance(namespace, tuple):
        raise InvalidNamespaceError(f"Namespace must be a tuple of strings, got {namespace!r}")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {namespace}: labels must be strings")
        if not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {namespace}: labels are non-empty, without '.' or NUL"
            )
    if for_write:
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')
    return namespace


def compare_values(item_value: Any, filter_value: Any) -> bool:
    """LangGraph's filter semantics (``InMemoryStore``): nested objects, exact lists, and the
    ``$eq $ne $gt $gte $lt $lte`` operators."""
    if isinstance(filter_value, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in filter_value):
            return all(apply_operator(item_value, op, arg) for op, arg in filter_value.items())
        if not isinstance(item_value, Mapping):
            return False
        return all(compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(compare_values(i, f) for i, f in zip(item_value, filter_value))
        )
    return bool(item_value == filter_value)


def apply_operator(value: Any, operator: str, arg: Any) -> bool:
    if operator == "$eq":
        return bool(value == arg)
    if operator == "$ne":
        return bool(value != arg)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        try:
            left, right = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[operator]
    raise InvalidArgument("filter", f"unsupported operator {operator!r}; use $eq, $ne, $gt, $gte, $lt, $lte")


def pushdown(flt: Mapping[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """The part of a LangGraph filter the backend evaluates identically (string equality and
    ``$ne`` on strings, nested), and whether that is all of it."""
    out: dict[str, Any] = {}
    exact = True
    for key, expr in (flt or {}).items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            exact = False
            continue
        if isinstance(expr, str):
            out[key] = expr
        elif isinstance(expr, Mapping) and len(expr) == 1 and next(iter(expr)) in ("$eq", "$ne"):
            (op, arg), = expr.items()
            if isinstance(arg, str):
                out[key] = arg if op == "$eq" else {"$not": arg}
            else:
                exact = False
        elif isinstance(expr, Mapping) and expr and not any(isinstance(k, str) and k.startswith("$") for k in expr):
            inner, inner_exact = pushdown(expr)
            if inner:
                out[key] = inner
            exact = exact and inner_exact and bool(inner) and len(inner) == len(expr)
        else:
            exact = False
    return out, exact


def value_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    value = meta.get("value")
    return value if isinstance(value, dict) else {}


def does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise InvalidArgument("match_type", f"must be 'prefix' or 'suffix', got {condition.match_type!r}")
    return all(p == "*" or k == p for k, p in pairs)
