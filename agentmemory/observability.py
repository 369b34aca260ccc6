"""Optional OpenTelemetry spans for everything agentmemory does (``pip install "agentmemory[otel]"``).

Every public operation is an effect generator driven by ``effects.run_sync``/``run_async``, and
every store, embedder and LLM call is a ``Call`` effect; the drivers ask this module for a span
around each, so the whole library is traced from two places:

- ``agentmemory.<operation>`` for each driven operation (``search``, ``context_card``,
  ``add_messages``, ``extraction`` for background extraction, …) and each operation run in
  parallel inside one (the card's per-type searches);
- ``agentmemory.store.<method>`` for each store call (``agentmemory.store.backend``,
  ``agentmemory.result_count``); ``agentmemory.embed`` (model, text count, query or passage);
- ``agentmemory.llm.<purpose>`` for each LLM call — ``extraction``, ``summary``, ``linking`` (from
  the schema asked for) or ``generate`` — with the GenAI semantic-convention attributes
  ``gen_ai.request.model`` and ``gen_ai.usage.input_tokens`` / ``output_tokens``.

Spans nest under whatever span is current (an agent's run, a web request). Without
``opentelemetry-api`` installed, ``TRACING`` is False and the drivers skip this module entirely;
with the API but no tracer provider configured yet, ``active()`` is False and they skip it too
(nothing would be recorded, and building no-op spans costs about 20 µs per call).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from .version import __version__

try:
    from opentelemetry import trace as _trace
except ImportError:  # the offline default: no tracing, no cost
    _trace = None  # type: ignore[assignment]

TRACING: bool = _trace is not None
"""True when ``opentelemetry-api`` is importable; the effect drivers check it before anything else."""

OPERATION_NAMES = {
    "process": "extraction",
    # operations driven directly by a facade method keep the span names they had before they
    # moved out of the client (traces stay comparable)
    "get_memory": "get",
    "thread_record": "thread",
    "list_records": "list",
    "thread_add_memory": "add_memory",
}
"""Operation generator names (less ``_`` and ``_op``) whose span takes another name."""
LLM_PURPOSES = {
    "ExtractionOutput": "extraction",
    "ExtractionWithSummaryOutput": "extraction",
    "SummaryOutput": "summary",
    "LinkOutput": "linking",
}
"""The title of the JSON schema an LLM call asks for → the purpose its span is named by."""


def _tracer() -> Any:
    """The library's tracer; None while no tracer provider is configured."""
    if isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        return None
    return _trace.get_tracer("agentmemory", __version__)


def active() -> bool:
    """True when spans are recorded: ``opentelemetry-api`` is installed and a tracer provider is
    set (checked per operation, so a provider configured after import applies)."""
    return TRACING and _tracer() is not None


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A current span named ``name`` (None inside when tracing is off); None-valued attributes are
    left out. Exceptions are recorded on it and mark it as an error."""
    tracer = _tracer() if TRACING else None
    if tracer is None:
        yield None
        return
    with tracer.start_as_current_span(name, attributes={k: v for k, v in attributes.items() if v is not None}) as current:
        yield current


def operation_name(op: Any) -> str:
    """``agentmemory.<name>`` of an effect generator: its function name less ``_`` and ``_op``."""
    code = getattr(op, "gi_code", None)
    raw = code.co_name if code is not None else type(op).__name__
    name = raw.strip("_").removesuffix("_op")
    return "agentmemory." + OPERATION_NAMES.get(name, name)


def op_span(op: Any) -> contextlib.AbstractContextManager[Any]:
    """The span around one driven operation."""
    return span(operation_name(op))


def _describe(target: Any, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The span name and attributes of ``target.method(*args, **kwargs)``."""
    from .spi import MemoryStore

    if method == "generate":
        schema = kwargs.get("response_json_schema")
        title = schema.get("title") if isinstance(schema, dict) else None
        purpose = LLM_PURPOSES.get(title, "generate") if title else "generate"
        return f"agentmemory.llm.{purpose}", {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": _text(getattr(target, "model", None)),
            "agentmemory.llm": _text(getattr(target, "name", None)) or type(target).__name__,
            "agentmemory.llm.schema": _text(title),
            "agentmemory.llm.messages": len(args[0]) if args and isinstance(args[0], list) else None,
        }
    if method == "embed":
        texts = args[0] if args else []
        return "agentmemory.embed", {
            "agentmemory.embedder": _text(getattr(target, "name", None)) or type(target).__name__,
            "agentmemory.embedder.model": _text(getattr(target, "model", None)),
            "agentmemory.embed.texts": len(texts) if isinstance(texts, list) else None,
            "agentmemory.embed.is_query": bool(kwargs.get("is_query", False)),
        }
    if isinstance(target, MemoryStore):
        return f"agentmemory.store.{method}", {"agentmemory.store.backend": type(target).__name__}
    prefix = getattr(target, "trace_name", None) or type(target).__name__
    return f"agentmemory.{prefix}.{method}", {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _record(current: Any, result: Any) -> None:
    """Attributes known only from the answer: token usage, result counts."""
    usage = getattr(result, "usage", None)
    if isinstance(usage, dict):
        for ours, theirs in (
            ("prompt_tokens", "gen_ai.usage.input_tokens"),
            ("completion_tokens", "gen_ai.usage.output_tokens"),
            ("total_tokens", "agentmemory.llm.total_tokens"),
        ):
            if isinstance(usage.get(ours), int):
                current.set_attribute(theirs, usage[ours])
    elif isinstance(result, (list, tuple)):
        current.set_attribute("agentmemory.result_count", len(result))


def traced_call(call: Any, perform: Callable[..., Any]) -> Any:
    """``perform(*call.args, **call.kwargs)`` (the sync method of a ``Call`` effect) inside its span."""
    name, attributes = _describe(call.target, call.method, call.args, call.kwargs)
    with span(name, **attributes) as current:
        result = perform(*call.args, **call.kwargs)
        if current is not None and current.is_recording():
            _record(current, result)
        return result


async def atraced_call(call: Any, perform: Callable[..., Awaitable[Any]]) -> Any:
    """``await perform(*call.args, **call.kwargs)`` (the async twin of a ``Call``) inside its span."""
    name, attributes = _describe(call.target, call.method, call.args, call.kwargs)
    with span(name, **attributes) as current:
        result = await perform(*call.args, **call.kwargs)
        if current is not None and current.is_recording():
            _record(current, result)
        return result
