"""The metadata-filter language (SPEC §7): validation and the reference matcher.

A filter is a mapping ANDed over its keys. A plain value must equal the stored value (the key
must exist; lists compare exactly, booleans never equal numbers). A nested mapping without
operators matches a nested object recursively. Operators, as the value of a key:
``{"$array_contains": v | [v, ...]}`` (the stored list holds v, or all of them),
``{"$array_contains_any": [v, ...]}`` (holds at least one), ``{"$not": expr}`` (negates the
expression; a missing key counts as a match). SQL backends register ``metadata_matches`` as a
user-defined function, so every backend evaluates exactly these rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import InvalidArgument
from .nesting import MAX_FILTER_DEPTH, nested_deeper_than

OPERATORS = frozenset({"$array_contains", "$array_contains_any", "$not"})
_MISSING = object()


def validate_metadata_filter(flt: Any, argument: str = "metadata_filter") -> None:
    """Raise ``InvalidArgument`` unless ``flt`` is a well-formed filter, nested at most
    ``validation.MAX_FILTER_DEPTH`` (128) levels."""
    if isinstance(flt, Mapping) and nested_deeper_than(flt, MAX_FILTER_DEPTH):
        raise InvalidArgument(argument, f"is nested deeper than {MAX_FILTER_DEPTH} levels of objects and arrays")
    _validate_filter(flt, argument)


def _validate_filter(flt: Any, argument: str) -> None:
    if not isinstance(flt, Mapping):
        raise InvalidArgument(argument, f"must be a mapping, got {type(flt).__name__}")
    for key, expr in flt.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument(argument, f"keys must be non-empty strings, got {key!r}")
        if key.startswith("$"):
            raise InvalidArgument(argument, f"operator {key!r} must be the value of a field")
        _validate_expr(expr, f"{argument}.{key}")


def _validate_expr(expr: Any, path: str) -> None:
    if isinstance(expr, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in expr):
        if len(expr) != 1:
            raise InvalidArgument(path, "an operator must be the only key of its object")
        (op, arg), = expr.items()
        if op not in OPERATORS:
            raise InvalidArgument(path, f"unknown operator {op!r}; known: {sorted(OPERATORS)}")
        if op == "$not":
            _validate_expr(arg, f"{path}.$not")
        elif op == "$array_contains_any":
            if not isinstance(arg, list) or not arg:
                raise InvalidArgument(path, "$array_contains_any takes a non-empty list")
            _validate_json_value(arg, path)
        else:
            _validate_json_value(arg, path)
        return
    if isinstance(expr, Mapping):
        _validate_filter(expr, path)
        return
    _validate_json_value(expr, path)


def _validate_json_value(value: Any, path: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(path, f"value is not plain JSON ({exc})") from None


def metadata_matches(metadata: Mapping[str, Any] | None, flt: Mapping[str, Any] | None) -> bool:
    """True when ``metadata`` satisfies ``flt`` (None or empty filter matches everything)."""
    if not flt:
        return True
    meta = metadata or {}
    return all(_match(meta.get(key, _MISSING), expr) for key, expr in flt.items())


def metadata_matches_json(metadata_json: str | None, filter_json: str) -> bool:
    """``metadata_matches`` over JSON text: the form SQL backends register as a UDF."""
    meta = json.loads(metadata_json) if metadata_json else {}
    return metadata_matches(meta, json.loads(filter_json))


def _match(value: Any, expr: Any) -> bool:
    if isinstance(expr, Mapping) and len(expr) == 1:
        (op, arg), = expr.items()
        if op == "$not":
            return value is _MISSING or not _match(value, arg)
        if op == "$array_contains":
            if not isinstance(value, list):
                return False
            wanted = arg if isinstance(arg, list) else [arg]
            return all(any(_equal(v, w) for v in value) for w in wanted)
        if op == "$array_contains_any":
            return isinstance(value, list) and any(_equal(v, w) for v in value for w in arg)
    if value is _MISSING:
        return False
    if isinstance(expr, Mapping):
        return isinstance(value, Mapping) and all(
            _match(value.get(k, _MISSING), e) for k, e in expr.items()
        )
    return _equal(value, expr)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: bools are not numbers, 1 == 1.0, numbers compare exactly (Python's int
    and float comparison, so 2**53 + 1 never equals 2**53 or its float), lists and objects
    compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)
